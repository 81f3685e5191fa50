// The ops TorchRec's sharded embedding path (DistributedModelParallel with the `unfused_tpu` compute kernel) runs
// on device tpu, as tpu kernels under their own schemas, each one program over csrc/lowering/ShardedEmbedding.cpp:
//   torchrec::embedding_pooled_lookup_offset (+ _backward): the pooled lookup of one table shard,
//   torchrec::embedding_lookup (+ _backward): the unpooled one (EmbeddingCollection),
//   torchrec::permute_pooled_embs (+ _backward): column-wise sharding's reordering of the pooled columns,
//   fbgemm::block_bucketize_sparse_features: row-wise sharding's split of each id list by the rank owning the row.
// torchrec defines its ops in Python (torchrec.experimental.torch_tpu.pallas.ops, with CPU kernels and autograd
// formulas that call the backward ops); torch_tpu/torchrec registers these kernels right after that module and
// fbgemm_gpu are imported (registerTorchrecKernels, registerShardedFbgemmKernels), one Library per op as in
// JaggedKernels.cpp. Lengths and offsets stay on the device and every output size is one the host knows.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <vector>

#include "LateKernels.h"
#include "OpRunner.h"
#include "csrc/lowering/ShardedEmbedding.h"

namespace tpu::aten {
namespace {

void checkIndex1D(const char* op, const char* name, const at::Tensor& t) {
  checkIndexTensor(op, name, t);
  TORCH_CHECK(t.dim() == 1, op, ": expected a 1-D ", name, ", got ", t.dim(), "-D");
}

void checkTable(const char* op, const char* name, const at::Tensor& t, int64_t embDim) {
  checkTpu(op, name, t);
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, ": expected floating-point ", name, ", got ", t.scalar_type());
  TORCH_CHECK(t.dim() == 2, op, ": expected a 2-D ", name, ", got ", t.dim(), "-D");
  TORCH_CHECK(t.size(1) == embDim, op, ": emb_dim is ", embDim, " but ", name, " has ", t.size(1), " columns");
}

// ---- pooled lookup ------------------------------------------------------------------------

at::Tensor pooledLookupOffset(const at::Tensor& indices, const at::Tensor& offsets, const at::Tensor& weights,
                              int64_t embDim) {
  const char* op = "torchrec::embedding_pooled_lookup_offset";
  checkIndex1D(op, "indices", indices);
  checkIndex1D(op, "offsets", offsets);
  checkTable(op, "weights", weights, embDim);
  TORCH_CHECK(offsets.numel() >= 1, op, ": expected at least one offset");
  int64_t bags = offsets.numel() - 1, n = indices.numel();
  at::Tensor out = at::zeros({bags, embDim}, weights.options());
  if (bags == 0 || embDim == 0) return out;
  TORCH_CHECK_INDEX(n == 0 || weights.size(0) > 0, op, ": ", n, " indices into a table of no rows");
  // No indices: every bag is empty (the offsets, all equal, are not read), as the CPU kernel's index_add_ of none.
  if (n == 0) return out;
  TPU_OP(op).in(indices).in(offsets).in(weights).checksIndices(runtime::ErrorKind::Index).out(out).run(
      [](hlo::Builder& b, Values in, Values) {
        auto [r, bad] = lowering::pooledLookupOffset(b, in[0], in[1], in[2]);
        return ValueList{r, bad};
      });
  return out;
}

at::Tensor pooledLookupOffsetBackward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                      int64_t numRows, int64_t embDim) {
  const char* op = "torchrec::embedding_pooled_lookup_offset_backward";
  checkIndex1D(op, "indices", indices);
  checkIndex1D(op, "offsets", offsets);
  checkTable(op, "grad_out", grad, embDim);
  TORCH_CHECK(numRows >= 0, op, ": num_rows must be >= 0, got ", numRows);
  TORCH_CHECK(grad.size(0) == offsets.numel() - 1, op, ": grad_out has ", grad.size(0), " rows, offsets describe ",
              offsets.numel() - 1, " bags");
  at::Tensor out = at::zeros({numRows, embDim}, grad.options());
  int64_t n = indices.numel();
  if (n == 0 || embDim == 0) return out;
  TORCH_CHECK_INDEX(numRows > 0, op, ": ", n, " indices into a table of no rows");
  TPU_OP(op).in(grad).in(indices).in(offsets).attr(numRows).checksIndices(runtime::ErrorKind::Index).out(out).run(
      [numRows](hlo::Builder& b, Values in, Values) {
        auto [r, bad] = lowering::pooledLookupOffsetBackward(b, in[0], in[1], in[2], numRows);
        return ValueList{r, bad};
      });
  return out;
}

