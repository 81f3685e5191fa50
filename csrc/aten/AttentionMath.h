// The pieces of scaled dot-product attention shared by the one-op kernels (AttentionKernels.cpp) and the training
// path that keeps the probabilities for the backward (AttentionAutograd.cpp). Each is built from ATen ops, so it
// runs inside whatever program its caller groups it into.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>

namespace tpu::aten {

// (B, Hq, L, E) queries, (B, Hk, S, E) keys, (B, Hk, S, Ev) values of one floating dtype, no dropout, Hq = Hk or
// (enable_gqa) a multiple of it: what one program computes. Everything else takes ATen's math path.
bool fitsOneOp(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropoutP, bool enableGqa);
// Keys or values repeated to the query heads (grouped-query attention), and the gradient of that.
at::Tensor repeatHeads(const at::Tensor& t, int64_t queryHeads);
at::Tensor sumHeads(const at::Tensor& grad, int64_t heads);
// scale * q k^T (+ bias, or the causal triangle), in the compute type: (B, H, L, S).
at::Tensor attentionScores(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& bias,
                           bool isCausal, double scale);
// exp(s - row max), its row sum (1 for an empty row), the row max and which rows are empty (every score -inf).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> softmaxParts(const at::Tensor& s);
// t (contiguous) laid out in ref's dim order.
at::Tensor inLayoutOf(const at::Tensor& t, const at::Tensor& ref);
double softmaxScale(const at::Tensor& q, std::optional<double> scale);
// softmax(scores) in the compute type, a row with no unmasked score all zeros; `bias` is additive.
at::Tensor attentionProbabilities(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& bias,
                                  bool isCausal, double scale);
// The gradients of query, key, value and the additive `bias` from the probabilities `p` (compute type) and the
// output's gradient, each in its input's layout and dtype; undefined where `need` says no (or no bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> attentionGradients(
    const at::Tensor& gradOut, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& p, const at::Tensor& bias, std::array<bool, 4> need, double scale);

}  // namespace tpu::aten
