// Scaled dot-product attention as one op: PyTorch's SDPBackend::OVERRIDEABLE, the slot it keeps for a backend's
// own attention. Without it F.scaled_dot_product_attention on tpu runs ATen's math decomposition, about ten ops
// forward (mask, matmul, scale, softmax, matmul) and more in backward, each a program in Strict mode. Here the
// choice stub picks OVERRIDEABLE where the shapes fit, and _scaled_dot_product_fused_attention_overrideable and
// its backward run as one op group each (OpGroup.h): one program per call in Strict mode, one node in a compiled
// or fused graph. Nothing of size (L, S) is saved: the backward recomputes the probabilities from the scores, as
// flash attention does (the forward's logsumexp is returned, as the schema asks). Eager training where the
// probabilities are no larger than q, k and v takes AttentionAutograd.cpp instead, which keeps them.
//
// Semantics follow the math path: is_causal is the top-left aligned lower triangle, a row whose every score is
// masked out gives zeros (ATen's _safe_softmax), bf16/fp16 compute in float32. Grouped-query attention (fewer key
// heads than query heads, enable_gqa) is read from the shapes. Dropout, nested tensors and other ranks stay on
// the math path, as does everything where the user disabled OVERRIDEABLE (torch.nn.attention.sdpa_kernel).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/SDPBackend.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "AttentionMath.h"
#include "Elementwise.h"
#include "OpGroup.h"

namespace tpu::aten {

using at::Tensor;

bool fitsOneOp(const Tensor& q, const Tensor& k, const Tensor& v, double dropoutP, bool enableGqa) {
  if (dropoutP != 0.0 || q.is_nested() || k.is_nested() || v.is_nested()) return false;
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  if (!at::isFloatingType(q.scalar_type()) || k.scalar_type() != q.scalar_type() ||
      v.scalar_type() != q.scalar_type())
    return false;
  if (q.sym_size(0) != k.sym_size(0) || k.sym_size(0) != v.sym_size(0)) return false;
  if (k.sym_size(1) != v.sym_size(1) || k.sym_size(2) != v.sym_size(2) || q.sym_size(3) != k.sym_size(3))
    return false;
  if (q.sym_size(1) == k.sym_size(1)) return true;
  return enableGqa && k.sym_size(1) > 0 && q.sym_size(1) % k.sym_size(1) == 0;
}

// Keys or values of (B, Hk, S, D) for queries of Hq = Hk * G heads: query head h reads head h / G (enable_gqa).
Tensor repeatHeads(const Tensor& t, int64_t queryHeads) {
  int64_t heads = t.size(1);
  if (heads == queryHeads) return t;
  return t.unsqueeze(2).expand({t.size(0), heads, queryHeads / heads, t.size(2), t.size(3)})
      .reshape({t.size(0), queryHeads, t.size(2), t.size(3)});
}

// The gradient of repeatHeads: the G query heads' sums per key head.
Tensor sumHeads(const Tensor& grad, int64_t heads) {
  if (grad.size(1) == heads) return grad;
  return grad.view({grad.size(0), heads, grad.size(1) / heads, grad.size(2), grad.size(3)}).sum(2);
}

// scale * q k^T (+ bias, or the causal triangle), in the compute type: (B, H, L, S).
Tensor attentionScores(const Tensor& q, const Tensor& k, const std::optional<Tensor>& bias, bool isCausal,
                       double scale) {
  Tensor s = at::matmul(q, k.transpose(-2, -1)).mul(scale);
  if (bias.has_value() && bias->defined()) s = s.add(bias->to(s.scalar_type()));
  if (isCausal) {
    Tensor keep = at::ones({s.size(-2), s.size(-1)}, s.options().dtype(at::kBool)).tril();
    s = s.masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity());
  }
  return s;
}

// The softmax over the last dim as exp(s - max) and its sum (1 where a row is all -inf: such a row's
// probabilities are 0, as ATen's _safe_softmax gives; shifted by 0 there), the shift, and which rows are empty.
// The backward recomputes the probabilities this way, not as exp(s - logsumexp): with large scores the
// logsumexp's rounding (an ulp of the score) moves the top probability off 1, and the softmax gradient
// multiplies that error by the scores' spread.
std::tuple<Tensor, Tensor, Tensor, Tensor> softmaxParts(const Tensor& s) {
  Tensor rowMax = s.amax(-1, true);  // not max(dim): its indices, unused, are a variadic reduce XLA:CPU runs slowly
  rowMax = rowMax.masked_fill(at::isinf(rowMax), 0.0);
  Tensor e = s.sub(rowMax).exp();
  Tensor sum = e.sum(-1, true);
  Tensor empty = sum.eq(0);
  return {e, sum.masked_fill(empty, 1.0), rowMax, empty};
}

// t (contiguous) laid out in ref's dim order, as PyTorch's meta kernels allocate these results
// (alloc_with_matching_layout, empty_like): a compiled graph may view them by those strides.
Tensor inLayoutOf(const Tensor& t, const Tensor& ref) {
  std::vector<int64_t> order(ref.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ref.stride(a) > ref.stride(b); });
  bool identity = std::is_sorted(order.begin(), order.end());
  if (identity) return t;
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
  return t.permute(order).contiguous().permute(inverse);
}

