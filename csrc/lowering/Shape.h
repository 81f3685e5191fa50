#pragma once
// Shape and data-movement lowerings: concatenation, triangles, padding,
// flip/roll, clamp, masked fill and the range factories. Operands arrive in
// the dtype the rule computes in; results are converted by the runtime.
#include <optional>
#include <span>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Value;

// Concatenation along `dim` after converting every input to `to`.
Value concat(Builder& b, std::span<const Value> xs, int64_t dim, DType to);
// tril (upper=false) or triu of the last two dims; `diagonal` is an S64 scalar.
Value triangle(Builder& b, Value x, Value diagonal, bool upper);
// Pads (negative amounts crop) with the scalar `value` (converted to x's dtype).
Value constantPad(Builder& b, Value x, Value value, const std::vector<int64_t>& lo,
                  const std::vector<int64_t>& hi);
// Rolls each of `dims` so that element i moves to (i + shift) mod size;
// `starts` are S64 scalars holding (size - shift mod size) mod size.
Value roll(Builder& b, Value x, std::span<const Value> starts, const std::vector<int64_t>& dims);
// clamp with optional bounds (already converted and broadcast to x's type).
Value clamp(Builder& b, Value x, const std::optional<Value>& lo, const std::optional<Value>& hi);
// where(mask, value, x): mask (pred) and scalar value broadcast to x.
Value maskedFill(Builder& b, Value x, Value mask, Value value);
// start + step * i for i in [0, n) in start's dtype.
Value arange(Builder& b, Value start, Value step, int64_t n);
// PyTorch's linspace: the first half counts up from start, the second half
// down from end, in the dtype of `start` (integers compute in float64).
// `divisor` is steps - 1 as an F64 operand (not a constant, so the division stays exact).
Value linspace(Builder& b, Value start, Value end, int64_t steps, Value divisor);
// Identity matrix n x m (pred).
Value eye(Builder& b, int64_t n, int64_t m);

}  // namespace tpu::lowering
