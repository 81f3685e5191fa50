// PrivateUse1 hooks: what ATen asks of the tpu backend outside of op dispatch.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>

#include "DeviceAllocator.h"
#include "Generator.h"
#include "Guard.h"
#include "HostAllocator.h"

namespace tpu::aten {
namespace {

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return deviceCount() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(tpu::aten::deviceCount()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { tpu::aten::setCurrentDevice(d); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(currentDevice()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = getCurrentDevice();
    tpu::aten::setCurrentDevice(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return defaultGenerator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return at::make_generator<TpuGenerator>(device < 0 ? currentDevice() : device);
  }
  at::Device getDeviceFromPtr(void* ptr) const override {
    StorageRef ref = findDeviceStorage(ptr);
    int device = ref.storage ? ref.storage->device : currentDevice();
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
  }
  bool isPinnedPtr(const void* ptr) const override { return isPinnedHostPtr(ptr); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &HostAllocator::get(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

void Hooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  resizeStorageBytes(storage, newsize);
}

// Registered at load time, like the allocator and the guard.
const bool kRegistered = [] {
  at::RegisterPrivateUse1HooksInterface(new Hooks());
  return true;
}();

}  // namespace
}  // namespace tpu::aten
