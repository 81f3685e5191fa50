#pragma once
// Reduction lowerings: full and partial reductions (one table of kinds),
// arg-reductions, scans (cumsum/cumprod) and moments (var/mean). Inputs
// arrive already converted to the compute dtype; results have the reduced
// dims removed (the runtime reshapes them to keepdim outputs).
#include <span>
#include <utility>
#include <vector>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Value;

enum class ReduceOp {
  Sum, Prod, Max, Min, Any, All,  // the monoids (Max/Min propagate NaN)
  Mean, NanSum, CountNonzero, LogSumExp,
  Norm0, Norm1, Norm2, NormInf, NormNegInf, NormP,  // NormP reads p from operands[0]
};

// Reduces `x` over `dims` (sorted, distinct). `operands` holds the runtime
// scalars the op needs (NormP: p).
Value reduce(Builder& b, ReduceOp op, Value x, const std::vector<int64_t>& dims,
             std::span<const Value> operands = {});

// x summed over one dim (the dim removed): the form the decompositions' loops use.
inline Value sumOver(Builder& b, Value x, int64_t dim) { return reduce(b, ReduceOp::Sum, x, {dim}); }

// The monoid pieces, usable on whole tensors (elementwise) and in regions.
Value identity(Builder& b, ReduceOp op, DType t);
Value combine(Builder& b, ReduceOp op, Value acc, Value x);

// `r` (x reduced over `dims`, dims removed) broadcast back to `shape`.
Value expandBack(Builder& b, Value r, const hlo::Shape& shape, const std::vector<int64_t>& dims);

// Values and int64 indices of the max (min) along `dim`: the first index among
// equal values; a NaN is the extremum (its first index is returned).
std::pair<Value, Value> argReduce(Builder& b, bool isMax, Value x, int64_t dim);

// Inclusive scan along `dim` (Sum or Prod), log2(n) shifted combines.
Value scan(Builder& b, ReduceOp op, Value x, int64_t dim);

// {var, mean} over `dims`: var = sum((x-mean)^2) / max(N - correction, 0),
// `correction` a scalar of x's dtype.
std::pair<Value, Value> varMean(Builder& b, Value x, const std::vector<int64_t>& dims, Value correction);

}  // namespace tpu::lowering