// ---- unpooled lookup (EmbeddingCollection) -------------------------------------------------

at::Tensor embeddingLookup(const at::Tensor& indices, const at::Tensor& weights, int64_t embDim) {
  const char* op = "torchrec::embedding_lookup";
  checkIndex1D(op, "indices", indices);
  checkTable(op, "weights", weights, embDim);
  // The CPU kernel is weights[indices]: aten::index_select's tpu kernel, with its IndexError, named after this op.
  IndexErrorScope scope(op, runtime::ErrorKind::Index);
  return weights.index_select(0, indices);
}

at::Tensor embeddingLookupBackward(const at::Tensor& grad, const at::Tensor& indices, int64_t numRows,
                                   int64_t embDim) {
  const char* op = "torchrec::embedding_lookup_backward";
  checkIndex1D(op, "indices", indices);
  checkTable(op, "grad_out", grad, embDim);
  TORCH_CHECK(grad.size(0) == indices.numel(), op, ": grad_out has ", grad.size(0), " rows for ", indices.numel(),
              " indices");
  TORCH_CHECK(numRows >= 0, op, ": num_rows must be >= 0, got ", numRows);
  IndexErrorScope scope(op, runtime::ErrorKind::Index);
  return at::zeros({numRows, embDim}, grad.options()).index_add_(0, indices, grad);
}

// ---- permute_pooled_embs (torchrec's) -----------------------------------------------------

template <bool Backward>
at::Tensor permutePooledEmbs(const at::Tensor& x, const at::Tensor& offsetDimList, const at::Tensor& permuteList) {
  const char* op = Backward ? "torchrec::permute_pooled_embs_backward" : "torchrec::permute_pooled_embs";
  checkTpu(op, Backward ? "grad_out" : "pooled_embs", x);
  checkIndex1D(op, "offset_dim_list", offsetDimList);
  checkIndex1D(op, "permute_list", permuteList);
  TORCH_CHECK(x.dim() == 2, op, ": expected a 2-D [B, sum(D)] tensor, got ", x.dim(), "-D");
  int64_t w = x.size(1), n = permuteList.numel();
  at::Tensor out = Backward ? at::zeros(x.sizes(), x.options()) : at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return out;
  TORCH_CHECK_INDEX(n > 0 && offsetDimList.numel() >= 2, op, ": ", w,
                    " columns but no pieces (permute_list or offset_dim_list empty)");
  std::string message = std::string(op) + ": permute_list names a piece offset_dim_list does not describe, or the "
                        "permuted pieces cover fewer than the " + std::to_string(w) + " columns";
  TPU_OP(op).in(x).in(offsetDimList).in(permuteList).attr(Backward).asserts(message).out(out).run(
      [](hlo::Builder& b, Values in, Values) {
        auto [r, bad] = lowering::permutePooledColumns(b, in[0], in[1], in[2], Backward);
        return ValueList{r, bad};
      });
  return out;
}

// ---- block_bucketize_sparse_features ------------------------------------------------------

using Bucketized = std::tuple<at::Tensor, at::Tensor, OptTensor, OptTensor, OptTensor>;

