#pragma once
// Pooling lowerings over the last nd dims of x (leading dims are batch):
// max pooling with indices and average pooling as a max/sum over the kernel's
// strided slices of the padded input, their backward, and adaptive average
// (a separable averaging matrix per dim) and adaptive max pooling.
#include <utility>
#include <vector>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::Value;

struct PoolParams {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceilMode = false;
};

// Output size of one pooled dim, as PyTorch's pooling_output_shape.
int64_t poolOutputSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceilMode);

// {values, indices (S64, flat position in the pooled plane)}: the first maximum of each window; a NaN wins
// (the last NaN), as CPU.
std::pair<Value, Value> maxPool(Builder& b, Value x, const PoolParams& p);
// Average pooling: divisor = divisorOverride (!= 0), else the window size (countIncludePad) or the number of
// input elements in the window.
Value avgPool(Builder& b, Value x, const PoolParams& p, bool countIncludePad, int64_t divisorOverride);
// Gradient of avgPool wrt x (shape `inShape`).
Value avgPoolBackward(Builder& b, Value g, const std::vector<int64_t>& inShape, const PoolParams& p,
                      bool countIncludePad, int64_t divisorOverride);
// Adaptive average pooling to `out` sizes, and its gradient (to `inSizes`).
Value adaptiveAvgPool(Builder& b, Value x, const std::vector<int64_t>& out);
Value adaptiveAvgPoolBackward(Builder& b, Value g, const std::vector<int64_t>& inSizes);
// Adaptive max pooling: {values, indices (S64, flat position in the plane)}.
std::pair<Value, Value> adaptiveMaxPool(Builder& b, Value x, const std::vector<int64_t>& out);

// im2col: x [..., C, H, W] -> [..., C*kh*kw, oh*ow] (channel-major, then kernel offsets); and its adjoint
// col2im: [..., C*kh*kw, oh*ow] -> [..., C, H, W] with `size` = {H, W}.
Value im2col(Builder& b, Value x, const PoolParams& p);
Value col2im(Builder& b, Value cols, const std::vector<int64_t>& size, const PoolParams& p);

}  // namespace tpu::lowering
