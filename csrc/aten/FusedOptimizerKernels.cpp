// torch.optim's fused kernels (`AdamW(fused=True)`, `Adam(fused=True)`, `SGD(fused=True)`), composed of
// other tpu ops. transformers' Trainer defaults to `adamw_torch_fused`, and torch lists the PrivateUse1
// backend among the devices with fused optimizers, so these must exist.
//
// The math follows CUDA's multi-tensor kernels (fused_adam_utils.cuh, fused_sgd_kernel.cu): float16 /
// bfloat16 state computes in float32; with `grad_scale` the unscaled gradient is written back to `grads`;
// when `found_inf` is 1 nothing changes. found_inf is selected on the device (no host read), so the step
// never waits. Bias corrections 1 - beta^step are computed as -expm1(step * log(beta)), with log(beta) in
// double on the host: float32 `1 - pow(beta, step)` loses ~1e-5 relative to cancellation (beta2 = 0.999),
// the expm1 form keeps CPU's double-precision result to float32 rounding.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <optional>

#include "Elementwise.h"

namespace tpu::aten {
namespace {

at::Tensor opmath(const at::Tensor& t) {
  auto o = opmathType(t.scalar_type());
  return o == t.scalar_type() ? t : t.to(o);
}

// Writes `value` into `dst` (its own dtype), keeping the old values where `skip` (a 0-d bool) is set.
void store(const at::Tensor& dst, const at::Tensor& value, const std::optional<at::Tensor>& skip) {
  at::Tensor v = value.to(dst.scalar_type());
  if (skip) v = at::where(*skip, dst, v);
  dst.copy_(v);
}

void checkLists(const char* op, at::TensorList params, std::initializer_list<at::TensorList> others) {
  for (at::TensorList l : others) {
    TORCH_CHECK(l.empty() || l.size() == params.size(), op, ": every tensor list must have ", params.size(),
                " entries (one per parameter), got ", l.size());
  }
  for (const at::Tensor& p : params) {
    TORCH_CHECK(p.device().type() == c10::DeviceType::PrivateUse1, op, ": expected tpu tensors, got one on ",
                p.device());
    TORCH_CHECK(at::isFloatingType(p.scalar_type()), op, ": parameters must be floating point, got ",
                p.scalar_type());
  }
}

// found_inf == 1 as a 0-d bool on the device (CUDA's kernels return early on it).
std::optional<at::Tensor> skipMask(const std::optional<at::Tensor>& foundInf) {
  if (!foundInf || !foundInf->defined()) return std::nullopt;
  TORCH_CHECK(foundInf->numel() == 1, "fused optimizer: found_inf must have one element, got ", foundInf->numel());
  return foundInf->reshape({}).eq(1);
}

// lr is a Python float or a tensor (`lr=torch.tensor(...)`); either way a value that multiplies tensors.
struct Lr {
  double value = 0;
  std::optional<at::Tensor> tensor;
  at::Tensor times(const at::Tensor& t) const { return tensor ? t * tensor->to(t.scalar_type()) : t * value; }
  at::Tensor over(const at::Tensor& t) const {  // lr / t
    return tensor ? tensor->to(t.scalar_type()) / t : at::reciprocal(t) * value;
  }
};

// 1 - beta^step for a 0-d float step tensor, in `dtype`.
at::Tensor biasCorrection(double beta, const at::Tensor& step, c10::ScalarType dtype) {
  return at::expm1(step.to(dtype) * std::log(beta)).neg();
}

void fusedAdam(bool decoupled, at::TensorList params, at::TensorList grads, at::TensorList expAvgs,
               at::TensorList expAvgSqs, at::TensorList maxExpAvgSqs, at::TensorList steps, const Lr& lr,
               double beta1, double beta2, double weightDecay, double eps, bool amsgrad, bool maximize,
               const std::optional<at::Tensor>& gradScale, const std::optional<at::Tensor>& foundInf) {
  const char* op = decoupled ? "_fused_adamw_" : "_fused_adam_";
  checkLists(op, params, {grads, expAvgs, expAvgSqs, steps});
  TORCH_CHECK(grads.size() == params.size() && expAvgs.size() == params.size() &&
                  expAvgSqs.size() == params.size() && steps.size() == params.size(),
              op, ": grads, exp_avgs, exp_avg_sqs and state_steps need one entry per parameter");
  TORCH_CHECK(!amsgrad || maxExpAvgSqs.size() == params.size(), op,
              ": amsgrad=True needs one max_exp_avg_sqs entry per parameter, got ", maxExpAvgSqs.size());
  auto skip = skipMask(foundInf);
  bool scaled = gradScale && gradScale->defined();
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = opmath(params[i]);
    at::Tensor g = opmath(grads[i]);
    auto t = p.scalar_type();
    if (scaled) {
      g = g / gradScale->reshape({}).to(t);
      store(grads[i], g, skip);
    }
    if (maximize) g = g.neg();
    if (weightDecay != 0) {
      if (decoupled) {
        p = p - lr.times(p) * weightDecay;
      } else {
        g = g + p * weightDecay;
      }
    }
    at::Tensor m = opmath(expAvgs[i]) * beta1 + g * (1 - beta1);
    at::Tensor v = opmath(expAvgSqs[i]) * beta2 + g * g * (1 - beta2);
    at::Tensor bc1 = biasCorrection(beta1, steps[i], t);
    at::Tensor bc2Sqrt = biasCorrection(beta2, steps[i], t).sqrt();
    at::Tensor second = v;
    if (amsgrad) {
      second = at::maximum(opmath(maxExpAvgSqs[i]), v);
      store(maxExpAvgSqs[i], second, skip);
    }
    at::Tensor denom = second.sqrt() / bc2Sqrt + eps;
    p = p - lr.over(bc1) * m / denom;
    store(expAvgs[i], m, skip);
    store(expAvgSqs[i], v, skip);
    store(params[i], p, skip);
  }
}

template <bool Decoupled>
void adam(at::TensorList params, at::TensorList grads, at::TensorList expAvgs, at::TensorList expAvgSqs,
          at::TensorList maxExpAvgSqs, at::TensorList steps, double lr, double beta1, double beta2,
          double weightDecay, double eps, bool amsgrad, bool maximize, const std::optional<at::Tensor>& gradScale,
          const std::optional<at::Tensor>& foundInf) {
  fusedAdam(Decoupled, params, grads, expAvgs, expAvgSqs, maxExpAvgSqs, steps, Lr{lr, std::nullopt}, beta1, beta2,
            weightDecay, eps, amsgrad, maximize, gradScale, foundInf);
}

template <bool Decoupled>
void adamTensorLr(at::TensorList params, at::TensorList grads, at::TensorList expAvgs, at::TensorList expAvgSqs,
                  at::TensorList maxExpAvgSqs, at::TensorList steps, const at::Tensor& lr, double beta1,
                  double beta2, double weightDecay, double eps, bool amsgrad, bool maximize,
                  const std::optional<at::Tensor>& gradScale, const std::optional<at::Tensor>& foundInf) {
  TORCH_CHECK(lr.numel() == 1, "fused Adam: lr must be a one-element tensor, got ", lr.numel(), " elements");
  // A CPU lr tensor is a host value: read it (as CUDA's kernels do); a tpu one stays on the device.
  Lr l = lr.device().is_cpu() ? Lr{lr.item<double>(), std::nullopt} : Lr{0, lr.reshape({})};
  fusedAdam(Decoupled, params, grads, expAvgs, expAvgSqs, maxExpAvgSqs, steps, l, beta1, beta2, weightDecay, eps,
            amsgrad, maximize, gradScale, foundInf);
}

void fusedSgd(at::TensorList params, at::TensorList grads, at::TensorList momentumBuffers, double weightDecay,
              double momentum, const Lr& lr, double dampening, bool nesterov, bool maximize, bool isFirstStep,
              const std::optional<at::Tensor>& gradScale, const std::optional<at::Tensor>& foundInf) {
  checkLists("_fused_sgd_", params, {grads, momentumBuffers});
  TORCH_CHECK(grads.size() == params.size(), "_fused_sgd_: grads need one entry per parameter");
  TORCH_CHECK(momentum == 0 || momentumBuffers.size() == params.size(),
              "_fused_sgd_: momentum != 0 needs one momentum buffer per parameter, got ", momentumBuffers.size());
  auto skip = skipMask(foundInf);
  bool scaled = gradScale && gradScale->defined();
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = opmath(params[i]);
    at::Tensor g = opmath(grads[i]);
    if (scaled) {
      g = g / gradScale->reshape({}).to(p.scalar_type());
      store(grads[i], g, skip);
    }
    if (maximize) g = g.neg();
    if (weightDecay != 0) g = g + p * weightDecay;
    if (momentum != 0) {
      at::Tensor buf = isFirstStep ? g : opmath(momentumBuffers[i]) * momentum + g * (1 - dampening);
      store(momentumBuffers[i], buf, skip);
      g = nesterov ? g + buf * momentum : buf;
    }
    store(params[i], p - lr.times(g), skip);
  }
}

