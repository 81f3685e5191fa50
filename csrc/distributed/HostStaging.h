// Moving collective buffers between tpu and host memory for the host transport.
//
// A tpu tensor that covers its storage is downloaded straight into a reused host buffer (one
// device-to-host copy, no fresh pages to fault in) and its result lent back to its storage: on the
// CPU plugin the storage's new buffer aliases the host buffer (no copy), which returns to the pool
// once the plugin releases it. Other views go through one device-side copy first.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <vector>

namespace tpu::distributed {

class HostStaging {
 public:
  // A dense CPU tensor holding t's values (t itself, made contiguous, when it is already on the CPU).
  at::Tensor toHost(const at::Tensor& t);
  // An uninitialised dense CPU tensor shaped like t, for outputs the transport fills (t itself
  // when t is a dense CPU tensor).
  at::Tensor hostLike(const at::Tensor& t);
  // Many tensors of one dtype as one flat CPU buffer: concatenated on the device first, so the
  // host sees a single download.
  at::Tensor flattenToHost(const std::vector<at::Tensor>& tensors);

  // Writes a host result back into t (a no-op when host is t). `host` must be a staging buffer
  // from this class: it may be lent to t's storage (Executor::lendHost) and must not be written again.
  void writeBack(const at::Tensor& t, const at::Tensor& host);
  // The same, tensor by tensor, for a collective's list of tensors.
  std::vector<at::Tensor> toHost(const std::vector<at::Tensor>& tensors);
  std::vector<at::Tensor> hostLike(const std::vector<at::Tensor>& tensors);
  void writeBack(const std::vector<at::Tensor>& tensors, const std::vector<at::Tensor>& host);
  // Writes consecutive pieces of `flat` back into `tensors`.
  void unflattenInto(const std::vector<at::Tensor>& tensors, const at::Tensor& flat);

  // Host bytes kept for reuse.
  size_t pooledBytes();

 private:
  at::Tensor buffer(at::IntArrayRef sizes, at::ScalarType dtype);

  struct Entry {
    c10::Storage host;
    bool idle() const;
  };
  std::mutex mutex_;
  std::vector<Entry> pool_;  // reusable when nothing but the pool holds them
  // Reused once nothing but the pool holds them (every transfer into or out of them has completed
  // before a collective returns): large messages do not fault in fresh pages each time.
  static constexpr size_t kMaxPooled = 8;
  static constexpr size_t kMaxPooledBytes = size_t(1) << 30;
};

bool sameDtype(const std::vector<at::Tensor>& tensors);

}  // namespace tpu::distributed
