#include "Norm.h"

#include "Reduce.h"

namespace tpu::lowering {
namespace {

using hlo::Cmp;
using hlo::Shape;

Value sum(Builder& b, Value x, const std::vector<int64_t>& dims) { return reduce(b, ReduceOp::Sum, x, dims); }
Value mean(Builder& b, Value x, const std::vector<int64_t>& dims) { return reduce(b, ReduceOp::Mean, x, dims); }

// A per-`dim` vector (length shape[dim]) broadcast to `shape`.
Value along(Builder& b, Value v, const Shape& shape, int64_t dim) {
  return b.broadcastInDim(b.reshape(v, {shape[dim]}), shape, {dim});
}

// Rows of x [rows, d]: x - mean and rstd per row (biased variance).
struct Rows {
  Value centered, mean, rstd;
};
Rows normalizeRows(Builder& b, Value x, Value eps) {
  const Shape& s = x.shape();
  Value m = mean(b, x, {1});
  Value centered = b.sub(x, along(b, m, s, 0));
  Value var = mean(b, b.mul(centered, centered), {1});
  return {centered, m, invStd(b, var, eps)};
}

// dL/dx of x -> xhat = (x - mean) * rstd per row, given g = dL/dxhat, all [rows, d].
Value rowsBackward(Builder& b, Value g, Value xhat, Value rstd) {
  const Shape& s = g.shape();
  Value mg = along(b, mean(b, g, {1}), s, 0);
  Value mgx = along(b, mean(b, b.mul(g, xhat), {1}), s, 0);
  return b.mul(along(b, rstd, s, 0), b.sub(b.sub(g, mg), b.mul(xhat, mgx)));
}

}  // namespace

Value softmax(Builder& b, Value x, int64_t dim, bool log) {
  Shape shape = x.shape();
  if (x.rank() == 0) x = b.reshape(x, {1});
  Value m = reduce(b, ReduceOp::Max, x, {dim});
  Value shifted = b.sub(x, expandBack(b, m, x.shape(), {dim}));
  Value e = b.unary("exponential", shifted);
  Value s = expandBack(b, sum(b, e, {dim}), x.shape(), {dim});
  Value r = log ? b.sub(shifted, b.unary("log", s)) : b.div(e, s);
  return b.reshape(r, shape);
}

Value softmaxBackward(Builder& b, Value grad, Value out, int64_t dim, bool log) {
  Shape shape = grad.shape();
  if (grad.rank() == 0) {
    grad = b.reshape(grad, {1});
    out = b.reshape(out, {1});
  }
  Value r;
  if (log) {
    Value s = expandBack(b, sum(b, grad, {dim}), grad.shape(), {dim});
    r = b.sub(grad, b.mul(b.unary("exponential", out), s));
  } else {
    Value gy = b.mul(grad, out);
    Value s = expandBack(b, sum(b, gy, {dim}), grad.shape(), {dim});
    r = b.sub(gy, b.mul(out, s));
  }
  return b.reshape(r, shape);
}

Value invStd(Builder& b, Value var, Value eps) {
  Value ve = b.add(var, b.broadcast(b.convert(eps, var.dtype()), var.shape()));
  Value zero = b.scalarLike(ve, 0);
  return b.select(b.compare(Cmp::EQ, ve, zero), zero, b.unary("rsqrt", ve));
}

Normalized layerNorm(Builder& b, Value x, int64_t axis, const Value* w, const Value* bias, Value eps) {
  Shape shape = x.shape();
  int64_t rows = 1, d = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? rows : d) *= shape[i];
  Value x2 = b.reshape(x, {rows, d});
  Rows r = normalizeRows(b, x2, eps);
  Value y = b.mul(r.centered, along(b, r.rstd, x2.shape(), 0));
  if (w) y = b.mul(y, along(b, *w, x2.shape(), 1));
  if (bias) y = b.add(y, along(b, *bias, x2.shape(), 1));
  return {b.reshape(y, shape), r.mean, r.rstd};
}

NormGrads layerNormBackward(Builder& b, Value grad, Value x, Value mean, Value rstd, int64_t axis, const Value* w) {
  Shape shape = x.shape();
  int64_t rows = 1, d = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? rows : d) *= shape[i];
  Shape s2{rows, d};
  Value x2 = b.reshape(x, s2), g2 = b.reshape(grad, s2);
  Value xhat = b.mul(b.sub(x2, along(b, mean, s2, 0)), along(b, rstd, s2, 0));
  Value g = w ? b.mul(g2, along(b, *w, s2, 1)) : g2;
  Value dx = rowsBackward(b, g, xhat, b.reshape(rstd, {rows}));
  return {b.reshape(dx, shape), sum(b, b.mul(g2, xhat), {0}), sum(b, g2, {0})};
}

