// Training attention that keeps its probabilities for the backward, in eager mode.
//
// The one-op attention (AttentionKernels.cpp) saves nothing of size (L, S): its backward recomputes the scores
// and the softmax, a matmul and three passes over (B, H, L, S). Where the probabilities take no more memory than
// the q, k and v they come from (short sequences, as in most training of small and medium models), keeping them
// is cheaper: GPT d512 L4 s128 spent 12 ms per attention backward recomputing against 7.5 ms for ATen's math
// path, which keeps them. Here scaled_dot_product_attention is one autograd node whose forward is one program in
// Strict mode (scores, softmax, the matmul with v) and keeps the probabilities, and whose backward is one program
// that reads them. Longer sequences, inference, and everything the one-op path does not take (dropout, other
// ranks, a user's sdpa_kernel choice, tensor subclasses and tracing: torch.compile's graphs keep the one op)
// take ATen's composite as before. Semantics are the one op's: compute in float32 for bf16/fp16, a row whose
// every score is masked out gives zeros.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/scaled_dot_product_attention_native.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <limits>

#include "AttentionMath.h"
#include "Elementwise.h"
#include "OpGroup.h"
#include "OwnAutograd.h"

namespace tpu::aten {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The probabilities, (B, Hq, L, S) in the compute type, take no more bytes than q, k and v together.
bool probabilitiesFit(const Tensor& q, const Tensor& k, const Tensor& v) {
  int64_t bytes = q.size(0) * q.size(1) * q.size(2) * k.size(2) *
                  static_cast<int64_t>(c10::elementSize(opmathType(q.scalar_type())));
  return bytes <= static_cast<int64_t>(q.nbytes() + k.nbytes() + v.nbytes());
}

// A boolean mask as the additive bias ATen's composite makes of it (0 where kept, -inf where masked out).
std::optional<Tensor> additiveBias(const Tensor& mask, c10::ScalarType computeType) {
  if (!mask.defined()) return std::nullopt;
  if (mask.scalar_type() != at::kBool) return mask;
  return at::zeros(mask.sizes(), mask.options().dtype(computeType))
      .masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
}

// The probabilities with a boolean mask made additive.
Tensor probabilities(const Tensor& q, const Tensor& k, const Tensor& mask, bool isCausal, double scale) {
  return attentionProbabilities(q, k, additiveBias(mask, opmathType(q.scalar_type())), isCausal, scale);
}

struct AttentionKeepingProbabilities : public torch::autograd::Function<AttentionKeepingProbabilities> {
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                        const std::optional<Tensor>& attnMask, bool isCausal, double scale) {
    Tensor mask = attnMask.value_or(Tensor());
    auto [out, probs] = asOneProgram([&] {
      Tensor p = probabilities(q, k, mask, isCausal, scale);
      Tensor o = inLayoutOf(at::matmul(p, repeatHeads(v.to(p.scalar_type()), q.size(1))).to(q.scalar_type()), q);
      // A custom Function's output must not be a view of its own temporaries (in-place ops on it would be
      // refused): the result in q's layout, in memory of its own.
      Tensor result = at::empty_strided(o.sizes(), o.strides(), o.options());
      result.copy_(o);
      return std::make_tuple(result, p);
    });
    ctx->save_for_backward(mask.defined() ? variable_list{q, k, v, probs, mask} : variable_list{q, k, v, probs});
    ctx->saved_data["causal"] = isCausal;
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    Tensor mask = saved.size() > 4 ? saved[4] : Tensor();
    bool isCausal = ctx->saved_data["causal"].toBool();
    double scale = ctx->saved_data["scale"].toDouble();
    return asOneProgram([&] {
      // A double backward (create_graph) differentiates the probabilities too: recompute them from q and k with
      // autograd recording, rather than use the kept ones, which are constants.
      Tensor p = at::GradMode::is_enabled() ? probabilities(q, k, mask, isCausal, scale) : saved[3];
      // An absent mask is no input of the node: needs_input_grad(3) only for a given one.
      bool needMask = mask.defined() && mask.is_floating_point() && ctx->needs_input_grad(3);
      std::array<bool, 4> need{ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2), needMask};
      auto [gq, gk, gv, gmask] = attentionGradients(grads[0], q, k, v, p, mask, need, scale);
      return variable_list{gq, gk, gv, gmask, Tensor(), Tensor()};
    });
  }
};

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& attnMask,
                 double dropoutP, bool isCausal, std::optional<double> scale, bool enableGqa) {
  Tensor mask = attnMask.has_value() ? *attnMask : Tensor();
  auto composite = [&] {
    return at::native::scaled_dot_product_attention(q, k, v, attnMask, dropoutP, isCausal, scale, enableGqa);
  };
  bool records = at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                                                 (mask.defined() && mask.requires_grad()));
  bool plain = plainForOwnNode(q) && plainForOwnNode(k) && plainForOwnNode(v) &&
               (!mask.defined() || plainForOwnNode(mask));
  if (!records || !plain || functorchActive()) return composite();
  // A mask of another dtype, and shapes the one op does not take: the composite's checks and errors.
  if (mask.defined() && mask.scalar_type() != at::kBool && mask.scalar_type() != q.scalar_type()) return composite();
  if (at::_fused_sdp_choice(q, k, v, attnMask, dropoutP, isCausal, scale, enableGqa) !=
          static_cast<int64_t>(at::SDPBackend::overrideable) ||
      !probabilitiesFit(q, k, v))
    return composite();
  return AttentionKeepingProbabilities::apply(q, k, v, attnMask, isCausal, softmaxScale(q, scale));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("scaled_dot_product_attention", attention); }

}  // namespace
}  // namespace tpu::aten
