#include "csrc/distributed/HostStaging.h"

namespace tpu::distributed {

at::Tensor toHost(const at::Tensor& t) {
  if (t.device().is_cpu()) return t.is_contiguous() ? t : t.contiguous();
  return t.to(at::kCPU, /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::Contiguous);
}

at::Tensor hostLike(const at::Tensor& t) {
  if (t.device().is_cpu() && t.is_contiguous()) return t;
  return at::empty(t.sizes(), t.options().device(at::kCPU));
}

void writeBack(const at::Tensor& t, const at::Tensor& host) {
  if (t.is_same(host)) return;
  t.copy_(host);
}

bool sameDtype(const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors)
    if (t.scalar_type() != tensors[0].scalar_type()) return false;
  return true;
}

at::Tensor flattenToHost(const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(!tensors.empty() && sameDtype(tensors), "tpu_dist: coalesced tensors must share a dtype");
  if (tensors.size() == 1) return toHost(tensors[0].reshape({-1}));
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return toHost(at::cat(flat));
}

void unflattenInto(const std::vector<at::Tensor>& tensors, const at::Tensor& flat) {
  int64_t offset = 0;
  for (const auto& t : tensors) {
    const int64_t n = t.numel();
    t.copy_(flat.narrow(0, offset, n).view(t.sizes()));
    offset += n;
  }
}

}  // namespace tpu::distributed
