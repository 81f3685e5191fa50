#include "Elementwise.h"

#include "Cephes.h"

#include <cmath>
#include <stdexcept>

namespace tpu::lowering {
namespace {

Value k(Builder& b, const Value& like, double v) { return b.scalarLike(like, v); }

Value trunc(Builder& b, Value x) {
  if (!hlo::isFloat(x.dtype())) return x;
  Value f = b.unary("floor", b.unary("abs", x));
  return b.mul(b.unary("sign", x), f);
}

// Polynomial erf for |x| <= 4 (float32 accuracy), evaluated in f32 or f64.
Value erfPoly(Builder& b, Value x) {
  static const double alpha[] = {-2.72614225801306e-10, 2.77068142495902e-08,  -2.10102402082508e-06,
                                 -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                                 -1.60960333262415e-02};
  static const double beta[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                                -7.37332916720468e-03, -1.42647390514189e-02};
  Value c = b.clamp(k(b, x, -4.0), x, k(b, x, 4.0));
  Value x2 = b.mul(c, c);
  Value p = k(b, x, alpha[0]);
  for (int i = 1; i < 7; ++i) p = b.add(b.mul(x2, p), k(b, x, alpha[i]));
  p = b.mul(c, p);
  Value q = k(b, x, beta[0]);
  for (int i = 1; i < 5; ++i) q = b.add(b.mul(x2, q), k(b, x, beta[i]));
  return b.div(p, q);
}

// e^a / 2 as (e^(a/2) / 2) e^(a/2): finite wherever the result is.
Value halfExp(Builder& b, Value a) {
  Value h = b.unary("exponential", b.mul(a, k(b, a, 0.5)));
  return b.mul(b.mul(h, k(b, a, 0.5)), h);
}

// CPU's div_floor_floating: floor((x - fmod(x, y)) / y) with its corrections, so results (and inf // 3,
// which is NaN as in Python) agree with CPU's; x / y where y is 0.
Value floorDivFloat(Builder& b, Value x, Value y) {
  Value zero = k(b, x, 0), one = k(b, x, 1);
  Value mod = b.binary("remainder", x, y);
  Value div = b.div(b.sub(x, mod), y);
  Value adjust = b.binary("and", b.compare(hlo::Cmp::NE, mod, zero),
                          b.compare(hlo::Cmp::NE, b.compare(hlo::Cmp::LT, y, zero), b.compare(hlo::Cmp::LT, mod, zero)));
  div = b.select(adjust, b.sub(div, one), div);
  Value fl = b.unary("floor", div);
  fl = b.select(b.compare(hlo::Cmp::GT, b.sub(div, fl), k(b, x, 0.5)), b.add(fl, one), fl);
  Value quotient = b.div(x, y);
  Value signedZero = binary(b, Binary::Copysign, zero, quotient);
  Value r = b.select(b.compare(hlo::Cmp::NE, div, zero), fl, signedZero);
  return b.select(b.compare(hlo::Cmp::EQ, y, zero), quotient, r);
}

Value floorDivInt(Builder& b, Value x, Value y) {
  Value q = b.div(x, y);
  Value r = b.binary("remainder", x, y);
  Value zero = k(b, x, 0);
  Value signsDiffer = b.compare(hlo::Cmp::NE, b.compare(hlo::Cmp::LT, r, zero), b.compare(hlo::Cmp::LT, y, zero));
  Value adjust = b.binary("and", b.compare(hlo::Cmp::NE, r, zero), signsDiffer);
  return b.select(adjust, b.sub(q, k(b, q, 1)), q);
}

Value pythonRemainder(Builder& b, Value x, Value y) {
  Value r = b.binary("remainder", x, y);
  Value zero = k(b, x, 0);
  Value signsDiffer = b.compare(hlo::Cmp::NE, b.compare(hlo::Cmp::LT, r, zero), b.compare(hlo::Cmp::LT, y, zero));
  Value adjust = b.binary("and", b.compare(hlo::Cmp::NE, r, zero), signsDiffer);
  return b.select(adjust, b.add(r, y), r);
}

Value toPred(Builder& b, Value x) {
  if (x.dtype() == DType::Pred) return x;
  return b.compare(hlo::Cmp::NE, x, k(b, x, 0));
}

}  // namespace

Value broadcastTo(Builder& b, Value x, const hlo::Shape& shape) {
  if (x.shape() == shape) return x;
  std::vector<int64_t> dims;
  int64_t offset = static_cast<int64_t>(shape.size()) - x.rank();
  hlo::Shape squeezed;
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < x.rank(); ++i) {
    // Size-1 dims that broadcast are dropped so broadcast_in_dim may expand them.
    if (x.shape()[i] == 1 && shape[offset + i] != 1) continue;
    squeezed.push_back(x.shape()[i]);
    keep.push_back(offset + i);
  }
  return b.broadcastInDim(b.reshape(x, squeezed), shape, keep);
}

