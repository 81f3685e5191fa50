// Registration of the unary and binary pointwise ops: every op gets its
// functional, in-place and out= variants from one template, keyed by the
// lowering table entry and a dtype policy.
#include <torch/library.h>

#include "Elementwise.h"

namespace tpu::aten {
namespace {

using lowering::Binary;
using lowering::Unary;

// How a pointwise op picks its result dtype.
enum class Policy {
  Same,        // result = promoted input dtype (abs, add, ...)
  Float,       // integers promote to the default float (exp, div, ...)
  Modulus,     // as Same, but complex -> its real type (abs)
  Bool,        // result is bool (isnan, eq, logical_and, ...)
  IntegerOnly  // bitwise ops: integers and bool only
};

c10::ScalarType policyResult(Policy p, c10::ScalarType promoted, const char* name) {
  switch (p) {
    case Policy::Same: return promoted;
    case Policy::Modulus: return c10::toRealValueType(promoted);
    case Policy::Float: return c10::isIntegralType(promoted, true) ? defaultFloat() : promoted;
    case Policy::Bool: return c10::kBool;
    case Policy::IntegerOnly:
      TORCH_CHECK(c10::isIntegralType(promoted, true), name, " is only supported for integer and bool tensors, got ",
                  promoted);
      return promoted;
  }
  return promoted;
}

// Dtype in which the math happens (before the runtime converts to the output).
c10::ScalarType policyCompute(Policy p, c10::ScalarType promoted, c10::ScalarType result) {
  if (p == Policy::Bool || p == Policy::Modulus) return opmathType(promoted);
  return opmathType(result);
}

// ---- unary -----------------------------------------------------------------

// The aten name of each table entry (set at registration), for the complex refusal.
const char*& unaryName(Unary k) {
  static const char* names[64] = {};
  return names[static_cast<int>(k)];
}
const char*& binaryName(Binary k) {
  static const char* names[64] = {};
  return names[static_cast<int>(k)];
}

// Complex operands reach only lowerings defined for them; the others raise as CPU does.
template <class K>
void checkComplex(K k, c10::ScalarType compute, const char* name) {
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isComplexType(compute) || lowering::supportsComplex(k), "\"", name ? name : "op",
                              "\" is not implemented for '", c10::toString(compute), "' on tpu");
}

template <Unary K, Policy P>
struct UnaryOp {
  static void run(const Arg& x, const at::Tensor& out, c10::ScalarType promoted, c10::ScalarType result) {
    checkComplex(K, promoted, unaryName(K));
    runPointwise(TPU_OP("aten::unary"), {&x}, out, policyCompute(P, promoted, result),
                 [](hlo::Builder& b, std::vector<hlo::Value>& v) { return lowering::unary(b, K, v[0]); });
  }
  static at::Tensor functional(const at::Tensor& self) {
    Arg x = Arg::of(self);
    auto result = policyResult(P, self.scalar_type(), "unary op");
    at::Tensor out = emptyPointwise({&x}, self.sizes(), self.options().dtype(result));
    run(x, out, self.scalar_type(), result);
    return out;
  }
  static at::Tensor& inplace(at::Tensor& self) {
    Arg x = Arg::of(self);
    auto result = policyResult(P, self.scalar_type(), "unary op");
    checkInplace("unary op", self, self.sizes(), result);
    run(x, self, self.scalar_type(), result);
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, at::Tensor& out) {
    Arg x = Arg::of(self);
    auto result = policyResult(P, self.scalar_type(), "unary op");
    prepareOut("unary op", out, self.sizes(), result);
    run(x, out, self.scalar_type(), result);
    return out;
  }
};

// ---- binary ----------------------------------------------------------------

template <Binary K, Policy P>
struct BinaryOp {
  static void run(const Arg& x, const Arg& y, const at::Tensor& out, c10::ScalarType promoted,
                  c10::ScalarType result) {
    checkComplex(K, promoted, binaryName(K));
    runPointwise(TPU_OP("aten::binary"), {&x, &y}, out, policyCompute(P, promoted, result),
                 [](hlo::Builder& b, std::vector<hlo::Value>& v) { return lowering::binary(b, K, v[0], v[1]); });
  }
  static at::Tensor call(const Arg& x, const Arg& y) {
    auto promoted = resultType({&x, &y});
    auto result = policyResult(P, promoted, "binary op");
    at::Tensor like = x.isTensor() ? x.tensor : y.tensor;
    at::Tensor out = emptyPointwise({&x, &y}, broadcastShape({&x, &y}), like.options().dtype(result));
    run(x, y, out, promoted, result);
    return out;
  }
  static at::Tensor& callInplace(at::Tensor& self, const Arg& y) {
    Arg x = Arg::of(self);
    auto promoted = resultType({&x, &y});
    auto result = policyResult(P, promoted, "binary op");
    checkInplace("binary op", self, broadcastShape({&x, &y}), result);
    run(x, y, self, promoted, result);
    return self;
  }
  static at::Tensor& callOut(const Arg& x, const Arg& y, at::Tensor& out) {
    auto promoted = resultType({&x, &y});
    auto result = policyResult(P, promoted, "binary op");
    prepareOut("binary op", out, broadcastShape({&x, &y}), result);
    run(x, y, out, promoted, result);
    return out;
  }
  static at::Tensor tt(const at::Tensor& a, const at::Tensor& b) { return call(Arg::of(a), Arg::of(b)); }
  static at::Tensor& ttInplace(at::Tensor& a, const at::Tensor& b) { return callInplace(a, Arg::of(b)); }
  static at::Tensor& ttOut(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
    return callOut(Arg::of(a), Arg::of(b), out);
  }
  // CPU wraps a Scalar overload's scalar as a 0-dim operand, except pow's (a unary op of the tensor).
  static Arg scalar(const c10::Scalar& s) { return K == Binary::Pow ? Arg::of(s) : Arg::wrapped(s); }
  static at::Tensor ts(const at::Tensor& a, const c10::Scalar& b) { return call(Arg::of(a), scalar(b)); }
  static at::Tensor& tsInplace(at::Tensor& a, const c10::Scalar& b) { return callInplace(a, scalar(b)); }
  static at::Tensor& tsOut(const at::Tensor& a, const c10::Scalar& b, at::Tensor& out) {
    return callOut(Arg::of(a), scalar(b), out);
  }
  static at::Tensor st(const c10::Scalar& a, const at::Tensor& b) { return call(scalar(a), Arg::of(b)); }
  static at::Tensor& stOut(const c10::Scalar& a, const at::Tensor& b, at::Tensor& out) {
    return callOut(scalar(a), Arg::of(b), out);
  }
};

// ---- add/sub with alpha and div with rounding modes -------------------------

template <bool Subtract>
struct AddOp {
  static void run(const Arg& x, const Arg& y, const c10::Scalar& alpha, const at::Tensor& out,
                  c10::ScalarType result) {
    TORCH_CHECK(!(Subtract && result == c10::kBool),
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                "`logical_xor()` operator instead.");
    Arg a = Arg::of(alpha);
    runPointwise(TPU_OP("aten::add"), {&x, &y, &a}, out, opmathType(result),
                 [](hlo::Builder& b, std::vector<hlo::Value>& v) {
                   hlo::Value scaled = lowering::binary(b, Binary::Mul, v[1], v[2]);
                   return lowering::binary(b, Subtract ? Binary::Sub : Binary::Add, v[0], scaled);
                 });
  }
  static at::Tensor functional(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
    Arg x = Arg::of(self), y = Arg::of(other);
    auto result = resultType({&x, &y});
    at::Tensor like = x.isTensor() ? x.tensor : y.tensor;
    at::Tensor out = emptyPointwise({&x, &y}, broadcastShape({&x, &y}), like.options().dtype(result));
    run(x, y, alpha, out, result);
    return out;
  }
  static at::Tensor& inplace(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
    Arg x = Arg::of(self), y = Arg::of(other);
    auto result = resultType({&x, &y});
    checkInplace(Subtract ? "sub_" : "add_", self, broadcastShape({&x, &y}), result);
    run(x, y, alpha, self, result);
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha,
                         at::Tensor& out) {
    Arg x = Arg::of(self), y = Arg::of(other);
    auto result = resultType({&x, &y});
    prepareOut(Subtract ? "sub" : "add", out, broadcastShape({&x, &y}), result);
    run(x, y, alpha, out, result);
    return out;
  }
};

Binary divKind(std::optional<c10::string_view> mode) {
  if (!mode.has_value()) return Binary::Div;
  if (*mode == "trunc") return Binary::DivTrunc;
  TORCH_CHECK(*mode == "floor", "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
              *mode, "'");
  return Binary::DivFloor;
}

at::Tensor divMode(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  switch (divKind(mode)) {
    case Binary::DivTrunc: return BinaryOp<Binary::DivTrunc, Policy::Same>::tt(a, b);
    case Binary::DivFloor: return BinaryOp<Binary::DivFloor, Policy::Same>::tt(a, b);
    default: return BinaryOp<Binary::Div, Policy::Float>::tt(a, b);
  }
}
at::Tensor& divModeInplace(at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  switch (divKind(mode)) {
    case Binary::DivTrunc: return BinaryOp<Binary::DivTrunc, Policy::Same>::ttInplace(a, b);
    case Binary::DivFloor: return BinaryOp<Binary::DivFloor, Policy::Same>::ttInplace(a, b);
    default: return BinaryOp<Binary::Div, Policy::Float>::ttInplace(a, b);
  }
}
at::Tensor& divModeOut(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode,
                       at::Tensor& out) {
  switch (divKind(mode)) {
    case Binary::DivTrunc: return BinaryOp<Binary::DivTrunc, Policy::Same>::ttOut(a, b, out);
    case Binary::DivFloor: return BinaryOp<Binary::DivFloor, Policy::Same>::ttOut(a, b, out);
    default: return BinaryOp<Binary::Div, Policy::Float>::ttOut(a, b, out);
  }
}

}  // namespace

