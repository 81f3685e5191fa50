// aten::linear with a one-program backward in Strict mode.
//
// linear is CompositeImplicitAutograd: autograd records what it decomposes into (t + addmm, or matmul + add),
// and their backward is three programs per layer in Strict mode (grad_input's mm, grad_weight's mm, the bias's
// sum), each a launch and a round trip through memory. Here, in Strict mode and where autograd records, linear
// is one autograd node: its forward is ATen's own composite (no grad recorded inside), its backward computes the
// three gradients as one op group (OpGroup.h). Everything else takes the composite as before: no gradient needed,
// the other eager modes (whose graphs fuse the backward anyway), tensor subclasses and tracing (the Python key:
// DTensor, FakeTensor in torch.compile), functorch transforms, forward-mode AD, a weight that is not 2-d or a
// bias that is not 1-d.
#include <ATen/ATen.h>
#include <ATen/FunctionalTensorWrapper.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/linear_native.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "OpGroup.h"
#include "OwnAutograd.h"

namespace tpu::aten {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& input, const Tensor& weight,
                        const std::optional<Tensor>& bias) {
    ctx->save_for_backward({input, weight});
    ctx->saved_data["bias"] = bias.has_value() && bias->defined();  // else not an input of the node
    Tensor out = at::native::linear(input, weight, bias);
    // For a contiguous input of 3 or more dims the composite returns addmm's result viewed back to the input's
    // leading dims. A custom Function's output that is a view may not be modified in place (autograd refuses:
    // the view+inplace logic would bypass this backward), but a plain linear's output may (ReLU(inplace=True)
    // after a Linear): hand back the same memory with no view relationship, as matmul does.
    return out.is_view() ? at::_unsafe_view(out, out.sizes()) : out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const Tensor& input = saved[0];
    const Tensor& weight = saved[1];
    const Tensor& grad = grads[0];
    bool needInput = ctx->needs_input_grad(0), needWeight = ctx->needs_input_grad(1);
    bool needBias = ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2);
    return asOneProgram([&] {
      Tensor gradInput, gradWeight, gradBias;
      Tensor rows = grad.reshape({-1, grad.size(-1)});  // (N, out) over every leading dim
      if (needInput) gradInput = at::matmul(grad, weight);
      if (needWeight) gradWeight = rows.t().mm(input.reshape({-1, input.size(-1)}));
      if (needBias) gradBias = rows.sum(0);
      return variable_list{gradInput, gradWeight, gradBias};
    });
  }
};

Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  bool hasBias = bias.has_value() && bias->defined();
  bool records = at::GradMode::is_enabled() &&
                 (input.requires_grad() || weight.requires_grad() || (hasBias && bias->requires_grad()));
  bool shapes = weight.dim() == 2 && input.dim() >= 1 &&
                (!hasBias || (bias->dim() == 1 && bias->size(0) == weight.size(0)));
  bool plain = plainForOwnNode(input) && plainForOwnNode(weight) && (!hasBias || plainForOwnNode(*bias));
  if (!records || !shapes || runtime::eagerMode() != runtime::EagerMode::Strict || !plain || functorchActive())
    return at::native::linear(input, weight, bias);
  return LinearFunction::apply(input, weight, bias);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("linear", linear); }

}  // namespace
}  // namespace tpu::aten
