#include "DeviceAllocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <mutex>

#include "Guard.h"
#include "csrc/runtime/Executor.h"

namespace tpu::aten {
namespace {

// Addresses handed out start at 2^56: non-canonical on x86-64 and arm64, so
// an accidental dereference faults instead of corrupting host memory.
std::atomic<uint64_t> gNextAddress{uint64_t{1} << 56};
constexpr uint64_t kAlignment = 256;

constexpr int kMaxDevices = 64;
std::mutex gStatsMutex;
c10::CachingDeviceAllocator::DeviceStats gStats[kMaxDevices];

void updateStats(int device, int64_t bytes, int64_t count) {
  if (device < 0 || device >= kMaxDevices) return;
  std::lock_guard<std::mutex> lock(gStatsMutex);
  auto& s = gStats[device];
  auto apply = [](c10::CachingAllocator::Stat& stat, int64_t delta) {
    if (delta >= 0) stat.increase(static_cast<size_t>(delta));
    else stat.decrease(static_cast<size_t>(-delta));
  };
  for (auto* arr : {&s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.requested_bytes}) apply((*arr)[0], bytes);
  for (auto* arr : {&s.allocation, &s.segment, &s.active}) apply((*arr)[0], count);
}

void deleteStorage(void* ctx) {
  auto* storage = static_cast<runtime::DeviceStorage*>(ctx);
  if (storage->inGraph) runtime::Executor::get().forget(storage);  // dead: never materialised
  updateStats(storage->device, -static_cast<int64_t>(storage->nbytes), -1);
  delete storage;
}

}  // namespace

c10::DataPtr DeviceAllocator::allocate(size_t nbytes) { return allocateOn(nbytes, currentDevice()); }

c10::DataPtr DeviceAllocator::allocateOn(size_t nbytes, int device) {
  auto* storage = new runtime::DeviceStorage();
  storage->nbytes = nbytes;
  storage->device = device;
  uint64_t span = (std::max<uint64_t>(nbytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  void* address = reinterpret_cast<void*>(gNextAddress.fetch_add(span));
  updateStats(device, static_cast<int64_t>(nbytes), 1);
  return {address, storage, &deleteStorage, c10::Device(c10::DeviceType::PrivateUse1, device)};
}

void DeviceAllocator::copy_data(void*, const void*, std::size_t) const {
  TORCH_CHECK(false, "tpu: device memory cannot be copied through raw pointers; use Tensor.copy_");
}

c10::CachingDeviceAllocator::DeviceStats DeviceAllocator::getDeviceStats(c10::DeviceIndex device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "tpu: invalid device index ", int(device));
  std::lock_guard<std::mutex> lock(gStatsMutex);
  return gStats[device];
}

void DeviceAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(gStatsMutex);
  auto& s = gStats[device];
  for (auto* arr : {&s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.requested_bytes, &s.allocation,
                    &s.segment, &s.active}) {
    (*arr)[0].reset_accumulated();
  }
}

void DeviceAllocator::resetPeakStats(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(gStatsMutex);
  auto& s = gStats[device];
  for (auto* arr : {&s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.requested_bytes, &s.allocation,
                    &s.segment, &s.active}) {
    (*arr)[0].reset_peak();
  }
}

DeviceAllocator& DeviceAllocator::get() {
  static DeviceAllocator allocator;
  return allocator;
}

runtime::DeviceStorage* deviceStorage(const c10::Storage& storage) {
  auto* ctx = static_cast<runtime::DeviceStorage*>(storage.data_ptr().get_context());
  TORCH_CHECK(ctx && storage.data_ptr().get_deleter() == &deleteStorage,
              "tpu: tensor storage was not allocated by the tpu allocator");
  return ctx;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &DeviceAllocator::get());

}  // namespace tpu::aten