Value erf(Builder& b, Value x) {
  // float64: XLA's own erf (Cephes' rational fits, float64-accurate); the float32 fit is 1e-7 off there.
  if (x.dtype() == DType::F64) return b.op("chlo.erf", {&x, 1}, {x.type})[0];
  if (x.dtype() == DType::F32) return erfPoly(b, x);
  return b.convert(erfPoly(b, b.convert(x, DType::F32)), x.dtype());
}

Value where(Builder& b, Value pred, Value x, Value y) {
  size_t rank = std::max({pred.shape().size(), x.shape().size(), y.shape().size()});
  hlo::Shape out(rank, 1);
  for (const Value* v : {&pred, &x, &y}) {
    size_t off = rank - v->shape().size();
    for (size_t i = 0; i < v->shape().size(); ++i)
      if (v->shape()[i] != 1) out[off + i] = v->shape()[i];
  }
  return b.select(broadcastTo(b, pred, out), broadcastTo(b, x, out), broadcastTo(b, y, out));
}

bool isComparison(Binary op) {
  return op == Binary::Eq || op == Binary::Ne || op == Binary::Lt || op == Binary::Le || op == Binary::Gt ||
         op == Binary::Ge;
}

bool supportsComplex(Unary op) {
  switch (op) {
    case Unary::Abs: case Unary::Neg: case Unary::Exp: case Unary::Exp2: case Unary::Expm1: case Unary::Log:
    case Unary::Log2: case Unary::Log10: case Unary::Log1p: case Unary::Sqrt: case Unary::Rsqrt:
    case Unary::Reciprocal: case Unary::Square: case Unary::Sin: case Unary::Cos: case Unary::Tan:
    case Unary::Sinh: case Unary::Cosh: case Unary::Tanh: case Unary::Sgn: case Unary::Sigmoid:
    case Unary::IsNan: case Unary::IsInf: case Unary::IsFinite: case Unary::LogicalNot:
    case Unary::Asin: case Unary::Acos: case Unary::Atan: case Unary::Asinh: case Unary::Acosh:
    case Unary::Atanh: return true;
    default: return false;
  }
}

bool supportsComplex(Binary op) {
  switch (op) {
    case Binary::Add: case Binary::Sub: case Binary::Mul: case Binary::Div: case Binary::Pow: case Binary::Eq:
    case Binary::Ne: case Binary::LogicalAnd: case Binary::LogicalOr: case Binary::LogicalXor: return true;
    default: return false;
  }
}

namespace {

// The complex cases whose real formula does not carry over (predicates look at both parts).
bool complexUnary(Builder& b, Unary op, Value x, Value& out) {
  switch (op) {
    case Unary::IsNan:
    case Unary::IsInf: out = b.binary("or", unary(b, op, b.realPart(x)), unary(b, op, b.imagPart(x))); return true;
    case Unary::IsFinite: out = b.binary("and", b.isFinite(b.realPart(x)), b.isFinite(b.imagPart(x))); return true;
    // The real formulas (atan2, sign) do not extend to complex; CHLO's complex expansions do.
    case Unary::Asin: out = b.op("chlo.asin", {&x, 1}, {x.type})[0]; return true;
    case Unary::Acos: out = b.op("chlo.acos", {&x, 1}, {x.type})[0]; return true;
    case Unary::Atan: out = b.op("chlo.atan", {&x, 1}, {x.type})[0]; return true;
    case Unary::Asinh: out = b.op("chlo.asinh", {&x, 1}, {x.type})[0]; return true;
    case Unary::Acosh: out = b.op("chlo.acosh", {&x, 1}, {x.type})[0]; return true;
    case Unary::Atanh: out = b.op("chlo.atanh", {&x, 1}, {x.type})[0]; return true;
    case Unary::Sgn: {  // x / |x|, and 0 at 0 (PyTorch's sgn)
      Value a = b.unary("abs", x);
      Value zero = b.compare(hlo::Cmp::EQ, a, b.scalarLike(a, 0));
      Value q = b.div(x, b.complex(a, b.scalarLike(a, 0)));
      out = b.select(zero, b.scalarLike(x, 0), q);
      return true;
    }
    default: return false;
  }
}

}  // namespace

