#include "Matmul.h"

#include "Elementwise.h"

namespace tpu::lowering {

DType accumulateType(DType t) {
  return (t == DType::BF16 || t == DType::F16 || hlo::isFloat8(t)) ? DType::F32 : t;
}

Value product(Builder& b, Value a, Value c, int64_t batch) {
  std::vector<int64_t> batchDims;
  for (int64_t i = 0; i < batch; ++i) batchDims.push_back(i);
  // Contract a's last dim with c's first non-batch dim.
  int64_t contractC = c.rank() - batch == 1 ? batch : c.rank() - 2;
  return b.dotGeneral(a, c, batchDims, batchDims, {a.rank() - 1}, {contractC}, accumulateType(a.dtype()));
}

Value batchSummedProduct(Builder& b, Value a, Value c) {
  return b.dotGeneral(a, c, {}, {}, {0, 2}, {0, 1}, accumulateType(a.dtype()));
}

Value addScaled(Builder& b, Value self, Value prod, Value beta, Value alpha) {
  DType t = prod.dtype();
  const hlo::Shape& shape = prod.shape();
  Value betaV = b.convert(beta, t), alphaV = b.convert(alpha, t);
  Value scaledSelf = b.mul(broadcastTo(b, b.convert(self, t), shape), b.broadcast(betaV, shape));
  Value zero = b.constant(t, 0);
  Value ignore = b.broadcast(b.compare(hlo::Cmp::EQ, betaV, zero), shape);
  scaledSelf = b.select(ignore, b.broadcast(zero, shape), scaledSelf);
  Value scaledProd = t == DType::Pred ? b.binary("and", prod, b.broadcast(alphaV, shape))
                                      : b.mul(prod, b.broadcast(alphaV, shape));
  return t == DType::Pred ? b.binary("or", scaledSelf, scaledProd) : b.add(scaledSelf, scaledProd);
}

namespace {

// A tensor-wise scale (one element) or a row/column-wise one ([m, 1] / [1, n]) applied to `x` in float32.
Value scaled(Builder& b, Value x, Value scale) {
  scale = b.convert(scale, DType::F32);
  if (scale.type.numel() == 1) return b.mul(x, b.broadcast(b.reshape(scale, {}), x.shape()));
  return b.mul(x, broadcastTo(b, scale, x.shape()));
}

}  // namespace

Value scaledProduct(Builder& b, Value a, Value c, Value scaleA, Value scaleB, const Value* bias,
                    const Value* scaleResult) {
  Value p = product(b, scaled(b, b.convert(a, DType::F32), scaleA), scaled(b, b.convert(c, DType::F32), scaleB), 0);
  if (bias) p = b.add(p, broadcastTo(b, b.convert(*bias, DType::F32), p.shape()));
  if (!scaleResult) return p;
  // CPU multiplies by the float32 reciprocal rather than dividing.
  Value s = b.reshape(b.convert(*scaleResult, DType::F32), {});
  return b.mul(p, b.broadcast(b.div(b.constant(DType::F32, 1), s), p.shape()));
}

}  // namespace tpu::lowering