// The signature of fbgemm 1.8's CPU kernel (the dispatcher requires one C++ signature per op).
Bucketized blockBucketize(const at::Tensor& lengths, const at::Tensor& indices, const bool bucketizePos,
                          const bool sequence, const at::Tensor& blockSizes, const int64_t mySize,
                          const OptTensor& weights, const OptTensor& batchSizePerFeature, const int64_t maxB,
                          const std::optional<std::vector<at::Tensor>>& blockBucketizePos, const bool keepOrigIdx,
                          const OptTensor& totalNumBlocks, const OptTensor& keepOrigIdxPerFeature) {
  const char* op = "fbgemm::block_bucketize_sparse_features";
  checkIndex1D(op, "lengths", lengths);
  checkIndex1D(op, "indices", indices);
  checkIndex1D(op, "block_sizes", blockSizes);
  TORCH_CHECK_NOT_IMPLEMENTED(!has(batchSizePerFeature) && !blockBucketizePos.has_value() && !has(totalNumBlocks) &&
                                  !has(keepOrigIdxPerFeature),
                              op, " on tpu: batch_size_per_feature (variable batch), block_bucketize_pos (uneven "
                              "row blocks), total_num_blocks and keep_orig_idx_per_feature are not supported");
  TORCH_CHECK(mySize >= 1, op, ": my_size must be >= 1, got ", mySize);
  int64_t t = blockSizes.numel(), tb = lengths.numel(), n = indices.numel();
  TORCH_CHECK(t > 0 ? tb % t == 0 : tb == 0, op, ": ", tb, " lengths are not a batch for each of the ", t,
              " features of block_sizes");
  bool w = has(weights);
  if (w) {
    checkTpu(op, "weights", *weights);
    TORCH_CHECK(weights->dim() == 1 && weights->numel() == n, op, ": expected 1-D weights of ", n,
                " elements, got ", weights->sizes());
  }
  at::Tensor newLengths = at::zeros({tb * mySize}, lengths.options());
  at::Tensor newIndices = at::empty({n}, indices.options());
  OptTensor newWeights, newPos, permute;
  if (w) newWeights = at::empty({n}, weights->options());
  if (bucketizePos) newPos = at::empty({n}, indices.options());
  if (sequence) permute = at::empty({n}, indices.options());
  if (n == 0 || tb == 0) {
    // No ids: all lengths are 0 (checked as the CPU kernel would find: they must sum to the 0 indices).
    if (tb > 0) {
      TORCH_CHECK(lengths.sum().item<int64_t>() == 0, op, ": the lengths sum to more than the 0 indices");
    }
    return {newLengths, newIndices, newWeights, newPos, permute};
  }
  std::string message = std::string(op) + ": the lengths do not sum to the " + std::to_string(n) +
                        " indices, or a length or an index is negative";
  Op call = TPU_OP(op);
  call.in(lengths).in(indices).in(blockSizes);
  if (w) call.in(*weights);
  call.attr(mySize).attr(t).attr(keepOrigIdx).attr(w).attr(bucketizePos).attr(sequence).asserts(message);
  call.out(newLengths).out(newIndices);
  if (w) call.out(*newWeights);
  if (bucketizePos) call.out(*newPos);
  if (sequence) call.out(*permute);
  call.run([=](hlo::Builder& b, Values in, Values) {
    lowering::BlockBucketized r = lowering::blockBucketize(b, in[0], in[1], w ? &in[3] : nullptr, in[2], mySize, t,
                                                           keepOrigIdx, bucketizePos, sequence);
    ValueList out{r.lengths, r.indices};
    if (w) out.push_back(r.weights);
    if (bucketizePos) out.push_back(r.pos);
    if (sequence) out.push_back(r.unbucketizePermute);
    out.push_back(r.outOfRange);
    return out;
  });
  return {newLengths, newIndices, newWeights, newPos, permute};
}

}  // namespace

// fbgemm's op for row-wise sharding, registered with the other fbgemm kernels (registerFbgemmKernels).
std::string registerShardedFbgemmKernels() {
  static LateKernels kernels(__FILE__);
  return kernels.once([](LateKernels& k) { k.add("fbgemm", "block_bucketize_sparse_features", blockBucketize); });
}

// torchrec's ops: called once torchrec.experimental.torch_tpu.pallas.ops has defined them.
std::string registerTorchrecKernels() {
  static LateKernels kernels(__FILE__);
  return kernels.once([](LateKernels& k) {
    k.add("torchrec", "embedding_pooled_lookup_offset", pooledLookupOffset);
    k.add("torchrec", "embedding_pooled_lookup_offset_backward", pooledLookupOffsetBackward);
    k.add("torchrec", "embedding_lookup", embeddingLookup);
    k.add("torchrec", "embedding_lookup_backward", embeddingLookupBackward);
    k.add("torchrec", "permute_pooled_embs", permutePooledEmbs<false>);
    k.add("torchrec", "permute_pooled_embs_backward", permutePooledEmbs<true>);
  });
}

}  // namespace tpu::aten