#define TPU_UNARY(name, K, P)                                    \
  unaryName(Unary::K) = name;                                    \
  m.impl(name, &UnaryOp<Unary::K, Policy::P>::functional);       \
  m.impl(name "_", &UnaryOp<Unary::K, Policy::P>::inplace);      \
  m.impl(name ".out", &UnaryOp<Unary::K, Policy::P>::out);

// name.Tensor, name_.Tensor and the given out= overload.
#define TPU_BINARY_TENSOR(name, K, P, outName)                        \
  binaryName(Binary::K) = name;                                     \
  m.impl(name ".Tensor", &BinaryOp<Binary::K, Policy::P>::tt);        \
  m.impl(name "_.Tensor", &BinaryOp<Binary::K, Policy::P>::ttInplace); \
  m.impl(outName, &BinaryOp<Binary::K, Policy::P>::ttOut);

// name.Scalar, name_.Scalar, name.Scalar_out.
#define TPU_BINARY_SCALAR(name, K, P)                                  \
  binaryName(Binary::K) = name;                                     \
  m.impl(name ".Scalar", &BinaryOp<Binary::K, Policy::P>::ts);         \
  m.impl(name "_.Scalar", &BinaryOp<Binary::K, Policy::P>::tsInplace); \
  m.impl(name ".Scalar_out", &BinaryOp<Binary::K, Policy::P>::tsOut);

