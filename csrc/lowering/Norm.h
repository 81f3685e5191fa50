#pragma once
// Normalization lowerings: softmax/log_softmax, layer norm, group norm and
// batch norm, forward and backward. Inputs arrive in the compute dtype;
// optional weights are null pointers when absent; eps and momentum are
// runtime scalars.
#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::Value;

// Numerically stable (the max is subtracted) along `dim`.
Value softmax(Builder& b, Value x, int64_t dim, bool log);
// grad_input from grad_output and the forward output.
Value softmaxBackward(Builder& b, Value grad, Value out, int64_t dim, bool log);

struct Normalized {
  Value out, mean, rstd;
};
struct NormGrads {
  Value dx, dw, db;
};

// 1 / sqrt(var + eps), 0 where var + eps == 0 (as CPU does).
Value invStd(Builder& b, Value var, Value eps);

// Layer norm over the dims of x from `axis` on; w and bias have that shape.
// mean and rstd have shape [prod(x.shape[:axis])].
Normalized layerNorm(Builder& b, Value x, int64_t axis, const Value* w, const Value* bias, Value eps);
NormGrads layerNormBackward(Builder& b, Value grad, Value x, Value mean, Value rstd, int64_t axis, const Value* w);

// Group norm of x viewed as [n, c, hw] in `groups` groups; mean/rstd are [n, groups].
Normalized groupNorm(Builder& b, Value x, int64_t n, int64_t c, int64_t hw, int64_t groups, const Value* w,
                     const Value* bias, Value eps);
NormGrads groupNormBackward(Builder& b, Value grad, Value x, Value mean, Value rstd, int64_t n, int64_t c,
                            int64_t hw, int64_t groups, const Value* w);

// Batch norm of x [n, c, ...] with per-channel statistics.
struct BatchNormTrain {
  Value out, mean, invstd;
  Value runningMean, runningVar;  // updated running stats (set when given)
};
BatchNormTrain batchNormTrain(Builder& b, Value x, const Value* w, const Value* bias, const Value* runningMean,
                              const Value* runningVar, Value momentum, Value eps);
// Normalizes with the given per-channel mean and invstd.
Value batchNormApply(Builder& b, Value x, Value mean, Value invstd, const Value* w, const Value* bias);
// train: mean/invstd are the saved batch statistics; else the running ones.
NormGrads batchNormBackward(Builder& b, Value grad, Value x, Value mean, Value invstd, const Value* w, bool train);

}  // namespace tpu::lowering
