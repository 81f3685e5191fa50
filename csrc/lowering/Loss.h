#pragma once
// Loss lowerings: negative log likelihood (any number of spatial dims) and
// mean squared error, forward and backward. Inputs arrive in the compute
// dtype; `reduction` is at::Reduction's value (0 none, 1 mean, 2 sum).
#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::Value;

enum LossReduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

struct NllLoss {
  Value loss, totalWeight;
};
// x: [C] or [N, C, d...] log-probabilities; target: x's shape without the
// class dim (integers); weight: [C] or null; ignoreIndex: an s64 scalar.
// Targets outside [0, C) that are not ignored contribute nothing (kernels
// report them with nllTargetOutOfRange).
NllLoss nllLoss(Builder& b, Value x, Value target, const Value* weight, int64_t reduction, Value ignoreIndex);
// pred scalar: some target is outside [0, classes) and is not ignoreIndex.
Value nllTargetOutOfRange(Builder& b, Value target, int64_t classes, Value ignoreIndex);
Value nllLossBackward(Builder& b, Value gradOut, Value x, Value target, const Value* weight, int64_t reduction,
                      Value ignoreIndex, Value totalWeight);

// x and y broadcast to one shape already.
Value mseLoss(Builder& b, Value x, Value y, int64_t reduction);
Value mseLossBackward(Builder& b, Value gradOut, Value x, Value y, int64_t reduction);

}  // namespace tpu::lowering