double softmaxScale(const Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

Tensor attentionProbabilities(const Tensor& q, const Tensor& k, const std::optional<Tensor>& bias, bool isCausal,
                              double scale) {
  c10::ScalarType ct = opmathType(q.scalar_type());
  Tensor s = attentionScores(q.to(ct), repeatHeads(k.to(ct), q.size(1)), bias, isCausal, scale);
  auto [e, safeSum, rowMax, empty] = softmaxParts(s);
  return e.div(safeSum);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> attentionGradients(const Tensor& gradOut, const Tensor& query,
                                                              const Tensor& key, const Tensor& value, const Tensor& p,
                                                              const Tensor& bias, std::array<bool, 4> need,
                                                              double scale) {
  c10::ScalarType ct = p.scalar_type();
  int64_t heads = query.size(1), keyHeads = key.size(1);
  Tensor dO = gradOut.to(ct);
  Tensor dP = at::matmul(dO, repeatHeads(value.to(ct), heads).transpose(-2, -1));
  Tensor dS = p.mul(dP.sub(p.mul(dP).sum(-1, true)));  // the softmax's backward
  Tensor gq, gk, gv, gb;
  if (need[0])
    gq = inLayoutOf(at::matmul(dS, repeatHeads(key.to(ct), heads)).mul(scale).to(query.scalar_type()), query);
  if (need[1])
    gk = inLayoutOf(sumHeads(at::matmul(dS.transpose(-2, -1), query.to(ct)).mul(scale), keyHeads)
                        .to(key.scalar_type()),
                    key);
  if (need[2])
    gv = inLayoutOf(sumHeads(at::matmul(p.transpose(-2, -1), dO), keyHeads).to(value.scalar_type()), value);
  if (need[3] && bias.defined()) gb = at::sum_to(dS, bias.sizes()).to(bias.scalar_type());
  return {gq, gk, gv, gb};
}

namespace {

int64_t fusedSdpChoice(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& /*mask*/,
                       double dropoutP, bool /*isCausal*/, std::optional<double> /*scale*/, bool enableGqa) {
  auto& ctx = at::globalContext();
  if (ctx.userEnabledOverrideableSDP() && fitsOneOp(q, k, v, dropoutP, enableGqa))
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  return static_cast<int64_t>(at::SDPBackend::error);  // ATen then says no viable backend was found
}

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor> attentionForward(
    const Tensor& query, const Tensor& key, const Tensor& value, const std::optional<Tensor>& bias, double dropoutP,
    bool isCausal, bool returnDebugMask, std::optional<double> scale) {
  TORCH_CHECK(dropoutP == 0.0, "_scaled_dot_product_fused_attention_overrideable: dropout is not supported on tpu; ",
              "scaled_dot_product_attention runs dropout on the math backend");
  TORCH_CHECK(!returnDebugMask, "_scaled_dot_product_fused_attention_overrideable: return_debug_mask is not ",
              "supported on tpu");
  TORCH_CHECK(fitsOneOp(query, key, value, 0.0, true),
              "_scaled_dot_product_fused_attention_overrideable: expected query (B, Hq, L, E), key (B, Hk, S, E) and ",
              "value (B, Hk, S, Ev) of one floating dtype with Hq a multiple of Hk; got ", query.sizes(), ", ",
              key.sizes(), " and ", value.sizes());
  int64_t queryLen = query.size(2), keyLen = key.size(2);
  auto [out, logsumexp, seed, offset] = asOneProgram([&] {
    c10::ScalarType ct = opmathType(query.scalar_type());
    int64_t heads = query.size(1);
    Tensor s = attentionScores(query.to(ct), repeatHeads(key.to(ct), heads), bias, isCausal,
                               softmaxScale(query, scale));
    auto [e, safeSum, rowMax, empty] = softmaxParts(s);
    Tensor o = at::matmul(e.div(safeSum), repeatHeads(value.to(ct), heads)).to(query.scalar_type());
    o = inLayoutOf(o, query);
    Tensor lse = safeSum.log().add(rowMax).masked_fill(empty, -std::numeric_limits<double>::infinity());
    // No dropout, so no random state: zeros, made by the program (a replayed compiled graph makes them too).
    Tensor zero = at::zeros({}, query.options().dtype(at::kLong));
    return std::make_tuple(o, lse.squeeze(-1), zero, zero.clone());
  });
  return {out, logsumexp, Tensor(), Tensor(), c10::SymInt(queryLen), c10::SymInt(keyLen), seed, offset, Tensor()};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> attentionBackward(
    const Tensor& gradOut, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& bias,
    std::array<bool, 4> gradInputMask, const Tensor& /*out*/, const Tensor& /*logsumexp*/, const Tensor& /*cumSeqQ*/,
    const Tensor& /*cumSeqK*/, c10::SymInt /*maxQ*/, c10::SymInt /*maxK*/, double dropoutP, bool isCausal,
    const Tensor& /*philoxSeed*/, const Tensor& /*philoxOffset*/, std::optional<double> scale) {
  TORCH_CHECK(dropoutP == 0.0,
              "_scaled_dot_product_fused_attention_overrideable_backward: dropout is not supported on tpu");
  return asOneProgram([&] {
    double sc = softmaxScale(query, scale);
    Tensor p = attentionProbabilities(query, key, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt,
                                      isCausal, sc);
    return attentionGradients(gradOut, query, key, value, p, bias, gradInputMask, sc);
  });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", fusedSdpChoice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", attentionForward);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", attentionBackward);
}

}  // namespace
}  // namespace tpu::aten

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &tpu::aten::fusedSdpChoice)
}  // namespace at::native
