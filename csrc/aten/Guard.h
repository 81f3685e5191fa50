#pragma once
// Device selection for `tpu`: a thread-local current device and the c10
// DeviceGuard implementation, including streams and events (Streams.cpp, over
// runtime/Streams.h: PJRT orders the programs; a stream is an identity whose
// launched work events can wait for).
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

  // Streams and events (Streams.cpp).
  c10::Stream getDefaultStream(c10::Device d) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority = false) const override;
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override;
  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void synchronizeEvent(void* event) const override;
  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override;
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device_index) const override;
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

// Free bytes and total bytes of `device`: PJRT_Device_MemoryStats where the plugin has
// it, else host memory (the XLA CPU plugin's devices live in it) less what tpu holds there.
std::pair<int64_t, int64_t> memGetInfo(int device);

}  // namespace tpu::aten
