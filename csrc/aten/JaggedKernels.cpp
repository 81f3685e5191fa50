// The fbgemm ops TorchRec runs on a KeyedJaggedTensor / KeyedTensor, as tpu kernels under fbgemm's own schemas
// (fbgemm_gpu defines them when it is imported; registerFbgemmKernels at the end adds these right after). Each
// is one program over csrc/lowering/Jagged.cpp: lengths and offsets stay on the device, and every output size
// is one the host already knows (input sizes, max_lengths, total_L, permuted_lengths_sum). The exceptions are
// documented where they read (permute_2D_sparse_data without permuted_lengths_sum, dense_to_jagged_forward
// without total_L, segment_sum_csr of no values). Autograd is fbgemm's own:
// its Autograd kernels (permute_pooled_embs_auto_grad, jagged_to_padded_dense) and Python formulas
// (permute_2D_sparse_data, via invert_permute) call the forward and backward ops registered here.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <vector>

#include "LateKernels.h"
#include "OpRunner.h"
#include "csrc/lowering/Jagged.h"

namespace tpu::aten {
namespace {

// ---- cumulative sums ----------------------------------------------------------------------

void checkCumsumInput(const char* op, const at::Tensor& t) {
  checkTpu(op, "t_in", t);
  // As fbgemm's CPU kernels (AT_DISPATCH_ALL_TYPES): integer and float32/float64 inputs.
  at::ScalarType s = t.scalar_type();
  TORCH_CHECK(at::isIntegralType(s, false) || s == at::kFloat || s == at::kDouble, op,
              ": expected an integer, float32 or float64 tensor, got ", s);
}

at::Tensor completeCumsum(const at::Tensor& t) {
  const char* op = "fbgemm::asynchronous_complete_cumsum";
  checkCumsumInput(op, t);
  TORCH_CHECK(t.dim() == 1 || t.dim() == 2, op, ": expected a 1-D or 2-D tensor, got ", t.dim(), "-D");
  std::vector<int64_t> shape = t.sizes().vec();
  shape.back() += 1;
  if (t.numel() == 0) return at::zeros(shape, t.options());
  at::Tensor out = at::empty(shape, t.options());
  TPU_OP("fbgemm::asynchronous_complete_cumsum").in(t).out(out).run([](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::completeCumsum(b, in[0])};
  });
  return out;
}

// fbgemm's exclusive and inclusive scans run over all elements in memory order, whatever the rank.
template <bool Exclusive>
at::Tensor flatCumsum(const at::Tensor& t) {
  const char* op = Exclusive ? "fbgemm::asynchronous_exclusive_cumsum" : "fbgemm::asynchronous_inclusive_cumsum";
  checkCumsumInput(op, t);
  at::Tensor out = at::empty(t.sizes(), t.options());
  if (t.numel() == 0) return out;
  TPU_OP(op).in(t.reshape({-1})).attr(Exclusive).out(out.view({-1})).run([](hlo::Builder& b, Values in, Values) {
    return ValueList{Exclusive ? lowering::exclusiveCumsum(b, in[0]) : lowering::inclusiveCumsum(b, in[0])};
  });
  return out;
}

// ---- permute_2D_sparse_data ---------------------------------------------------------------

// `op`: the name errors carry (the 1-D forms below reshape their lengths and come here).
std::tuple<at::Tensor, at::Tensor, OptTensor> permuteSparse(const char* op, const at::Tensor& permute,
                                                            const at::Tensor& lengths, const at::Tensor& values,
                                                            const OptTensor& weights,
                                                            std::optional<c10::SymInt> permutedLengthsSum) {
  checkIndexTensor(op, "permute", permute);
  checkIndexTensor(op, "lengths", lengths);
  checkTpu(op, "values", values);
  TORCH_CHECK(permute.dim() == 1, op, ": expected a 1-D permute, got ", permute.dim(), "-D");
  TORCH_CHECK(lengths.dim() == 2, op, ": expected 2-D lengths [T, B], got ", lengths.dim(), "-D");
  TORCH_CHECK(values.dim() >= 1, op, ": expected values with at least one dim, got a 0-dim tensor");
  if (has(weights)) {
    checkTpu(op, "weights", *weights);
    TORCH_CHECK(weights->dim() >= 1 && weights->size(0) == values.size(0), op, ": expected weights with ",
                values.size(0), " rows like values, got ", weights->sizes());
  }
  int64_t t = lengths.size(0), b = lengths.size(1), p = permute.size(0), n = values.size(0);
  int64_t outLen;
  if (permutedLengthsSum.has_value()) {
    outLen = permutedLengthsSum->expect_int();
    TORCH_CHECK(outLen >= 0, op, ": permuted_lengths_sum must be >= 0, got ", outLen);
  } else if (p == 0 || b == 0) {
    outLen = 0;
  } else {
    // The one data-dependent size: without permuted_lengths_sum the permuted values' length is the sum of
    // the permuted lengths, read on the host (one synchronization), as fbgemm's CUDA kernel does.
    // TorchRec passes the sum it already holds (KeyedJaggedTensor.permute), so its calls never read.
    IndexErrorScope scope(op, runtime::ErrorKind::Index);
    TORCH_CHECK_INDEX(t > 0, op, ": permute indexes features of an empty lengths tensor");
    outLen = lengths.to(at::kLong).sum(1).index_select(0, permute).sum().item<int64_t>();
  }
  std::vector<int64_t> valueShape = values.sizes().vec();
  valueShape[0] = outLen;
  at::Tensor pl = at::empty({p, b}, lengths.options());
  at::Tensor pv = at::empty(valueShape, values.options());
  OptTensor pw;
  if (has(weights)) {
    std::vector<int64_t> ws = weights->sizes().vec();
    ws[0] = outLen;
    pw = at::empty(ws, weights->options());
  }
  if (p == 0) return {pl, pv, pw};
  TORCH_CHECK_INDEX(t > 0, op, ": permute indexes features of an empty lengths tensor");
  if (outLen == 0 || pv.numel() == 0 || b == 0) {
    // Only the lengths hold anything (values rows of zero elements, or no rows): gather the rows of lengths.
    IndexErrorScope scope(op, runtime::ErrorKind::Index);
    pl.copy_(lengths.index_select(0, permute));
    if (outLen > 0) {
      pv.zero_();
      if (pw) pw->zero_();
    }
    return {pl, pv, pw};
  }
  TORCH_CHECK_INDEX(n > 0, op, ": the permuted lengths hold ", outLen, " values, but values is empty");
  bool w = has(weights);
  Op call = TPU_OP(op);
  call.in(permute).in(lengths).in(values);
  if (w) call.in(*weights);
  call.attr(outLen).attr(w).checksIndices(runtime::ErrorKind::Index).out(pl).out(pv);
  if (w) call.out(*pw);
  call.run([outLen, w](hlo::Builder& b, Values in, Values) {
    lowering::PermutedSparse r =
        lowering::permuteSparseData(b, in[0], in[1], in[2], w ? &in[3] : nullptr, outLen);
    ValueList out{r.lengths, r.values};
    if (w) out.push_back(r.weights);
    out.push_back(r.outOfRange);
    return out;
  });
  return {pl, pv, pw};
}

std::tuple<at::Tensor, at::Tensor, OptTensor> permute2DSparseData(const at::Tensor& permute,
                                                                   const at::Tensor& lengths,
                                                                   const at::Tensor& values, const OptTensor& weights,
                                                                   std::optional<c10::SymInt> permutedLengthsSum) {
  return permuteSparse("fbgemm::permute_2D_sparse_data", permute, lengths, values, weights,
                       std::move(permutedLengthsSum));
}

std::tuple<at::Tensor, at::Tensor, OptTensor> permute2DSparseDataInput1D(
    const at::Tensor& permute, const at::Tensor& lengths, const at::Tensor& values, c10::SymInt stride,
    const OptTensor& weights, std::optional<c10::SymInt> permutedLengthsSum) {
  const char* op = "fbgemm::permute_2D_sparse_data_input1D";
  TORCH_CHECK(lengths.dim() == 1, op, ": expected 1-D lengths, got ", lengths.dim(), "-D");
  int64_t s = stride.expect_int();
  TORCH_CHECK(s > 0 && lengths.numel() % s == 0, op, ": stride ", s, " does not divide the ", lengths.numel(),
              " lengths");
  auto [pl, pv, pw] = permuteSparse(op, permute, lengths.reshape({-1, s}), values, weights,
                                    std::move(permutedLengthsSum));
  return {pl.view({-1}), pv, pw};
}

// Each length is one segment (a 1-D lengths [T * B] with B = 1): the variable-batch form TorchRec uses.
std::tuple<at::Tensor, at::Tensor, OptTensor> permute1DSparseData(const at::Tensor& permute,
                                                                   const at::Tensor& lengths,
                                                                   const at::Tensor& values, const OptTensor& weights,
                                                                   std::optional<c10::SymInt> permutedLengthsSum) {
  const char* op = "fbgemm::permute_1D_sparse_data";
  TORCH_CHECK(lengths.dim() == 1, op, ": expected 1-D lengths, got ", lengths.dim(), "-D");
  auto [pl, pv, pw] = permuteSparse(op, permute, lengths.reshape({-1, 1}), values, weights,
                                    std::move(permutedLengthsSum));
  return {pl.view({-1}), pv, pw};
}

at::Tensor invertPermute(const at::Tensor& permute) {
  const char* op = "fbgemm::invert_permute";
  checkIndexTensor(op, "permute", permute);
  TORCH_CHECK(permute.dim() == 1, op, ": expected a 1-D permute, got ", permute.dim(), "-D");
  at::Tensor out = at::empty_like(permute, at::MemoryFormat::Contiguous);
  if (permute.numel() == 0) return out;
  TPU_OP("fbgemm::invert_permute").in(permute).checksIndices(runtime::ErrorKind::Index).out(out).run(
      [](hlo::Builder& b, Values in, Values) {
        auto [inv, bad] = lowering::invertPermute(b, in[0]);
        return ValueList{inv, bad};
      });
  return out;
}

// ---- segments of offsets ------------------------------------------------------------------

at::Tensor offsetsRange(const at::Tensor& offsets, c10::SymInt rangeSizeArg) {
  const char* op = "fbgemm::offsets_range";
  checkIndexTensor(op, "offsets", offsets);
  TORCH_CHECK(offsets.dim() == 1, op, ": expected 1-D offsets, got ", offsets.dim(), "-D");
  int64_t rangeSize = rangeSizeArg.expect_int();
  TORCH_CHECK(rangeSize >= 0, op, ": range_size must be >= 0, got ", rangeSize);
  at::Tensor out = at::empty({rangeSize}, offsets.options());
  if (rangeSize == 0) return out;
  TPU_OP("fbgemm::offsets_range").in(offsets).attr(rangeSize).out(out).run([rangeSize](hlo::Builder& b, Values in,
                                                                                        Values) {
    return ValueList{lowering::offsetsRange(b, in[0], rangeSize)};
  });
  return out;
}

at::Tensor segmentSumCsr(c10::SymInt batchSizeArg, const at::Tensor& csrSeg, const at::Tensor& values) {
  const char* op = "fbgemm::segment_sum_csr";
  checkIndexTensor(op, "csr_seg", csrSeg);
  checkTpu(op, "values", values);
  TORCH_CHECK(csrSeg.dim() == 1 && csrSeg.numel() >= 1, op, ": expected 1-D csr_seg with at least one entry, got ",
              csrSeg.sizes());
  at::ScalarType st = values.scalar_type();
  TORCH_CHECK(at::isIntegralType(st, false) || st == at::kFloat || st == at::kDouble, op,
              ": expected integer, float32 or float64 values, got ", st);
  int64_t batchSize = batchSizeArg.expect_int(), s = csrSeg.numel() - 1;
  TORCH_CHECK(batchSize >= 0, op, ": batch_size must be >= 0, got ", batchSize);
  at::Tensor flat = values.reshape({-1});  // as fbgemm, values are read in memory order
  if (s == 0) return at::empty({0}, values.options());
  if (flat.numel() == 0) {
    // Every segment must then be empty: read the last bound (one synchronization, on this degenerate input only).
    TORCH_CHECK_INDEX((csrSeg[-1].item<int64_t>() - csrSeg[0].item<int64_t>()) * batchSize <= 0, op,
                      ": csr_seg describes values past the end of the 0 values");
    return at::zeros({s}, values.options());
  }
  at::Tensor out = at::empty({s}, values.options());
  TPU_OP("fbgemm::segment_sum_csr").in(csrSeg).in(flat).attr(batchSize).checksIndices(runtime::ErrorKind::Index)
      .out(out).run([batchSize](hlo::Builder& b, Values in, Values) {
        auto [sums, bad] = lowering::segmentSumCsr(b, batchSize, in[0], in[1]);
        return ValueList{sums, bad};
      });
  return out;
}

// ---- jagged <-> padded dense --------------------------------------------------------------

void checkOffsets(const char* op, at::TensorList offsets) {
  TORCH_CHECK(!offsets.empty(), op, ": expected at least one offsets tensor");
  for (const at::Tensor& o : offsets) {
    checkIndexTensor(op, "offsets", o);
    TORCH_CHECK(o.dim() == 1 && o.numel() >= 1, op, ": expected 1-D offsets with at least one entry, got ",
                o.sizes());
  }
}

at::Tensor jaggedToPaddedDenseForward(const at::Tensor& values, const std::vector<at::Tensor>& offsets,
                                      c10::SymIntArrayRef maxLengths, double paddingValue) {
  const char* op = "fbgemm::jagged_to_padded_dense_forward";
  checkTpu(op, "values", values);
  checkOffsets(op, offsets);
  TORCH_CHECK(maxLengths.size() == offsets.size(), op, ": max_lengths.size(), ", maxLengths.size(),
              " != num_jagged_dim, ", offsets.size());
  TORCH_CHECK(values.dim() == 1 || values.dim() == 2, op, ": expected 1-D or 2-D values, got ", values.dim(), "-D");
  TORCH_CHECK(values.scalar_type() != at::kBool && !values.is_complex(), op, ": unsupported values dtype ",
              values.scalar_type());
  std::vector<int64_t> ml;
  for (const c10::SymInt& m : maxLengths) {
    ml.push_back(m.expect_int());
    TORCH_CHECK(ml.back() >= 0, op, ": max_lengths must be >= 0, got ", ml.back());
  }
  bool folded = values.dim() == 1;
  std::vector<int64_t> shape{offsets[0].numel() - 1};
  shape.insert(shape.end(), ml.begin(), ml.end());
  if (!folded) shape.push_back(values.size(1));
  if (values.numel() == 0) return at::full(shape, paddingValue, values.options());
  at::Tensor out = at::empty(shape, values.options());
  if (out.numel() == 0) return out;
  at::Tensor v2 = folded ? values.unsqueeze(1) : values;
  Op call = TPU_OP("fbgemm::jagged_to_padded_dense_forward");
  call.in(v2);
  for (const at::Tensor& o : offsets) call.in(o);
  call.scalar(paddingValue, values.scalar_type()).attrs(ml).checksIndices(runtime::ErrorKind::Index)
      .out(folded ? out.unsqueeze(-1) : out)
      .run([k = offsets.size(), ml](hlo::Builder& b, Values in, Values ops) {
        auto [dense, bad] = lowering::jaggedToPaddedDense(b, in[0], in.subspan(1, k), ml, ops[0]);
        return ValueList{dense, bad};
      });
  return out;
}

at::Tensor denseToJagged(const char* op, const at::Tensor& grad, const std::vector<at::Tensor>& offsets,
                         int64_t totalL) {
  checkTpu(op, "grad_output", grad);
  checkOffsets(op, offsets);
  int64_t k = static_cast<int64_t>(offsets.size());
  TORCH_CHECK(totalL >= 0, op, ": total_L must be >= 0, got ", totalL);
  bool folded = grad.dim() == k + 1;
  TORCH_CHECK(folded || grad.dim() == k + 2, op, ": expected grad_output of ", k + 1, " or ", k + 2,
              " dims for ", k, " jagged dims, got ", grad.dim());
  TORCH_CHECK(grad.size(0) == offsets[0].numel() - 1, op, ": grad_output has ", grad.size(0),
              " rows, offsets[0] describes ", offsets[0].numel() - 1);
  at::Tensor g = folded ? grad.unsqueeze(-1) : grad;
  int64_t d = g.size(-1);
  at::Tensor out = at::zeros({totalL, d}, grad.options());
  if (out.numel() != 0 && g.numel() != 0) {
    Op call = TPU_OP(op);
    call.in(g);
    for (const at::Tensor& o : offsets) call.in(o);
    call.attr(totalL).checksIndices(runtime::ErrorKind::Index).out(out).run(
        [k, totalL](hlo::Builder& b, Values in, Values) {
          auto [gv, bad] = lowering::jaggedToPaddedDenseBackward(b, in[0], in.subspan(1, k), totalL);
          return ValueList{gv, bad};
        });
  }
  return folded ? out.squeeze(-1) : out;
}

at::Tensor jaggedToPaddedDenseBackward(const at::Tensor& grad, const std::vector<at::Tensor>& offsets,
                                       c10::SymInt totalL) {
  return denseToJagged("fbgemm::jagged_to_padded_dense_backward", grad, offsets, totalL.expect_int());
}

// fbgemm's one-jagged-dim forms; their Autograd kernels reach jagged_to_padded_dense_forward by themselves, these
// are for inference mode (below autograd).
// (By-value tensors: the C++ signature of fbgemm 1.8's kernels for these two.)
at::Tensor jagged2dToDense(at::Tensor values, at::Tensor offsets, c10::SymInt maxSequenceLength) {
  TORCH_CHECK(values.dim() == 2, "fbgemm::jagged_2d_to_dense: expected 2-D values, got ", values.dim(), "-D");
  return jaggedToPaddedDenseForward(values, {offsets}, {maxSequenceLength}, 0.0);
}

at::Tensor jagged1dToDense(at::Tensor values, at::Tensor offsets, c10::SymInt maxSequenceLength,
                           int64_t paddingValue) {
  TORCH_CHECK(values.dim() == 1, "fbgemm::jagged_1d_to_dense: expected 1-D values, got ", values.dim(), "-D");
  return jaggedToPaddedDenseForward(values, {offsets}, {maxSequenceLength}, static_cast<double>(paddingValue));
}

// The same map as jagged_to_padded_dense_backward: each value read at its padded position. total_L, when not
// given, is the last offset of the innermost level, read on the host (one synchronization, as fbgemm's kernels).
at::Tensor denseToJaggedForward(const at::Tensor& dense, const std::vector<at::Tensor>& offsets,
                                std::optional<c10::SymInt> totalL) {
  const char* op = "fbgemm::dense_to_jagged_forward";
  checkTpu(op, "dense", dense);
  checkOffsets(op, offsets);
  int64_t total = totalL.has_value() ? totalL->expect_int() : offsets.back()[-1].item<int64_t>();
  return denseToJagged(op, dense, offsets, total);
}

// ---- permute_pooled_embs ------------------------------------------------------------------

at::Tensor permutePooledEmbs(const at::Tensor& pooled, const at::Tensor& offsetDimList, const at::Tensor& permuteList,
                             const at::Tensor& invOffsetDimList, const at::Tensor& invPermuteList) {
  const char* op = "fbgemm::permute_pooled_embs";
  checkTpu(op, "pooled_embs", pooled);
  checkTpu(op, "offset_dim_list", offsetDimList);
  checkTpu(op, "permute_list", permuteList);
  // fbgemm's own checks and messages.
  TORCH_CHECK(offsetDimList.scalar_type() == at::kLong, "offset_dim_list needs to have long/int64 type");
  TORCH_CHECK(permuteList.scalar_type() == at::kLong, "permute_list needs to have long/int64 type");
  TORCH_CHECK(pooled.dim() == 2, op, ": expected 2-D pooled_embs [B, sum(D)], got ", pooled.dim(), "-D");
  TORCH_CHECK(permuteList.dim() == 1 && offsetDimList.dim() == 1, op,
              ": expected 1-D offset_dim_list and permute_list");
  int64_t n = permuteList.numel();
  TORCH_CHECK(offsetDimList.numel() >= n, op, ": offset_dim_list has ", offsetDimList.numel(),
              " entries, fewer than the ", n, " pieces of permute_list");
  at::Tensor out = at::empty(pooled.sizes(), pooled.options());
  if (out.numel() == 0) return out;
  TORCH_CHECK(n > 0, op, ": permute_list is empty but pooled_embs has ", pooled.size(1), " columns");
  std::string message = std::string(op) + ": permute_list is not a permutation of the " + std::to_string(n) +
                        " pieces that offset_dim_list splits pooled_embs into (or the pieces do not cover its " +
                        std::to_string(pooled.size(1)) + " columns once)";
  TPU_OP("fbgemm::permute_pooled_embs").in(pooled).in(offsetDimList).in(permuteList).asserts(message).out(out).run(
      [](hlo::Builder& b, Values in, Values) {
        auto [r, failed] = lowering::permutePooledEmbs(b, in[0], in[1], in[2]);
        return ValueList{r, failed};
      });
  return out;
}

// ---- KeyedTensor regrouping (permute_multi_embedding) ------------------------------------

// The signature of fbgemm's Meta kernel, which its autograd op calls through `.typed<>()`.
std::vector<at::Tensor> permuteMultiEmbeddingFunction(const at::TensorList& pooledEmbs, const at::Tensor& permutes,
                                                      const at::Tensor& inShapes, const at::Tensor& outShapes,
                                                      c10::SymIntArrayRef outLengths, const bool& reverse) {
  const char* op = "fbgemm::permute_multi_embedding_function";
  TORCH_CHECK(!pooledEmbs.empty(), op, ": expected at least one pooled embedding tensor");
  checkIndexTensor(op, "permutes", permutes);
  TORCH_CHECK(permutes.dim() == 2 && permutes.size(1) == 6, op, ": expected permutes [P, 6], got ", permutes.sizes());
  const at::Tensor& first = pooledEmbs[0];
  TORCH_CHECK(at::isFloatingType(first.scalar_type()), op, ": expected floating-point embeddings, got ",
              first.scalar_type());
  for (const at::Tensor& t : pooledEmbs) {
    checkTpu(op, "pooled_embs", t);
    TORCH_CHECK(t.dim() == 2 && t.size(0) == first.size(0) && t.scalar_type() == first.scalar_type(), op,
                ": expected 2-D embeddings of one batch size and dtype, got ", t.sizes(), " ", t.scalar_type(),
                " and ", first.sizes(), " ", first.scalar_type());
  }
  std::vector<int64_t> lengths;
  std::vector<at::Tensor> outs;
  for (const c10::SymInt& l : outLengths) {
    lengths.push_back(l.expect_int());
    TORCH_CHECK(lengths.back() >= 0, op, ": out_lengths must be >= 0, got ", lengths.back());
    outs.push_back(at::empty({first.size(0), lengths.back()}, first.options()));
  }
  int64_t total = 0;
  for (const at::Tensor& o : outs) total += o.numel();
  if (total == 0) return outs;
  Op call = TPU_OP("fbgemm::permute_multi_embedding_function");
  for (const at::Tensor& t : pooledEmbs) call.in(t);
  call.in(permutes).attr(static_cast<int64_t>(pooledEmbs.size())).attrs(lengths).attr(reverse);
  const std::string message = std::string(op) + ": permutes name a tensor or columns outside the embeddings, or "
                              "write one output column twice";  // must outlive run()
  call.asserts(message);
  for (const at::Tensor& o : outs) call.out(o);
  call.run([n = pooledEmbs.size(), lengths, r = reverse](hlo::Builder& b, Values in, Values) {
    return lowering::permuteMultiEmbedding(b, in.subspan(0, n), in[n], lengths, r);
  });
  return outs;
}

// permute_multi_embedding below autograd (inference mode); fbgemm's Autograd kernel calls the function above.
std::vector<at::Tensor> permuteMultiEmbedding(const at::TensorList& pooledEmbs, const at::Tensor& permutes,
                                              const at::Tensor& inShapes, const at::Tensor& outShapes,
                                              c10::SymIntArrayRef outLengths) {
  return permuteMultiEmbeddingFunction(pooledEmbs, permutes, inShapes, outShapes, outLengths, false);
}

// The regrouping plan is host bookkeeping over key names: fbgemm's CPU kernel computes it, and its tensors are
// moved to the embeddings' device (as its CUDA path does).
std::tuple<at::Tensor, at::Tensor, at::Tensor, std::vector<int64_t>> ktRegroupArguments(
    const at::Tensor& embs, const std::vector<std::vector<std::string>>& keys,
    const std::vector<std::vector<int64_t>>& lengths, const std::vector<std::vector<std::string>>& groups) {
  static auto cpuOp = c10::Dispatcher::singleton()
                          .findSchemaOrThrow("fbgemm::kt_regroup_arguments", "")
                          .typed<decltype(ktRegroupArguments)>();
  auto [permutes, inShapes, outShapes, outLengths] =
      cpuOp.call(at::empty({0}, embs.options().device(c10::kCPU)), keys, lengths, groups);
  return {permutes.to(embs.device()), inShapes.to(embs.device()), outShapes.to(embs.device()), outLengths};
}

// regroup_keyed_tensor below autograd (inference mode): the plan, then the permutation.
std::vector<at::Tensor> regroupKeyedTensor(const at::TensorList& pooledEmbs,
                                           const std::vector<std::vector<std::string>>& keys,
                                           const std::vector<std::vector<int64_t>>& lengths,
                                           const std::vector<std::vector<std::string>>& groups) {
  TORCH_CHECK(!pooledEmbs.empty(), "fbgemm::regroup_keyed_tensor: expected at least one pooled embedding tensor");
  auto [permutes, inShapes, outShapes, outLengths] = ktRegroupArguments(pooledEmbs[0], keys, lengths, groups);
  std::vector<c10::SymInt> out(outLengths.begin(), outLengths.end());
  return permuteMultiEmbeddingFunction(pooledEmbs, permutes, inShapes, outShapes, out, false);
}

}  // namespace