Normalized groupNorm(Builder& b, Value x, int64_t n, int64_t c, int64_t hw, int64_t groups, const Value* w,
                     const Value* bias, Value eps) {
  Shape shape = x.shape();
  Value xg = b.reshape(x, {n * groups, c / groups * hw});
  Rows r = normalizeRows(b, xg, eps);
  Value y = b.reshape(b.mul(r.centered, along(b, r.rstd, xg.shape(), 0)), {n, c, hw});
  if (w) y = b.mul(y, along(b, *w, y.shape(), 1));
  if (bias) y = b.add(y, along(b, *bias, y.shape(), 1));
  return {b.reshape(y, shape), r.mean, r.rstd};
}

NormGrads groupNormBackward(Builder& b, Value grad, Value x, Value mean, Value rstd, int64_t n, int64_t c,
                            int64_t hw, int64_t groups, const Value* w) {
  Shape shape = x.shape();
  Shape sg{n * groups, c / groups * hw}, sc{n, c, hw};
  Value m = b.reshape(mean, {n * groups}), rs = b.reshape(rstd, {n * groups});
  Value xhat = b.mul(b.sub(b.reshape(x, sg), along(b, m, sg, 0)), along(b, rs, sg, 0));
  Value g3 = b.reshape(grad, sc);
  Value xhat3 = b.reshape(xhat, sc);
  Value g = w ? b.mul(g3, along(b, *w, sc, 1)) : g3;
  Value dx = rowsBackward(b, b.reshape(g, sg), xhat, rs);
  return {b.reshape(dx, shape), sum(b, b.mul(g3, xhat3), {0, 2}), sum(b, g3, {0, 2})};
}

namespace {
Shape channels3(const Value& x) {
  int64_t rest = 1;
  for (int64_t i = 2; i < x.rank(); ++i) rest *= x.shape()[i];
  return {x.shape()[0], x.shape()[1], rest};
}
}  // namespace

BatchNormTrain batchNormTrain(Builder& b, Value x, const Value* w, const Value* bias, const Value* runningMean,
                              const Value* runningVar, Value momentum, Value eps) {
  Shape s = channels3(x);
  Value x3 = b.reshape(x, s);
  double count = static_cast<double>(s[0] * s[2]);
  Value m = mean(b, x3, {0, 2});
  Value centered = b.sub(x3, along(b, m, s, 1));
  Value varSum = sum(b, b.mul(centered, centered), {0, 2});
  Value var = b.div(varSum, b.scalarLike(varSum, count));
  Value invstd = invStd(b, var, eps);
  BatchNormTrain r{batchNormApply(b, x, m, invstd, w, bias), m, invstd, {}, {}};
  Value mom = b.broadcast(b.convert(momentum, m.dtype()), m.shape());
  Value keep = b.sub(b.scalarLike(mom, 1), mom);
  if (runningMean) r.runningMean = b.add(b.mul(mom, m), b.mul(keep, b.convert(*runningMean, m.dtype())));
  if (runningVar) {
    Value unbiased = b.div(varSum, b.scalarLike(varSum, count - 1));
    r.runningVar = b.add(b.mul(mom, unbiased), b.mul(keep, b.convert(*runningVar, m.dtype())));
  }
  return r;
}

Value batchNormApply(Builder& b, Value x, Value mean, Value invstd, const Value* w, const Value* bias) {
  Shape s = channels3(x);
  Value x3 = b.reshape(x, s);
  Value scale = invstd;
  if (w) scale = b.mul(scale, *w);
  Value y = b.mul(b.sub(x3, along(b, mean, s, 1)), along(b, scale, s, 1));
  if (bias) y = b.add(y, along(b, *bias, s, 1));
  return b.reshape(y, x.shape());
}

NormGrads batchNormBackward(Builder& b, Value grad, Value x, Value mean, Value invstd, const Value* w, bool train) {
  Shape s = channels3(x);
  Value x3 = b.reshape(x, s), g3 = b.reshape(grad, s);
  double count = static_cast<double>(s[0] * s[2]);
  Value centered = b.sub(x3, along(b, mean, s, 1));
  Value sumG = sum(b, g3, {0, 2});
  Value dot = sum(b, b.mul(centered, g3), {0, 2});
  Value scale = w ? b.mul(invstd, *w) : invstd;
  Value dx;
  if (train) {
    Value n = b.scalarLike(sumG, count);
    Value k = b.div(b.mul(dot, b.mul(invstd, invstd)), n);
    Value gradMean = b.div(sumG, n);
    dx = b.sub(b.sub(g3, along(b, gradMean, s, 1)), b.mul(centered, along(b, k, s, 1)));
    dx = b.mul(dx, along(b, scale, s, 1));
  } else {
    dx = b.mul(g3, along(b, scale, s, 1));
  }
  return {b.reshape(dx, x.shape()), b.mul(dot, invstd), sumG};
}

}  // namespace tpu::lowering
