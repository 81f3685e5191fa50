#pragma once
// Convolution lowerings (N-d, NC... layout): forward, transposed forward and the
// weight gradient, on stablehlo.convolution. The input gradient of a
// convolution is a transposed convolution and the other way round.
#include <vector>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::Value;

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, outputPadding;
  int64_t groups = 1;
};

// x [B, Cin, S...], w [Cout, Cin/groups, K...] -> [B, Cout, O...].
Value convForward(Builder& b, Value x, Value w, const ConvParams& p);
// x [B, Cin, S...], w [Cin, Cout/groups, K...] -> [B, Cout, O...] with
// O = (S-1)*stride - 2*padding + dilation*(K-1) + outputPadding + 1.
Value convTransposeForward(Builder& b, Value x, Value w, const ConvParams& p);
// Gradient of convForward's weight: x [B, Cin, S...], gy [B, Cout, O...],
// kernel sizes `k` -> [Cout, Cin/groups, K...].
Value convWeightGrad(Builder& b, Value x, Value gy, const std::vector<int64_t>& k, const ConvParams& p);

}  // namespace tpu::lowering