Value unary(Builder& b, Unary op, Value x) {
  if (hlo::isComplex(x.dtype())) {
    Value r;
    if (complexUnary(b, op, x, r)) return r;
  }
  switch (op) {
    case Unary::Abs: return x.dtype() == DType::Pred ? x : b.unary("abs", x);
    case Unary::Neg: return b.neg(x);
    case Unary::Exp: return b.unary("exponential", x);
    case Unary::Exp2: return b.unary("exponential", b.mul(x, k(b, x, M_LN2)));
    case Unary::Expm1: return b.unary("exponential_minus_one", x);
    case Unary::Log: return b.unary("log", x);
    case Unary::Log2: return b.div(b.unary("log", x), k(b, x, M_LN2));
    case Unary::Log10: return b.div(b.unary("log", x), k(b, x, M_LN10));
    case Unary::Log1p: return b.unary("log_plus_one", x);
    case Unary::Sqrt: return b.unary("sqrt", x);
    case Unary::Rsqrt: return b.unary("rsqrt", x);
    case Unary::Reciprocal: return b.div(k(b, x, 1), x);
    case Unary::Square: return b.mul(x, x);
    case Unary::Sin: return b.unary("sine", x);
    case Unary::Cos: return b.unary("cosine", x);
    case Unary::Tan: return b.unary("tan", x);
    case Unary::Asin:
      return b.binary("atan2", x, b.unary("sqrt", b.mul(b.sub(k(b, x, 1), x), b.add(k(b, x, 1), x))));
    case Unary::Acos:
      return b.binary("atan2", b.unary("sqrt", b.mul(b.sub(k(b, x, 1), x), b.add(k(b, x, 1), x))), x);
    case Unary::Atan: return b.binary("atan2", x, k(b, x, 1));
    case Unary::Sinh: {
      Value small = b.mul(b.sub(b.unary("exponential_minus_one", x), b.unary("exponential_minus_one", b.neg(x))),
                          k(b, x, 0.5));
      if (hlo::isComplex(x.dtype())) return small;
      // Past |x| = 20, e^-|x| is below the rounding of e^|x| / 2: that alone, as (e^(|x|/2) / 2) e^(|x|/2),
      // which stays finite up to the largest sinh a float holds (e^|x| alone overflows from |x| = 88.7 in float32).
      Value big = b.mul(unary(b, Unary::Sign, x), halfExp(b, b.unary("abs", x)));
      return b.select(b.compare(hlo::Cmp::GT, b.unary("abs", x), k(b, x, 20)), big, small);
    }
    case Unary::Cosh: {
      if (hlo::isComplex(x.dtype()))
        return b.mul(b.add(b.unary("exponential", x), b.unary("exponential", b.neg(x))), k(b, x, 0.5));
      Value a = b.unary("abs", x);
      Value small = b.mul(b.add(b.unary("exponential", a), b.unary("exponential", b.neg(a))), k(b, x, 0.5));
      return b.select(b.compare(hlo::Cmp::GT, a, k(b, x, 20)), halfExp(b, a), small);
    }
    case Unary::Tanh: return b.unary("tanh", x);
    case Unary::Asinh: {
      Value a = b.unary("abs", x);
      Value a2 = b.mul(a, a);
      Value r = b.unary("log_plus_one",
                        b.add(a, b.div(a2, b.add(k(b, x, 1), b.unary("sqrt", b.add(k(b, x, 1), a2))))));
      // Past 2^28, 1 + a^2 is a^2 even in float64: asinh is log(2a) (and a^2 would overflow, inf / inf).
      r = b.select(b.compare(hlo::Cmp::GT, a, k(b, x, 0x1p28)), b.add(b.unary("log", a), k(b, x, M_LN2)), r);
      return b.mul(b.unary("sign", x), r);
    }
    case Unary::Acosh: {
      Value r = b.unary("log", b.add(x, b.unary("sqrt", b.mul(b.sub(x, k(b, x, 1)), b.add(x, k(b, x, 1))))));
      r = b.select(b.compare(hlo::Cmp::GT, x, k(b, x, 0x1p28)), b.add(b.unary("log", x), k(b, x, M_LN2)), r);
      return b.select(b.compare(hlo::Cmp::LT, x, k(b, x, 1)), k(b, x, NAN), r);  // NaN below 1 (also -inf)
    }
    case Unary::Atanh:
      return b.mul(b.unary("log_plus_one", b.div(b.mul(k(b, x, 2), x), b.sub(k(b, x, 1), x))), k(b, x, 0.5));
    case Unary::Floor: return hlo::isFloat(x.dtype()) ? b.unary("floor", x) : x;
    case Unary::Ceil: return hlo::isFloat(x.dtype()) ? b.unary("ceil", x) : x;
    case Unary::Round: return hlo::isFloat(x.dtype()) ? b.unary("round_nearest_even", x) : x;
    case Unary::Trunc: return trunc(b, x);
    case Unary::Frac: return b.sub(x, trunc(b, x));
    case Unary::Sgn:
    case Unary::Sign:
      if (x.dtype() == DType::Pred) return x;
      if (!hlo::isFloat(x.dtype())) return b.unary("sign", x);
      // As PyTorch: sign(nan) = 0 and sign(-0.0) = +0.
      return b.select(b.compare(hlo::Cmp::GT, x, k(b, x, 0)), k(b, x, 1),
                      b.select(b.compare(hlo::Cmp::LT, x, k(b, x, 0)), k(b, x, -1), k(b, x, 0)));
    case Unary::Sigmoid: return b.unary("logistic", x);
    case Unary::Relu:
      if (x.dtype() == DType::Pred) return x;
      return b.max(x, k(b, x, 0));
    case Unary::Silu: return b.mul(x, b.unary("logistic", x));
    case Unary::Erf: return erf(b, x);
    case Unary::Erfc: {  // 1 - erf(x) loses every digit in the tail (erfc(5) is 1.5e-12): erfcx(x) e^-x^2 there
      Value tail = erfcTail(b, b.max(x, k(b, x, 0.5)));
      return b.select(b.compare(hlo::Cmp::LT, x, k(b, x, 0.5)), b.sub(k(b, x, 1), erf(b, x)), tail);
    }
    case Unary::GeluErf:
      return b.mul(b.mul(x, k(b, x, 0.5)), b.add(k(b, x, 1), erf(b, b.mul(x, k(b, x, M_SQRT1_2)))));
    case Unary::GeluTanh: {
      Value inner = b.mul(k(b, x, M_2_SQRTPI * M_SQRT1_2), b.add(x, b.mul(k(b, x, 0.044715), b.mul(x, b.mul(x, x)))));
      return b.mul(b.mul(x, k(b, x, 0.5)), b.add(k(b, x, 1), b.unary("tanh", inner)));
    }
    case Unary::BitwiseNot: return b.unary("not", x);
    case Unary::LogicalNot: return b.unary("not", toPred(b, x));
    case Unary::IsNan:
      return hlo::isFloat(x.dtype()) ? b.compare(hlo::Cmp::NE, x, x) : b.full(hlo::Type{DType::Pred, x.shape()}, 0);
    case Unary::IsInf:
      if (!hlo::isFloat(x.dtype())) return b.full(hlo::Type{DType::Pred, x.shape()}, 0);
      return b.compare(hlo::Cmp::EQ, b.unary("abs", x), k(b, x, INFINITY));
    case Unary::IsPosInf:
      if (!hlo::isFloat(x.dtype())) return b.full(hlo::Type{DType::Pred, x.shape()}, 0);
      return b.compare(hlo::Cmp::EQ, x, k(b, x, INFINITY));
    case Unary::IsNegInf:
      if (!hlo::isFloat(x.dtype())) return b.full(hlo::Type{DType::Pred, x.shape()}, 0);
      return b.compare(hlo::Cmp::EQ, x, k(b, x, -INFINITY));
    case Unary::IsFinite:
      return hlo::isFloat(x.dtype()) ? b.isFinite(x) : b.full(hlo::Type{DType::Pred, x.shape()}, 1);
    case Unary::Signbit: {
      if (!hlo::isFloat(x.dtype())) return b.compare(hlo::Cmp::LT, x, k(b, x, 0));
      // The sign bit itself, so -0.0 and -nan count as negative.
      DType bits = hlo::byteWidth(x.dtype()) == 8 ? DType::S64 : hlo::byteWidth(x.dtype()) == 4 ? DType::S32 : DType::S16;
      Value asInt = b.bitcastConvert(x, hlo::Type{bits, x.shape()});
      return b.compare(hlo::Cmp::LT, asInt, b.scalarLike(asInt, 0));
    }
  }
  throw std::logic_error("unknown unary op");
}

