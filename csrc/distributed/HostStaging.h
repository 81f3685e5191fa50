// Moving collective buffers between tpu and host memory for the host transport: one download per
// tensor (or one per coalesced group), results written back with one upload each.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace tpu::distributed {

// A dense CPU tensor holding t's values (t itself, made contiguous, when it is already on the CPU).
at::Tensor toHost(const at::Tensor& t);

// An uninitialised dense CPU tensor shaped like t (for outputs the transport fills).
at::Tensor hostLike(const at::Tensor& t);

// Writes a host result back into t (a no-op when host is t).
void writeBack(const at::Tensor& t, const at::Tensor& host);

// Many tensors of one dtype as one flat CPU buffer: concatenated on the device first, so the
// host sees a single download.
at::Tensor flattenToHost(const std::vector<at::Tensor>& tensors);
// Writes consecutive pieces of `flat` back into `tensors`.
void unflattenInto(const std::vector<at::Tensor>& tensors, const at::Tensor& flat);

bool sameDtype(const std::vector<at::Tensor>& tensors);

}  // namespace tpu::distributed
