#pragma once
// Elementwise lowerings: one table entry per math function, shared by every
// execution mode. Operands arrive already converted to the compute dtype and
// broadcast to the result shape.
#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Value;

enum class Unary {
  Abs, Neg, Exp, Exp2, Expm1, Log, Log2, Log10, Log1p, Sqrt, Rsqrt, Reciprocal, Square,
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh, Asinh, Acosh, Atanh,
  Floor, Ceil, Round, Trunc, Frac, Sign, Sgn, Sigmoid, Relu, Silu, Erf, Erfc, GeluErf, GeluTanh,
  BitwiseNot, LogicalNot, IsNan, IsInf, IsFinite, IsPosInf, IsNegInf, Signbit,
};

enum class Binary {
  Add, Sub, Mul, Div, DivTrunc, DivFloor, Remainder, Fmod, Pow, Max, Min, Atan2,
  BitAnd, BitOr, BitXor, LogicalAnd, LogicalOr, LogicalXor, ShiftLeft, ShiftRight,
  Eq, Ne, Lt, Le, Gt, Ge, Hypot, Copysign, Xlogy,
};

Value unary(Builder& b, Unary op, Value x);
Value binary(Builder& b, Binary op, Value x, Value y);
// maximum/minimum as PyTorch's: NaN in either operand wins (XLA:CPU's maximum keeps only a NaN on
// its left: max(1, NaN) is 1); or/and for bool.
Value maximumNan(Builder& b, Value x, Value y);
Value minimumNan(Builder& b, Value x, Value y);
bool isComparison(Binary op);
// Whether the lowering is defined for complex operands (the kernels refuse the others, as CPU does).
bool supportsComplex(Unary op);
bool supportsComplex(Binary op);

// Numpy-style broadcast of `x` to `shape` (trailing dims aligned).
Value broadcastTo(Builder& b, Value x, const hlo::Shape& shape);
Value erf(Builder& b, Value x);
// where(pred, x, y) with all three broadcast to one shape.
Value where(Builder& b, Value pred, Value x, Value y);

}  // namespace tpu::lowering
