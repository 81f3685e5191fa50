#pragma once
// Indexing lowerings: gather/scatter along a dim, index_select/index_add,
// advanced indexing (several index tensors) and its index_put, nonzero and
// masked_select (given the count the host read), embedding backward.
//
// Index values are S64 here. XLA clamps out-of-range gather starts and drops
// out-of-range scatter updates; callers wrap negative indices where PyTorch
// does (wrapIndex) and report out-of-range indices with anyOutOfRange (the
// runtime turns that flag into an IndexError, never a silent clamp).
#include <span>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Value;

enum class Reduce { Replace, Add, Mul, Max, Min };

// Converts to S64 and maps i < 0 to i + size.
Value wrapIndex(Builder& b, Value idx, int64_t size);
// pred scalar: some element of idx (any integer type) is outside [lo, hi).
Value anyOutOfRange(Builder& b, Value idx, int64_t lo, int64_t hi);
// pred scalar: some element of `pred` is true.
Value anyTrue(Builder& b, Value pred);
// Identity of a reduction (0, 1, lowest, highest) as a scalar of `t`.
Value reduceIdentity(Builder& b, Reduce r, DType t);
// out[i...] = x[i with i_dim replaced by index[i...]]; index has x's rank.
Value gatherDim(Builder& b, Value x, Value index, int64_t dim);
// self with src[i...] combined into self[i with i_dim := index[i...]] for every
// i in index's shape (src is read at the same i).
Value scatterDim(Builder& b, Value self, Value index, Value src, int64_t dim, Reduce r);
// x with `dim` indexed by the 1-D `index`.
Value indexSelect(Builder& b, Value x, Value index, int64_t dim);
// self[..., index[j], ...] (op)= source[..., j, ...] along dim.
Value indexScatter(Builder& b, Value self, Value index, Value source, int64_t dim, Reduce r);

// Advanced indexing: `indices` (S64, one per entry of `dims`, ascending, all of
// one broadcast shape) index those dims of x. The result puts the broadcast
// dims in place of the indexed dims when they are adjacent, else first.
hlo::Shape advancedIndexShape(const hlo::Shape& x, const hlo::Shape& broadcast, const std::vector<int64_t>& dims);
Value advancedIndex(Builder& b, Value x, std::span<const Value> indices, const std::vector<int64_t>& dims);
// self with values (already of advancedIndexShape) written (Replace) or added
// (Add) at the indexed positions.
Value advancedIndexPut(Builder& b, Value self, std::span<const Value> indices, const std::vector<int64_t>& dims,
                       Value values, Reduce r);

// Number of nonzero elements of x, as an S64 scalar.
Value countNonzero(Builder& b, Value x);
// Coordinates [count, rank] (S64) of the nonzero elements of x in row-major order.
Value nonzero(Builder& b, Value x, int64_t count);
// nonzero_static: the first `size` coordinates; rows past the count hold `fill` (scalar).
Value nonzeroStatic(Builder& b, Value x, int64_t size, Value fill);
// self with its mask positions (mask has self's shape), in order, replaced by
// the leading elements of source (flattened); needs no count on the host.
Value maskedScatter(Builder& b, Value self, Value mask, Value source);
// The elements of x (flattened) where mask (same shape) is nonzero, in order.
Value maskedSelect(Builder& b, Value x, Value mask, int64_t count);
// Gradient of an embedding: rows of grad [n, D] summed into [numWeights, D] at
// indices [n] (S64); rows whose index is paddingIdx are skipped; with
// scaleByFreq each row is divided by the number of times its index occurs.
Value embeddingBackward(Builder& b, Value grad, Value indices, int64_t numWeights, int64_t paddingIdx,
                        bool scaleByFreq);

}  // namespace tpu::lowering
