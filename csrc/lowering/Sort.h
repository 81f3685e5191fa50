#pragma once
// Sorting and order-statistics lowerings: stable sort with indices (NaN is the
// largest value, as PyTorch), positions picked per row (kthvalue, median),
// scans of (value, index) pairs (cummax/cummin), logcumsumexp, searchsorted,
// isin, and the two halves of unique (count on the device, then the values
// once the host knows the count).
#include <tuple>
#include <utility>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Value;

// {values, indices (S64)} of a stable sort along `dim`.
std::pair<Value, Value> sortAlong(Builder& b, Value x, int64_t dim, bool descending);
// Elements at per-row positions `pos` (S64, x's shape with dim of size 1) along dim.
Value pickAlong(Builder& b, Value x, Value pos, int64_t dim);
// Number of NaNs along dim (S64, dim kept with size 1).
Value nanCount(Builder& b, Value x, int64_t dim);
// Running max (min) and the index where it was last reached; a NaN sticks once seen.
std::pair<Value, Value> cumExtreme(Builder& b, Value x, int64_t dim, bool isMax);
Value logcumsumexp(Builder& b, Value x, int64_t dim);
// For each x (any shape; with a batched `seq` [..., M] x is [..., N]) the number of sequence
// elements < x (right: <= x), as `out`.
Value searchSorted(Builder& b, Value seq, Value x, bool right, DType out);
// Whether each element of `elements` occurs in `test` (any shape).
Value isin(Builder& b, Value elements, Value test, bool invert);
// {mode value, index of one of its occurrences} along dim (dim removed): the most frequent value, the
// smallest one among equally frequent values.
std::pair<Value, Value> modeAlong(Builder& b, Value x, int64_t dim);
// unique over the flattened x: {sorted-or-original order values, permutation (S64), first-of-run mask (pred)}.
struct Runs {
  Value values, perm, first;
};
Runs runs(Builder& b, Value x, bool sort);
// unique along dim: the slices along dim sorted lexicographically (their elements in row-major order).
Runs runsAlongSorted(Builder& b, Value x, int64_t dim);
// unique_consecutive along dim: runs of equal slices; `values` holds the slices as rows [n, rest].
Runs runsAlong(Builder& b, Value x, int64_t dim);
// Given the number of runs: {unique values [count], inverse [n] (S64, original order), counts [count] (S64)}.
std::tuple<Value, Value, Value> uniqueFromRuns(Builder& b, const Runs& r, int64_t count);

}  // namespace tpu::lowering
