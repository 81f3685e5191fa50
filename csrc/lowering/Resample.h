#pragma once
// Upsampling (nearest, nearest-exact, linear, cubic) as separable resampling
// of the last dims: each output position reads a few input taps (indices and
// weights computed in the compute dtype as ATen does); the backward scatters
// the weighted gradient back through the same taps. Also reflection and
// replication padding (+ backward).
#include <optional>
#include <vector>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::Value;

enum class Interp { Nearest, NearestExact, Linear, Cubic };

struct ResampleDim {
  int64_t in = 0, out = 0;
  std::optional<double> scale;  // the user's scale factor for this dim, if given
};

// Resamples the last dims.size() dims of x (float compute dtype) to the `out` sizes.
Value resample(Builder& b, Value x, Interp mode, bool alignCorners, const std::vector<ResampleDim>& dims);
// Gradient of resample: g has the output sizes; the result has the input sizes.
Value resampleBackward(Builder& b, Value g, Interp mode, bool alignCorners, const std::vector<ResampleDim>& dims);

// Pads the last pads.size()/2 dims (pairs (lo, hi) starting at the LAST dim, as torch.nn.functional.pad),
// reflecting (reflect) or repeating the edge (replicate).
Value padReflectReplicate(Builder& b, Value x, const std::vector<int64_t>& pads, bool reflect);
Value padReflectReplicateBackward(Builder& b, Value g, const std::vector<int64_t>& inShape,
                                  const std::vector<int64_t>& pads, bool reflect);

}  // namespace tpu::lowering