std::string registerShardedFbgemmKernels();  // ShardedEmbeddingKernels.cpp

// The kernels go into the dispatcher once fbgemm_gpu has defined its ops (torch_tpu/torchrec/__init__.py calls
// this right after `import fbgemm_gpu` finishes), not at load time. The dispatcher would accept them earlier,
// but it requires every unboxed kernel of an op to have one C++ signature (SymInt-taking kernels compared among
// themselves), and a mismatch found while fbgemm_gpu's library loads aborts the process: an fbgemm release whose
// signatures differ from 1.8's would make `import fbgemm_gpu` crash wherever torch_tpu is installed. Registered
// afterwards, a mismatch is an exception here: each op has a Library of its own, so only that op is left out,
// and the messages are returned for a warning. Where fbgemm 1.8's kernels take SymInts, the signatures above are
// its exactly (`const std::vector<at::Tensor>&` for Tensor[], not at::TensorList).
std::string registerFbgemmKernels() {
  static LateKernels kernels(__FILE__);
  std::string failures = kernels.once([](LateKernels& k) {
    auto add = [&](const char* name, auto&& kernel) { k.add("fbgemm", name, kernel); };
    add("asynchronous_complete_cumsum", completeCumsum);
    add("asynchronous_exclusive_cumsum", flatCumsum<true>);
    add("asynchronous_inclusive_cumsum", flatCumsum<false>);
    add("permute_2D_sparse_data", permute2DSparseData);
    add("permute_2D_sparse_data_input1D", permute2DSparseDataInput1D);
    add("permute_1D_sparse_data", permute1DSparseData);
    add("invert_permute", invertPermute);
    add("offsets_range", offsetsRange);
    add("segment_sum_csr", segmentSumCsr);
    add("dense_to_jagged_forward", denseToJaggedForward);
    add("jagged_to_padded_dense_forward", jaggedToPaddedDenseForward);
    add("jagged_2d_to_dense", jagged2dToDense);
    add("jagged_1d_to_dense", jagged1dToDense);
    add("jagged_to_padded_dense_backward", jaggedToPaddedDenseBackward);
    add("permute_multi_embedding_function", permuteMultiEmbeddingFunction);
    add("permute_multi_embedding", permuteMultiEmbedding);
    add("kt_regroup_arguments", ktRegroupArguments);
    add("regroup_keyed_tensor", regroupKeyedTensor);
    add("permute_pooled_embs", permutePooledEmbs);
    // Reached only below autograd (inference mode): fbgemm's Autograd kernel for it calls permute_pooled_embs.
    add("permute_pooled_embs_auto_grad", permutePooledEmbs);
  });
  // Row-wise sharding's block_bucketize_sparse_features (ShardedEmbeddingKernels.cpp).
  std::string sharded = registerShardedFbgemmKernels();
  if (!sharded.empty()) failures += (failures.empty() ? "" : "; ") + sharded;
  return failures;
}

}  // namespace tpu::aten
