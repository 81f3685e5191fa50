// When a composite op may record its own autograd node (a torch::autograd::Function at AutogradPrivateUse1,
// LinearKernels.cpp, AttentionAutograd.cpp) instead of the one its decomposition gives: only for plain tpu
// tensors, outside functorch transforms. Tensor subclasses and tracing (the Python key: DTensor, FakeTensor in
// torch.compile; the Functionalize key), nested tensors and forward-mode AD keep ATen's composite.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace tpu::aten {

inline bool plainForOwnNode(const at::Tensor& t) {
  c10::DispatchKeySet keys = t.key_set();
  return !keys.has(c10::DispatchKey::Python) && !keys.has(c10::DispatchKey::Functionalize) && !t.is_nested() &&
         !t._fw_grad(/*level=*/0).defined();
}

inline bool functorchActive() {
  return c10::impl::tls_local_dispatch_key_set().included_.has(c10::DispatchKey::FuncTorchDynamicLayerFrontMode);
}

}  // namespace tpu::aten
