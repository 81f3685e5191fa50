#pragma once
// Owning wrapper of a device-resident PJRT_Buffer (immutable once defined).
#include <cstdint>
#include <memory>
#include <vector>

#include "Event.h"
#include "pjrt_c_api.h"

namespace tpu::pjrt {

class Buffer {
 public:
  Buffer(const PJRT_Api* api, PJRT_Buffer* buf) : api_(api), buf_(buf) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  PJRT_Buffer* raw() const { return buf_; }
  // A new Buffer owning this one's PJRT handle; this one is left empty (its destructor does nothing, no
  // other call is valid). Lets a handle outlive every reference to this object (its weak_ptrs expire).
  std::unique_ptr<Buffer> takeHandle();
  std::vector<int64_t> dims() const;
  size_t onDeviceBytes() const;
  // Starts copying the whole buffer into `dst` (row-major); await the event.
  Event toHost(void* dst, size_t bytes) const;
  // Blocks until the buffer's value is defined (its producing program ran).
  void awaitReady() const;
  // An event that fires once the value is defined.
  Event readyEvent() const;
  PJRT_Device* device() const;
  // A copy of this buffer on `dst` (another device of the same client), made by the plugin
  // without a host round trip where it can; ordered after this buffer's producer.
  std::unique_ptr<Buffer> copyToDevice(PJRT_Device* dst) const;

 private:
  const PJRT_Api* api_;
  PJRT_Buffer* buf_;
};

}  // namespace tpu::pjrt
