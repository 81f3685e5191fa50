#pragma once
// Device selection for `tpu`: a thread-local current device and the c10
// DeviceGuard implementation. There are no streams: PJRT orders the programs.
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace tpu::aten {

int currentDevice();
void setCurrentDevice(int device);
// Number of devices of the started runtime; 0 when no plugin can start.
int deviceCount() noexcept;
// Autograd device threads that have finished starting (they select their
// device through the guard right after their start-up GIL hand-off).
int startedAutogradThreads();

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device d) const override;
  void uncheckedSetDevice(c10::Device d) const noexcept override;
  c10::Stream getStream(c10::Device d) const override;
  c10::Stream exchangeStream(c10::Stream s) const override;
  c10::DeviceIndex deviceCount() const noexcept override;
  void synchronizeDevice(const c10::DeviceIndex device_index) const override;
};

}  // namespace tpu::aten
