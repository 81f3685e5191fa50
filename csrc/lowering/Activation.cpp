#include "Activation.h"

#include <cmath>
#include <stdexcept>

namespace tpu::lowering {
namespace {

using hlo::Cmp;

Value k(Builder& b, const Value& like, double v) { return b.scalarLike(like, v); }
Value lt(Builder& b, Value x, Value y) { return b.compare(Cmp::LT, x, y); }
Value le(Builder& b, Value x, Value y) { return b.compare(Cmp::LE, x, y); }
Value gt(Builder& b, Value x, Value y) { return b.compare(Cmp::GT, x, y); }
Value sigmoid(Builder& b, Value x) { return b.unary("logistic", x); }
Value softplus1(Builder& b, Value x) { return b.unary("log_plus_one", b.unary("exponential", x)); }

// x[dim] halves of `x`.
std::pair<Value, Value> halves(Builder& b, Value x, int64_t dim) {
  std::vector<int64_t> start(x.rank(), 0), limit = x.shape(), strides(x.rank(), 1);
  int64_t h = x.shape()[dim] / 2;
  limit[dim] = h;
  Value first = b.slice(x, start, limit, strides);
  start[dim] = h;
  limit[dim] = 2 * h;
  return {first, b.slice(x, start, limit, strides)};
}

}  // namespace

Value activation(Builder& b, Activation op, Value x, std::span<const Value> p) {
  switch (op) {
    case Activation::Gelu: return unary(b, Unary::GeluErf, x);
    case Activation::GeluTanh: return unary(b, Unary::GeluTanh, x);
    case Activation::Threshold: return b.select(le(b, x, p[0]), p[1], x);
    case Activation::LeakyRelu: return b.select(gt(b, x, k(b, x, 0)), x, b.mul(x, p[0]));
    case Activation::Elu: {
      Value neg = b.mul(b.unary("exponential_minus_one", b.mul(x, p[2])), p[0]);
      return b.select(le(b, x, k(b, x, 0)), neg, b.mul(x, p[1]));
    }
    case Activation::Softplus: {
      Value xb = b.mul(x, p[0]);
      return b.select(gt(b, xb, p[1]), x, b.div(softplus1(b, xb), p[0]));
    }
    case Activation::Hardtanh: return b.min(b.max(x, p[0]), p[1]);
    case Activation::Hardsigmoid:
      return b.div(b.min(b.max(b.add(x, k(b, x, 3)), k(b, x, 0)), k(b, x, 6)), k(b, x, 6));
    case Activation::Hardswish:
      return b.div(b.mul(x, b.min(b.max(b.add(x, k(b, x, 3)), k(b, x, 0)), k(b, x, 6))), k(b, x, 6));
    case Activation::Mish: return b.mul(x, b.unary("tanh", softplus1(b, x)));
    case Activation::LogSigmoid: {
      // min(x, 0) - log1p(exp(-|x|)): no overflow for large |x|.
      Value z = b.unary("exponential", b.neg(b.unary("abs", x)));
      return b.sub(b.min(x, k(b, x, 0)), b.unary("log_plus_one", z));
    }
  }
  throw std::logic_error("unknown activation");
}

Value activationGrad(Builder& b, ActivationGrad op, Value g, Value x, std::span<const Value> p) {
  Value zero = k(b, x, 0), one = k(b, x, 1);
  switch (op) {
    case ActivationGrad::Gelu: {
      Value cdf = b.mul(k(b, x, 0.5), b.add(one, erf(b, b.mul(x, k(b, x, M_SQRT1_2)))));
      Value pdf = b.mul(k(b, x, M_2_SQRTPI * M_SQRT1_2 * 0.5),
                        b.unary("exponential", b.mul(b.mul(k(b, x, -0.5), x), x)));
      return b.mul(g, b.add(cdf, b.mul(x, pdf)));
    }
    case ActivationGrad::GeluTanh: {
      const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
      Value x2 = b.mul(x, x);
      Value inner = b.mul(k(b, x, kBeta), b.add(x, b.mul(k(b, x, kKappa), b.mul(x2, x))));
      Value t = b.unary("tanh", inner);
      Value left = b.mul(k(b, x, 0.5), x);
      Value leftDerivative = b.mul(k(b, x, 0.5), b.add(one, t));
      Value innerDerivative = b.mul(k(b, x, kBeta), b.add(one, b.mul(k(b, x, 3 * kKappa), x2)));
      Value rightDerivative = b.mul(b.mul(left, b.sub(one, b.mul(t, t))), innerDerivative);
      return b.mul(g, b.add(leftDerivative, rightDerivative));
    }
    case ActivationGrad::Silu: {
      Value s = sigmoid(b, x);
      return b.mul(b.mul(g, s), b.add(one, b.mul(x, b.sub(one, s))));
    }
    case ActivationGrad::Mish: {
      Value s = sigmoid(b, x);
      Value t = b.unary("tanh", softplus1(b, x));
      return b.mul(g, b.add(t, b.mul(b.mul(x, s), b.sub(one, b.mul(t, t)))));
    }
    case ActivationGrad::Hardsigmoid: {
      Value inside = b.binary("and", gt(b, x, k(b, x, -3)), lt(b, x, k(b, x, 3)));
      return b.select(inside, b.div(g, k(b, x, 6)), zero);
    }
    case ActivationGrad::Hardswish: {
      Value mid = b.mul(g, b.add(b.div(x, k(b, x, 3)), k(b, x, 0.5)));
      return b.select(le(b, x, k(b, x, -3)), zero, b.select(lt(b, x, k(b, x, 3)), mid, g));
    }
    case ActivationGrad::LogSigmoid: {
      Value negative = lt(b, x, zero);
      Value maxDeriv = b.select(negative, one, zero);
      Value sign = b.select(negative, one, k(b, x, -1));
      Value z = b.unary("exponential", b.neg(b.unary("abs", x)));
      return b.mul(g, b.sub(maxDeriv, b.mul(sign, b.div(z, b.add(one, z)))));
    }
    case ActivationGrad::Sigmoid: return b.mul(b.mul(g, b.sub(one, x)), x);
    case ActivationGrad::Tanh: return b.mul(g, b.sub(one, b.mul(x, x)));
    case ActivationGrad::Threshold: return b.select(le(b, x, p[0]), zero, g);
    case ActivationGrad::LeakyRelu: return b.select(gt(b, x, zero), g, b.mul(g, p[0]));
    case ActivationGrad::Elu: {
      Value neg = b.mul(b.mul(b.mul(g, p[2]), p[0]), b.unary("exponential", b.mul(x, p[2])));
      return b.select(le(b, x, zero), neg, b.mul(g, p[1]));
    }
    case ActivationGrad::EluResult: {
      Value neg = b.mul(b.mul(g, p[2]), b.add(x, p[0]));
      return b.select(le(b, x, zero), neg, b.mul(g, p[1]));
    }
    case ActivationGrad::Softplus: {
      Value xb = b.mul(x, p[0]);
      Value z = b.unary("exponential", xb);
      return b.select(gt(b, xb, p[1]), g, b.div(b.mul(g, z), b.add(z, one)));
    }
    case ActivationGrad::Hardtanh: {
      Value outside = b.binary("or", le(b, x, p[0]), b.compare(Cmp::GE, x, p[1]));
      return b.select(outside, zero, g);
    }
  }
  throw std::logic_error("unknown activation gradient");
}

Value glu(Builder& b, Value x, int64_t dim) {
  auto [first, second] = halves(b, x, dim);
  return b.mul(first, sigmoid(b, second));
}

Value gluGrad(Builder& b, Value g, Value x, int64_t dim) {
  auto [first, second] = halves(b, x, dim);
  Value s = sigmoid(b, second);
  Value gFirst = b.mul(s, g);
  Value gSecond = b.mul(b.mul(b.mul(b.sub(k(b, s, 1), s), s), first), g);
  Value parts[] = {gFirst, gSecond};
  return b.concatenate(parts, dim);
}

Value lerp(Builder& b, Value self, Value end, Value weight) {
  Value diff = b.sub(end, self);
  Value aw = b.unary("abs", weight);  // real also for a complex weight
  Value small = lt(b, aw, k(b, aw, 0.5));
  Value fromSelf = b.add(self, b.mul(weight, diff));
  Value fromEnd = b.sub(end, b.mul(diff, b.sub(k(b, weight, 1), weight)));
  return b.select(small, fromSelf, fromEnd);
}

Value addcmul(Builder& b, Value self, Value t1, Value t2, Value value) {
  return b.add(self, b.mul(b.mul(value, t1), t2));
}

Value addcdiv(Builder& b, Value self, Value t1, Value t2, Value value) {
  return b.add(self, b.div(b.mul(value, t1), t2));
}

Value floorDivide(Builder& b, Value x, Value y) { return binary(b, Binary::DivFloor, x, y); }

}  // namespace tpu::lowering
