// torch.amp.GradScaler("tpu"): the two ops it calls, with CUDA's semantics, composed of tpu ops. Nothing is
// read on the host: found_inf and the scale stay device values, so a skipped step costs no sync (the
// optimizer's `found_inf` check happens in GradScaler.step, which reads it as on CUDA).
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tpu::aten {
namespace {

void checkScalarFloat(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.numel() == 1, what, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == at::kFloat, what, " must be a float tensor.");
  TORCH_CHECK(t.device().is_privateuseone(), what, " must be a tpu tensor.");
}

// For each tensor: found_inf = 1 if it holds a non-finite value; tensor *= inv_scale (as CUDA's kernel, in
// float32 opmath for reduced-precision grads).
void nonFiniteCheckAndUnscale(at::TensorList self, at::Tensor& foundInf, const at::Tensor& invScale) {
  checkScalarFloat(invScale, "inv_scale");
  checkScalarFloat(foundInf, "found_inf");
  if (self.empty()) return;
  at::Tensor any;
  for (const at::Tensor& g : self) {
    TORCH_CHECK(g.device() == foundInf.device(), "_amp_foreach_non_finite_check_and_unscale_: all tensors must be on ",
                foundInf.device(), ", got ", g.device());
    TORCH_CHECK(at::isFloatingType(g.scalar_type()),
                "_amp_foreach_non_finite_check_and_unscale_: expected floating-point tensors, got ", g.scalar_type());
    at::Tensor bad = at::logical_not(at::isfinite(g)).any();
    any = any.defined() ? at::logical_or(any, bad) : bad;
    at::Tensor scaled = g.to(at::kFloat).mul(invScale.reshape({}));
    const_cast<at::Tensor&>(g).copy_(scaled);
  }
  at::Tensor updated = at::where(any, at::ones_like(foundInf), foundInf);
  foundInf.copy_(updated);
}

// CUDA's amp_update_scale_cuda_kernel: back off on inf/nan and reset the tracker; otherwise count the
// successful step and grow the scale every growth_interval steps (only to a finite value).
at::Tensor& updateScale(at::Tensor& scale, at::Tensor& growthTracker, const at::Tensor& foundInf, double growth,
                        double backoff, int64_t interval) {
  checkScalarFloat(scale, "current_scale");
  checkScalarFloat(foundInf, "found_inf");
  TORCH_CHECK(growthTracker.numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(growthTracker.scalar_type() == at::kInt, "growth_tracker must be an int tensor.");
  TORCH_CHECK(growthTracker.device() == scale.device() && foundInf.device() == scale.device(),
              "_amp_update_scale_: all tensors must be on one device");
  at::Tensor found = foundInf.gt(0);
  at::Tensor successful = growthTracker.add(1);
  at::Tensor grow = at::logical_and(at::logical_not(found), successful.eq(interval));
  at::Tensor grown = scale.mul(growth);
  grown = at::where(at::isfinite(grown), grown, scale);
  at::Tensor newScale = at::where(found, scale.mul(backoff), at::where(grow, grown, scale));
  at::Tensor newTracker = at::where(at::logical_or(found, grow), at::zeros_like(growthTracker), successful);
  scale.copy_(newScale);
  growthTracker.copy_(newTracker);
  return scale;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", nonFiniteCheckAndUnscale);
  m.impl("_amp_update_scale_", updateScale);
}

}  // namespace tpu::aten