void sgd(at::TensorList params, at::TensorList grads, at::TensorList momentumBuffers, double weightDecay,
         double momentum, double lr, double dampening, bool nesterov, bool maximize, bool isFirstStep,
         const std::optional<at::Tensor>& gradScale, const std::optional<at::Tensor>& foundInf) {
  fusedSgd(params, grads, momentumBuffers, weightDecay, momentum, Lr{lr, std::nullopt}, dampening, nesterov,
           maximize, isFirstStep, gradScale, foundInf);
}

void sgdTensorLr(at::TensorList params, at::TensorList grads, at::TensorList momentumBuffers, double weightDecay,
                 double momentum, const at::Tensor& lr, double dampening, bool nesterov, bool maximize,
                 bool isFirstStep, const std::optional<at::Tensor>& gradScale,
                 const std::optional<at::Tensor>& foundInf) {
  TORCH_CHECK(lr.numel() == 1, "fused SGD: lr must be a one-element tensor, got ", lr.numel(), " elements");
  Lr l = lr.device().is_cpu() ? Lr{lr.item<double>(), std::nullopt} : Lr{0, lr.reshape({})};
  fusedSgd(params, grads, momentumBuffers, weightDecay, momentum, l, dampening, nesterov, maximize, isFirstStep,
           gradScale, foundInf);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", adam<false>);
  m.impl("_fused_adam_.tensor_lr", adamTensorLr<false>);
  m.impl("_fused_adamw_", adam<true>);
  m.impl("_fused_adamw_.tensor_lr", adamTensorLr<true>);
  m.impl("_fused_sgd_", sgd);
  m.impl("_fused_sgd_.tensor_lr", sgdTensorLr);
}

}  // namespace tpu::aten
