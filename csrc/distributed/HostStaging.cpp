#include "csrc/distributed/HostStaging.h"

#include <c10/core/CPUAllocator.h>

#include "csrc/aten/DeviceAllocator.h"
#include "csrc/aten/OpRunner.h"
#include "csrc/runtime/Executor.h"

namespace tpu::distributed {
namespace {

bool isTpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

// Dense, starting at the storage's first byte and ending at its last: its bytes are the storage's.
bool coversStorage(const at::Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0 && !t.is_neg() && !t.is_conj() &&
         t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size();
}

}  // namespace

bool sameDtype(const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors)
    if (t.scalar_type() != tensors[0].scalar_type()) return false;
  return true;
}

bool HostStaging::Entry::idle() const { return host.use_count() == 1; }

at::Tensor HostStaging::buffer(at::IntArrayRef sizes, at::ScalarType dtype) {
  const size_t nbytes = static_cast<size_t>(c10::multiply_integers(sizes)) * c10::elementSize(dtype);
  auto options = at::TensorOptions().dtype(dtype).device(at::kCPU);
  if (nbytes == 0) return at::empty(sizes, options);
  c10::Storage storage;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& e : pool_)
      if (e.host.nbytes() == nbytes && e.idle()) {
        storage = e.host;
        break;
      }
    if (!storage) {
      storage = c10::Storage(c10::Storage::use_byte_size_t(), nbytes, c10::GetCPUAllocator(), /*resizable=*/false);
      size_t total = nbytes;
      for (auto& e : pool_) total += e.host.nbytes();
      // Drop idle buffers (oldest first) to stay under the bounds.
      for (auto it = pool_.begin(); it != pool_.end() && (pool_.size() >= kMaxPooled || total > kMaxPooledBytes);) {
        if (it->idle()) {
          total -= it->host.nbytes();
          it = pool_.erase(it);
        } else {
          ++it;
        }
      }
      if (pool_.size() < kMaxPooled && total <= kMaxPooledBytes) pool_.push_back({storage});
    }
  }
  return at::empty({0}, options).set_(storage, 0, sizes);
}

size_t HostStaging::pooledBytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (auto& e : pool_) total += e.host.nbytes();
  return total;
}

at::Tensor HostStaging::toHost(const at::Tensor& t) {
  if (!isTpu(t)) return t.is_contiguous() ? t : t.contiguous();
  at::Tensor dense = coversStorage(t) ? t : t.clone(at::MemoryFormat::Contiguous);
  at::Tensor host = buffer(dense.sizes(), dense.scalar_type());
  if (host.numel() > 0) runtime::Executor::get().download(*aten::deviceStorage(dense.storage()), host.data_ptr());
  return host;
}

at::Tensor HostStaging::hostLike(const at::Tensor& t) {
  if (!isTpu(t) && t.is_contiguous()) return t;
  return buffer(t.sizes(), t.scalar_type());
}

void HostStaging::writeBack(const at::Tensor& t, const at::Tensor& host) {
  if (t.is_same(host)) return;
  if (isTpu(t) && coversStorage(t) && host.is_contiguous() && host.scalar_type() == t.scalar_type() &&
      host.numel() == t.numel() && t.numel() > 0) {
    // Lent, not copied: the storage's buffer aliases the staging memory (on the CPU plugin), and
    // the release callback holds the memory, so the pool reuses it only once the plugin says that
    // buffer and every program reading it are gone. (Reusing it as soon as the storage let go of
    // the buffer gave wrong gradient norms in FSDP2 + bf16 training: tests/dist_fsdp_bf16_norms.py.)
    runtime::DeviceStorage& storage = *aten::deviceStorage(t.storage());
    runtime::Executor::get().lendHost(storage, host.data_ptr(), aten::toHlo(t.scalar_type()),
                                      [keep = host.storage()]() mutable { keep = {}; });
    return;
  }
  t.copy_(host);
}

std::vector<at::Tensor> HostStaging::toHost(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> host;
  host.reserve(tensors.size());
  for (const auto& t : tensors) host.push_back(toHost(t));
  return host;
}

std::vector<at::Tensor> HostStaging::hostLike(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> host;
  host.reserve(tensors.size());
  for (const auto& t : tensors) host.push_back(hostLike(t));
  return host;
}

void HostStaging::writeBack(const std::vector<at::Tensor>& tensors, const std::vector<at::Tensor>& host) {
  for (size_t i = 0; i < tensors.size(); ++i) writeBack(tensors[i], host[i]);
}

at::Tensor HostStaging::flattenToHost(const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(!tensors.empty() && sameDtype(tensors), "tpu_dist: coalesced tensors must share a dtype");
  if (tensors.size() == 1) return toHost(tensors[0]).reshape({-1});
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return toHost(at::cat(flat));
}

void HostStaging::unflattenInto(const std::vector<at::Tensor>& tensors, const at::Tensor& flat) {
  int64_t offset = 0;
  for (const auto& t : tensors) {
    const int64_t n = t.numel();
    writeBack(t, flat.narrow(0, offset, n).view(t.sizes()));  // pieces of one buffer: copied
    offset += n;
  }
}

}  // namespace tpu::distributed
