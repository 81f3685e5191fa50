// Which tensors may share a TensorImpl with a tpu tensor (`param.data = t`,
// Module._apply's in-place conversion).
//
// TensorImpl::has_compatible_shallow_copy_type knows only PyTorch's built-in
// dense backends (CPU, CUDA, MPS, ...), so cpu <-> tpu is "incompatible" and
// `model.to("tpu")` would replace every Parameter by a new one: tied weights
// come apart and an optimizer built before the move keeps training the CPU
// tensors. Our tpu tensors are plain strided TensorImpls (no subclass), so a
// shallow copy between cpu and tpu is as safe as between cpu and cuda.
// PyTorch dispatches `_has_compatible_shallow_copy_type` so that a
// PrivateUse1 backend can say so: any call with a tpu tensor lands here.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tpu::aten {
namespace {

// Dense strided tensors of a backend that keeps a plain TensorImpl.
bool isDense(c10::DispatchKeySet ks) {
  constexpr auto kBackends = c10::DispatchKeySet(
      {c10::BackendComponent::CPUBit, c10::BackendComponent::CUDABit, c10::BackendComponent::MPSBit,
       c10::BackendComponent::HIPBit, c10::BackendComponent::XPUBit, c10::BackendComponent::HPUBit,
       c10::BackendComponent::MTIABit, c10::BackendComponent::PrivateUse1Bit});
  return ks.has(c10::DispatchKey::Dense) && ks.has_any(kBackends);
}

bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (isDense(self.key_set()) && isDense(from.key_set()));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", hasCompatibleShallowCopyType);
}

}  // namespace tpu::aten
