#pragma once
// Jagged (ragged) data lowerings for the fbgemm ops TorchRec calls (csrc/aten/JaggedKernels.cpp): cumulative
// sums of lengths, permuting the features of a KeyedJaggedTensor (permute_2D_sparse_data), jagged <-> padded
// dense, and permuting the pooled embeddings of a KeyedTensor. Lengths and offsets stay device values: every
// position finds its segment on the device (segmentOf), and every output shape is given by the caller from
// sizes the host already knows. Index values are S64 inside; each rule that reads indices also returns a
// pred scalar "some index/offset is out of range" for the runtime to raise on, never a silent clamp.
#include <span>
#include <vector>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Value;

// Cumulative sums along the last dim of a rank-1 or rank-2 x, in x's dtype: inclusive (x0, x0+x1, ...),
// exclusive (0, x0, x0+x1, ...; same size) and complete (0, x0, ..., sum: one more element per row).
Value inclusiveCumsum(Builder& b, Value x);
Value exclusiveCumsum(Builder& b, Value x);
Value completeCumsum(Builder& b, Value x);

// Segment of each position 0..n-1 given the segments' start positions `starts` [S] (S64, non-decreasing):
// the last segment whose start is <= the position (empty segments are skipped), S64 [n]; positions before
// the first start belong to segment 0. O(n log n): starts are counted into a histogram and scanned.
Value segmentOf(Builder& b, Value starts, int64_t n);

struct PermutedSparse {
  Value lengths, values, weights;  // weights: only when given
  Value outOfRange;                // pred scalar: some permute index is outside [0, T)
};
// fbgemm::permute_2D_sparse_data: lengths [T, B] (any integer type), values [N, ...] and optional weights
// [N, ...] hold, per feature t, the sum over b of lengths[t, b] consecutive rows. The result holds features
// permute[0], permute[1], ... (repeats and subsets allowed): lengths [P, B] in lengths' dtype, values and
// weights [outLen, ...] (outLen is the caller's: the sum of the permuted lengths; rows past that sum are 0).
PermutedSparse permuteSparseData(Builder& b, Value permute, Value lengths, Value values, const Value* weights,
                                 int64_t outLen);

// fbgemm::invert_permute: {inverse (permute's dtype), outOfRange}; inverse[permute[i]] = i.
std::pair<Value, Value> invertPermute(Builder& b, Value permute);

// fbgemm::offsets_range: for each of rangeSize positions, its distance from the start of its segment; segment i
// starts at offsets[i] (S64 after conversion, non-decreasing) and the last one runs to rangeSize. In offsets'
// dtype.
Value offsetsRange(Builder& b, Value offsets, int64_t rangeSize);

// fbgemm::segment_sum_csr: values [N] summed per segment i = [csrSeg[i] * batchSize, csrSeg[i + 1] * batchSize),
// S = csrSeg.size - 1 sums in values' dtype. Returns {sums, outOfRange} (a segment reaching past N).
std::pair<Value, Value> segmentSumCsr(Builder& b, int64_t batchSize, Value csrSeg, Value values);

struct JaggedPositions {
  Value index;       // S64 [B, L1, ..., Lk]: the row of `values` at each padded position (0 where invalid)
  Value valid;       // pred [B, L1, ..., Lk]: the position holds a value (inside every jagged length)
  Value outOfRange;  // pred scalar: a valid position reads an offset or a row that does not exist
};
// The padded positions of a jagged tensor with k = offsets.size() jagged dims: offsets[0] has B + 1 entries,
// offsets[d] indexes into offsets[d + 1] (the last into the rows of values, `numRows` of them); the padded
// dims are maxLengths (longer rows are truncated, as fbgemm does).
JaggedPositions jaggedPositions(Builder& b, std::span<const Value> offsets, const std::vector<int64_t>& maxLengths,
                                int64_t numRows);
// fbgemm::jagged_to_padded_dense_forward: values [N, D] -> [B, L1, ..., Lk, D], `padding` (a scalar of values'
// dtype) where no value is. Returns {dense, outOfRange}.
std::pair<Value, Value> jaggedToPaddedDense(Builder& b, Value values, std::span<const Value> offsets,
                                            const std::vector<int64_t>& maxLengths, Value padding);
// fbgemm::jagged_to_padded_dense_backward (and dense_to_jagged_forward, the same map): grad [B, L1, ..., Lk, D]
// -> [totalL, D], each value read at its padded position, 0 for values past max_lengths. Returns {values,
// outOfRange}.
std::pair<Value, Value> jaggedToPaddedDenseBackward(Builder& b, Value grad, std::span<const Value> offsets,
                                                    int64_t totalL);

// fbgemm::permute_pooled_embs: pooled [B, W] is n = permute.size pieces along dim 1, piece i spanning
// [offsetDims[i], offsetDims[i + 1]) (the first from column 0, the last to column W, as fbgemm's
// tensor_split); the result concatenates pieces permute[0], permute[1], ... Returns {result [B, W],
// failed}: failed when permute is not a permutation of [0, n) (the result would not be W columns wide).
std::pair<Value, Value> permutePooledEmbs(Builder& b, Value pooled, Value offsetDims, Value permute);

// fbgemm::permute_multi_embedding_function: KeyedTensor values regrouped. `inputs` are [B, w_i]; each row of
// `permutes` [P, 6] (in_tensor, out_tensor, in_offset, out_offset, length, next) copies `length` columns of input
// in_tensor from in_offset to output out_tensor at out_offset; outputs have outLengths columns. `reverse` is the
// backward: `inputs` are the forward's outputs (gradients), the results are the forward's inputs (outLengths
// their widths), each column the sum of the gradients of its copies (0 for a column nothing copied). Returns the
// outputs and a pred "a row names a missing tensor or column, or two rows write one output column".
std::vector<Value> permuteMultiEmbedding(Builder& b, std::span<const Value> inputs, Value permutes,
                                         const std::vector<int64_t>& outLengths, bool reverse);

}  // namespace tpu::lowering