#define TPU_BINARY_PLAIN(name, K, P)                             \
  binaryName(Binary::K) = name;                                     \
  m.impl(name, &BinaryOp<Binary::K, Policy::P>::tt);             \
  m.impl(name "_", &BinaryOp<Binary::K, Policy::P>::ttInplace);  \
  m.impl(name ".out", &BinaryOp<Binary::K, Policy::P>::ttOut);

#define TPU_COMPARE(name, K)                          \
  TPU_BINARY_TENSOR(name, K, Bool, name ".Tensor_out") \
  TPU_BINARY_SCALAR(name, K, Bool)

// Shift operators: the bitwise_*_shift family and the Python dunder overloads.
#define TPU_SHIFT(name, dunder, idunder, K)                                               \
  TPU_BINARY_TENSOR(name, K, IntegerOnly, name ".Tensor_out")                             \
  m.impl(name ".Tensor_Scalar", &BinaryOp<Binary::K, Policy::IntegerOnly>::ts);           \
  m.impl(name "_.Tensor_Scalar", &BinaryOp<Binary::K, Policy::IntegerOnly>::tsInplace);   \
  m.impl(name ".Tensor_Scalar_out", &BinaryOp<Binary::K, Policy::IntegerOnly>::tsOut);    \
  m.impl(name ".Scalar_Tensor", &BinaryOp<Binary::K, Policy::IntegerOnly>::st);           \
  m.impl(dunder ".Scalar", &BinaryOp<Binary::K, Policy::IntegerOnly>::ts);                \
  m.impl(dunder ".Tensor", &BinaryOp<Binary::K, Policy::IntegerOnly>::tt);                \
  m.impl(idunder ".Scalar", &BinaryOp<Binary::K, Policy::IntegerOnly>::tsInplace);        \
  m.impl(idunder ".Tensor", &BinaryOp<Binary::K, Policy::IntegerOnly>::ttInplace);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  TPU_UNARY("abs", Abs, Modulus)
  TPU_UNARY("neg", Neg, Same)
  TPU_UNARY("exp", Exp, Float)
  TPU_UNARY("exp2", Exp2, Float)
  TPU_UNARY("expm1", Expm1, Float)
  TPU_UNARY("log", Log, Float)
  TPU_UNARY("log2", Log2, Float)
  TPU_UNARY("log10", Log10, Float)
  TPU_UNARY("log1p", Log1p, Float)
  TPU_UNARY("sqrt", Sqrt, Float)
  TPU_UNARY("rsqrt", Rsqrt, Float)
  TPU_UNARY("reciprocal", Reciprocal, Float)
  TPU_UNARY("sin", Sin, Float)
  TPU_UNARY("cos", Cos, Float)
  TPU_UNARY("tan", Tan, Float)
  TPU_UNARY("asin", Asin, Float)
  TPU_UNARY("acos", Acos, Float)
  TPU_UNARY("atan", Atan, Float)
  TPU_UNARY("sinh", Sinh, Float)
  TPU_UNARY("cosh", Cosh, Float)
  TPU_UNARY("tanh", Tanh, Float)
  TPU_UNARY("asinh", Asinh, Float)
  TPU_UNARY("acosh", Acosh, Float)
  TPU_UNARY("atanh", Atanh, Float)
  TPU_UNARY("floor", Floor, Same)
  TPU_UNARY("ceil", Ceil, Same)
  TPU_UNARY("round", Round, Same)
  TPU_UNARY("trunc", Trunc, Same)
  TPU_UNARY("frac", Frac, Same)
  TPU_UNARY("sign", Sign, Same)
  TPU_UNARY("sgn", Sgn, Same)
  TPU_UNARY("sigmoid", Sigmoid, Float)
  TPU_UNARY("erf", Erf, Float)
  TPU_UNARY("erfc", Erfc, Float)
  TPU_UNARY("bitwise_not", BitwiseNot, IntegerOnly)
  TPU_UNARY("logical_not", LogicalNot, Bool)
  TPU_UNARY("signbit", Signbit, Bool)
  m.impl("relu", &UnaryOp<Unary::Relu, Policy::Same>::functional);
  m.impl("relu_", &UnaryOp<Unary::Relu, Policy::Same>::inplace);
  m.impl("silu", &UnaryOp<Unary::Silu, Policy::Same>::functional);
  m.impl("silu_", &UnaryOp<Unary::Silu, Policy::Same>::inplace);
  m.impl("silu.out", &UnaryOp<Unary::Silu, Policy::Same>::out);
  m.impl("isnan", &UnaryOp<Unary::IsNan, Policy::Bool>::functional);
  m.impl("isinf", &UnaryOp<Unary::IsInf, Policy::Bool>::functional);
  m.impl("isfinite", &UnaryOp<Unary::IsFinite, Policy::Bool>::functional);
  m.impl("isposinf", &UnaryOp<Unary::IsPosInf, Policy::Bool>::functional);
  m.impl("isposinf.out", &UnaryOp<Unary::IsPosInf, Policy::Bool>::out);
  m.impl("isneginf", &UnaryOp<Unary::IsNegInf, Policy::Bool>::functional);
  m.impl("isneginf.out", &UnaryOp<Unary::IsNegInf, Policy::Bool>::out);

  m.impl("add.Tensor", &AddOp<false>::functional);
  m.impl("add_.Tensor", &AddOp<false>::inplace);
  m.impl("add.out", &AddOp<false>::out);
  m.impl("sub.Tensor", &AddOp<true>::functional);
  m.impl("sub_.Tensor", &AddOp<true>::inplace);
  m.impl("sub.out", &AddOp<true>::out);
  TPU_BINARY_TENSOR("mul", Mul, Same, "mul.out")
  TPU_BINARY_TENSOR("div", Div, Float, "div.out")
  m.impl("div.Tensor_mode", divMode);
  m.impl("div_.Tensor_mode", divModeInplace);
  m.impl("div.out_mode", divModeOut);
  TPU_BINARY_TENSOR("remainder", Remainder, Same, "remainder.Tensor_out")
  TPU_BINARY_SCALAR("remainder", Remainder, Same)
  m.impl("remainder.Scalar_Tensor", &BinaryOp<Binary::Remainder, Policy::Same>::st);
  TPU_BINARY_TENSOR("fmod", Fmod, Same, "fmod.Tensor_out")
  TPU_BINARY_SCALAR("fmod", Fmod, Same)
  m.impl("pow.Tensor_Tensor", &BinaryOp<Binary::Pow, Policy::Same>::tt);
  m.impl("pow_.Tensor", &BinaryOp<Binary::Pow, Policy::Same>::ttInplace);
  m.impl("pow.Tensor_Tensor_out", &BinaryOp<Binary::Pow, Policy::Same>::ttOut);
  m.impl("pow.Tensor_Scalar", &BinaryOp<Binary::Pow, Policy::Same>::ts);
  m.impl("pow_.Scalar", &BinaryOp<Binary::Pow, Policy::Same>::tsInplace);
  m.impl("pow.Tensor_Scalar_out", &BinaryOp<Binary::Pow, Policy::Same>::tsOut);
  m.impl("pow.Scalar", &BinaryOp<Binary::Pow, Policy::Same>::st);
  m.impl("pow.Scalar_out", &BinaryOp<Binary::Pow, Policy::Same>::stOut);
  TPU_BINARY_PLAIN("maximum", Max, Same)
  TPU_BINARY_PLAIN("minimum", Min, Same)
  TPU_BINARY_PLAIN("atan2", Atan2, Float)
  TPU_BINARY_PLAIN("hypot", Hypot, Float)
  TPU_BINARY_TENSOR("copysign", Copysign, Float, "copysign.out")
  TPU_BINARY_SCALAR("copysign", Copysign, Float)
  TPU_BINARY_TENSOR("xlogy", Xlogy, Float, "xlogy.OutTensor")
  m.impl("xlogy.Scalar_Other", &BinaryOp<Binary::Xlogy, Policy::Float>::ts);
  m.impl("xlogy_.Scalar_Other", &BinaryOp<Binary::Xlogy, Policy::Float>::tsInplace);
  m.impl("xlogy.OutScalar_Other", &BinaryOp<Binary::Xlogy, Policy::Float>::tsOut);
  m.impl("xlogy.Scalar_Self", &BinaryOp<Binary::Xlogy, Policy::Float>::st);
  m.impl("xlogy.OutScalar_Self", &BinaryOp<Binary::Xlogy, Policy::Float>::stOut);
  TPU_BINARY_TENSOR("bitwise_and", BitAnd, IntegerOnly, "bitwise_and.Tensor_out")
  TPU_BINARY_SCALAR("bitwise_and", BitAnd, IntegerOnly)
  TPU_BINARY_TENSOR("bitwise_or", BitOr, IntegerOnly, "bitwise_or.Tensor_out")
  TPU_BINARY_SCALAR("bitwise_or", BitOr, IntegerOnly)
  TPU_BINARY_TENSOR("bitwise_xor", BitXor, IntegerOnly, "bitwise_xor.Tensor_out")
  TPU_BINARY_SCALAR("bitwise_xor", BitXor, IntegerOnly)
  TPU_SHIFT("bitwise_left_shift", "__lshift__", "__ilshift__", ShiftLeft)
  TPU_SHIFT("bitwise_right_shift", "__rshift__", "__irshift__", ShiftRight)
  TPU_BINARY_PLAIN("logical_and", LogicalAnd, Bool)
  TPU_BINARY_PLAIN("logical_or", LogicalOr, Bool)
  TPU_BINARY_PLAIN("logical_xor", LogicalXor, Bool)
  TPU_COMPARE("eq", Eq)
  TPU_COMPARE("ne", Ne)
  TPU_COMPARE("lt", Lt)
  TPU_COMPARE("le", Le)
  TPU_COMPARE("gt", Gt)
  TPU_COMPARE("ge", Ge)
}

}  // namespace tpu::aten
