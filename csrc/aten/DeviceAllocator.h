#pragma once
// The tpu allocator. A DataPtr's context is the runtime::DeviceStorage that
// holds the storage's device buffer; its data pointer is the start of an
// address range reserved for that storage alone (never dereferenced), so
// PyTorch's aliasing and overlap checks work as on any device.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Storage.h>

#include "csrc/runtime/DeviceStorage.h"

namespace tpu::aten {

class DeviceAllocator final : public c10::DeviceAllocator {
 public:
  // On the current device (the DeviceGuard's).
  c10::DataPtr allocate(size_t nbytes) override;
  // On `device`: the storage, its statistics and the DataPtr's device agree.
  c10::DataPtr allocateOn(size_t nbytes, int device);
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;

  static DeviceAllocator& get();
};

// The device storage behind a tpu storage and the byte offset of the storage's
// data pointer in it. A storage made by at::from_blob on a tpu address (PyTorch's
// serialization does this: `_write_file` / `_set_from_file` wrap a storage's
// pointer to copy it through the host) has no context of ours; it is resolved by
// the address range the pointer falls into, as real device memory would be.
struct StorageRef {
  runtime::DeviceStorage* storage = nullptr;
  size_t byteOffset = 0;
};
StorageRef resolveStorage(const c10::Storage& storage);
// The device storage whose address range holds `ptr`; null when none does.
StorageRef findDeviceStorage(const void* ptr);

// The device storage behind a tpu storage that starts where it does (offset 0).
runtime::DeviceStorage* deviceStorage(const c10::Storage& storage);

// Gives `storage` a new size, keeping the bytes both sizes share (a device-side
// pad or slice); new bytes read as zeros.
void resizeStorageBytes(const c10::Storage& storage, size_t nbytes);

}  // namespace tpu::aten
