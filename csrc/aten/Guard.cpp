#include "Guard.h"

#include "csrc/runtime/Executor.h"
#include "csrc/runtime/Runtime.h"

#include <pthread.h>

#include <atomic>
#include <cstring>

namespace tpu::aten {
namespace {
thread_local int tCurrentDevice = 0;
std::atomic<int> gAutogradThreads{0};

void noteAutogradThread() {
  thread_local bool seen = false;
  if (seen) return;
  seen = true;
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  if (std::strncmp(name, "pt_autograd", 11) == 0) ++gAutogradThreads;
}
}  // namespace

int startedAutogradThreads() { return gAutogradThreads.load(); }

int currentDevice() { return tCurrentDevice; }

void setCurrentDevice(int device) {
  TORCH_CHECK(device >= 0 && device < deviceCount(), "tpu: invalid device index ", device, " (",
              deviceCount(), " devices)");
  tCurrentDevice = device;
}

int deviceCount() noexcept {
  if (!runtime::Runtime::available()) return 0;
  return static_cast<int>(runtime::Runtime::get().deviceCount());
}

c10::Device GuardImpl::exchangeDevice(c10::Device d) const {
  c10::Device old = getDevice();
  if (d.index() != old.index()) setDevice(d);
  return old;
}

c10::Device GuardImpl::getDevice() const {
  return c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(tCurrentDevice));
}

void GuardImpl::setDevice(c10::Device d) const {
  noteAutogradThread();
  if (d.index() >= 0) setCurrentDevice(d.index());
}

void GuardImpl::uncheckedSetDevice(c10::Device d) const noexcept {
  if (d.index() >= 0) tCurrentDevice = d.index();
}

c10::DeviceIndex GuardImpl::deviceCount() const noexcept {
  return static_cast<c10::DeviceIndex>(tpu::aten::deviceCount());
}

void GuardImpl::synchronizeDevice(const c10::DeviceIndex) const { runtime::Executor::get().synchronize(); }

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

}  // namespace tpu::aten