namespace {
Value nanWins(Builder& b, Value x, Value y, Value r) {
  if (!hlo::isFloat(x.dtype())) return r;
  r = b.select(b.compare(hlo::Cmp::NE, y, y), y, r);
  return b.select(b.compare(hlo::Cmp::NE, x, x), x, r);
}
}  // namespace

Value maximumNan(Builder& b, Value x, Value y) {
  return x.dtype() == DType::Pred ? b.binary("or", x, y) : nanWins(b, x, y, b.max(x, y));
}
Value minimumNan(Builder& b, Value x, Value y) {
  return x.dtype() == DType::Pred ? b.binary("and", x, y) : nanWins(b, x, y, b.min(x, y));
}

Value binary(Builder& b, Binary op, Value x, Value y) {
  bool isF = hlo::isFloat(x.dtype());
  switch (op) {
    case Binary::Add: return x.dtype() == DType::Pred ? b.binary("or", x, y) : b.add(x, y);
    case Binary::Sub: return b.sub(x, y);
    case Binary::Mul: return x.dtype() == DType::Pred ? b.binary("and", x, y) : b.mul(x, y);
    case Binary::Div: return b.div(x, y);
    case Binary::DivTrunc: return isF ? trunc(b, b.div(x, y)) : b.div(x, y);
    case Binary::DivFloor: return isF ? floorDivFloat(b, x, y) : floorDivInt(b, x, y);
    case Binary::Remainder: return pythonRemainder(b, x, y);
    case Binary::Fmod: return b.binary("remainder", x, y);
    case Binary::Pow: return b.binary("power", x, y);
    case Binary::Max: return maximumNan(b, x, y);
    case Binary::Min: return minimumNan(b, x, y);
    case Binary::Atan2: return b.binary("atan2", x, y);
    case Binary::BitAnd: return b.binary("and", x, y);
    case Binary::BitOr: return b.binary("or", x, y);
    case Binary::BitXor: return b.binary("xor", x, y);
    case Binary::LogicalAnd: return b.binary("and", toPred(b, x), toPred(b, y));
    case Binary::LogicalOr: return b.binary("or", toPred(b, x), toPred(b, y));
    case Binary::LogicalXor: return b.binary("xor", toPred(b, x), toPred(b, y));
    case Binary::ShiftLeft: return b.binary("shift_left", x, y);
    case Binary::ShiftRight:
      return b.binary(hlo::isSigned(x.dtype()) ? "shift_right_arithmetic" : "shift_right_logical", x, y);
    case Binary::Eq: return b.compare(hlo::Cmp::EQ, x, y);
    case Binary::Ne: return b.compare(hlo::Cmp::NE, x, y);
    case Binary::Lt: return b.compare(hlo::Cmp::LT, x, y);
    case Binary::Le: return b.compare(hlo::Cmp::LE, x, y);
    case Binary::Gt: return b.compare(hlo::Cmp::GT, x, y);
    case Binary::Ge: return b.compare(hlo::Cmp::GE, x, y);
    case Binary::Hypot: {  // scaled, so x^2 + y^2 cannot overflow or underflow; an inf wins over NaN, as in C
      Value ax = b.unary("abs", x), ay = b.unary("abs", y);
      Value hi = b.max(ax, ay), lo = b.min(ax, ay);
      Value r = b.div(lo, hi);
      Value h = b.mul(hi, b.unary("sqrt", b.add(k(b, x, 1), b.mul(r, r))));
      h = b.select(b.compare(hlo::Cmp::EQ, hi, k(b, x, 0)), k(b, x, 0), h);
      h = nanWins(b, x, y, h);
      Value anyInf = b.binary("or", b.compare(hlo::Cmp::EQ, ax, k(b, x, INFINITY)),
                              b.compare(hlo::Cmp::EQ, ay, k(b, x, INFINITY)));
      return b.select(anyInf, k(b, x, INFINITY), h);
    }
    case Binary::Copysign: {
      Value negative = unary(b, Unary::Signbit, y);
      Value a = b.unary("abs", x);
      return b.select(negative, b.neg(a), a);
    }
    case Binary::Xlogy: {
      Value r = b.mul(x, b.unary("log", y));
      Value zero = k(b, x, 0);
      Value xZero = b.compare(hlo::Cmp::EQ, x, zero);
      Value yNan = b.compare(hlo::Cmp::NE, y, y);
      return b.select(b.binary("and", xZero, b.unary("not", yNan)), zero, r);
    }
  }
  throw std::logic_error("unknown binary op");
}

}  // namespace tpu::lowering
