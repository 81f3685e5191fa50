#pragma once
// Matrix products: mm, bmm, mv, dot and their add-scaled forms. Operands keep
// their dtype; bfloat16/float16 contract with float32 accumulation (the
// result is float32 and the runtime rounds it to the output dtype once).
#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Value;

// Dtype a product of `t` operands accumulates (and is returned) in.
DType accumulateType(DType t);

// a: [batch..., n, k] (or [k]) times b: [batch..., k, m] (or [k]); the leading
// `batch` dims of both are batch dims. Covers dot, mv, mm and bmm.
Value product(Builder& b, Value a, Value c, int64_t batch);
// addbmm's product: sum over i of a[i] @ c[i] for a: [B, n, k], c: [B, k, m].
Value batchSummedProduct(Builder& b, Value a, Value c);
// beta * self + alpha * product, where beta == 0 ignores self (NaN and inf in
// it do not propagate, as in BLAS). `self` broadcasts to the product's shape;
// beta and alpha are scalars of any dtype (converted).
Value addScaled(Builder& b, Value self, Value product, Value beta, Value alpha);
// torch._scaled_mm over float32 values (the float8 operands as read): (a * scaleA) @ (c * scaleB) [+ bias],
// times 1 / scaleResult when given. a: [m, k], c: [k, n]; scaleA: one element or [m, 1], scaleB: one
// element or [1, n]; bias: [n].
Value scaledProduct(Builder& b, Value a, Value c, Value scaleA, Value scaleB, const Value* bias,
                    const Value* scaleResult);

}  // namespace tpu::lowering
