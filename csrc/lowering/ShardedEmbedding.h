#pragma once
// Lowerings for the ops TorchRec's sharded embedding path calls on device tpu (csrc/aten/ShardedEmbeddingKernels.cpp):
// torchrec's `unfused_tpu` compute kernel (torchrec::embedding_pooled_lookup_offset and its backward, the pooled
// lookup of one table), column-wise sharding's torchrec::permute_pooled_embs (and backward), and row-wise
// sharding's fbgemm::block_bucketize_sparse_features (ids sent to the rank that holds their rows). As in
// Jagged.h: lengths and offsets stay device values, output sizes come from the caller, and every rule that reads
// indices returns a last pred scalar "some index/offset is out of range" for the runtime to raise on.
#include <vector>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Value;

// torchrec::embedding_pooled_lookup_offset: bag i (offsets [B + 1], any integer type) sums the rows of `weights`
// [R, D] at indices[j] for the j with offsets[0] + j in [offsets[i], offsets[i + 1]). Returns {[B, D], bad}: bad
// when an index is outside [0, R), offsets decrease, or they span other than the N indices.
std::pair<Value, Value> pooledLookupOffset(Builder& b, Value indices, Value offsets, Value weights);
// Its backward: grad [B, D] -> [numRows, D], each index's row getting its bag's gradient (summed over repeats).
std::pair<Value, Value> pooledLookupOffsetBackward(Builder& b, Value grad, Value indices, Value offsets,
                                                   int64_t numRows);

// torchrec::permute_pooled_embs: piece i of x's w columns is [offsetDims[i], offsetDims[i + 1]); output columns
// are pieces permute[0], permute[1], ... (repeats allowed, cut at w columns). Returns {source column [w] (S64),
// bad}: bad when a permute entry is outside [0, n) or the permuted pieces cover fewer than w columns.
std::pair<Value, Value> pooledEmbsColumns(Builder& b, Value offsetDims, Value permute, int64_t w);
// x [B, w] permuted so (forward: column j of the result is column src[j]) or, for the backward, the gradient of
// that: x's column j added into column src[j]. Returns {result [B, w], bad}.
std::pair<Value, Value> permutePooledColumns(Builder& b, Value x, Value offsetDims, Value permute, bool backward);

struct BlockBucketized {
  Value lengths, indices, weights, pos, unbucketizePermute;  // weights/pos/unbucketizePermute: when asked for
  Value outOfRange;  // lengths that do not sum to the number of indices, or a negative index / length
};
// fbgemm::block_bucketize_sparse_features without total_num_blocks / block_bucketize_pos / variable batch:
// lengths [T * B], indices [N]. Index v of feature t goes to bucket p = v / blockSizes[t] when v <
// blockSizes[t] * mySize (as v - p * blockSizes[t], or v with keepOrigIdx), else p = v % mySize (as v / mySize,
// or v). Results: lengths [mySize * T * B] (bucket-major), the indices (and weights) in bucket, feature, sample
// order, stable within a bag; pos: each index's position within its bag; unbucketizePermute: the new position
// of each original index.
BlockBucketized blockBucketize(Builder& b, Value lengths, Value indices, const Value* weights, Value blockSizes,
                               int64_t mySize, int64_t numFeatures, bool keepOrigIdx, bool withPos,
                               bool withPermute);

}  // namespace tpu::lowering
