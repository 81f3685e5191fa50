#include "DeviceAllocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <mutex>

#include "Guard.h"
#include "csrc/runtime/AddressRanges.h"
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

// Live storages by address: start -> (span, storage). Only consulted for pointers
// whose DataPtr is not ours (from_blob), so a lookup is off the hot path; an
// allocation pays one map insert.
runtime::AddressRanges<runtime::DeviceStorage*> gRanges;

void deleteStorage(void* ctx) {
  auto* storage = static_cast<runtime::DeviceStorage*>(ctx);
  gRanges.erase(storage->address);
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
  storage->address = gNextAddress.fetch_add(span);
  void* address = reinterpret_cast<void*>(storage->address);
  gRanges.insert(storage->address, span, storage);
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

StorageRef findDeviceStorage(const void* ptr) {
  auto p = reinterpret_cast<uintptr_t>(ptr);
  auto range = gRanges.find(p);
  if (!range) return {};
  return {range->value, static_cast<size_t>(p - range->start)};
}

StorageRef resolveStorage(const c10::Storage& storage) {
  const c10::DataPtr& ptr = storage.data_ptr();
  if (ptr.get_deleter() == &deleteStorage) return {static_cast<runtime::DeviceStorage*>(ptr.get_context()), 0};
  StorageRef ref = findDeviceStorage(ptr.get());
  TORCH_CHECK(ref.storage, "tpu: tensor storage was not allocated by the tpu allocator and its address is in no "
              "live tpu storage");
  TORCH_CHECK(ref.byteOffset + storage.nbytes() <= ref.storage->nbytes, "tpu: a storage wrapping a tpu address "
              "(from_blob) runs ", ref.byteOffset + storage.nbytes() - ref.storage->nbytes,
              " bytes past the end of the tpu storage it points into");
  return ref;
}

runtime::DeviceStorage* deviceStorage(const c10::Storage& storage) {
  StorageRef ref = resolveStorage(storage);
  TORCH_CHECK(ref.byteOffset == 0, "tpu: expected a storage that starts at a tpu allocation, got one ",
              ref.byteOffset, " bytes into it");
  return ref.storage;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &DeviceAllocator::get());

}  // namespace tpu::aten
