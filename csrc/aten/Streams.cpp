// Streams and events of the tpu DeviceGuard (torch.Stream / torch.Event / torch.tpu.Stream
// go through these), Tensor.record_stream, and torch.tpu.mem_get_info.
#include <ATen/ATen.h>
#include <torch/library.h>
#include <unistd.h>

#include <atomic>

#include "DeviceAllocator.h"
#include "Guard.h"
#include "csrc/pjrt/Error.h"
#include "csrc/runtime/Executor.h"
#include "csrc/runtime/Runtime.h"
#include "csrc/runtime/Streams.h"

namespace tpu::aten {
namespace {

using runtime::Streams;

struct TpuEvent {
  std::shared_ptr<runtime::Marker> marker;
  int device = -1;
};

int indexOf(c10::Device d) {
  int index = d.has_index() ? d.index() : currentDevice();
  // getStream runs for every autograd node: skip the runtime's lock once the count is known.
  static std::atomic<int> known{0};
  if (index >= 0 && index < known.load(std::memory_order_relaxed)) return index;
  known = deviceCount();
  TORCH_CHECK(index >= 0 && index < deviceCount(), "tpu: invalid device index ", index, " (", deviceCount(),
              " devices)");
  return index;
}

c10::Stream makeStream(int device, int64_t id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)),
                     static_cast<c10::StreamId>(id));
}

int64_t checkedId(const c10::Stream& s) {
  TORCH_CHECK(s.id() >= 0 && s.id() <= Streams::kPoolSize, "tpu: invalid stream id ", s.id(),
              " (tpu streams are 0, the default, and 1..", Streams::kPoolSize, " from the pool)");
  return s.id();
}

// Fused mode: the pending graph is work launched on the current stream; make it real
// before an event or a stream query looks at that stream's launches.
void flushPending() {
  auto& ex = runtime::Executor::get();
  if (ex.fused()) ex.flush("event record");
}

// Device errors (a failed program) surface as RuntimeError, naming what waited.
template <class F>
auto rethrowing(const char* what, F&& f) {
  try {
    return f();
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, "tpu: ", what, " failed: ", e.what());
  }
}

TpuEvent* recorded(void* event) { return static_cast<TpuEvent*>(event); }

}  // namespace

c10::Stream GuardImpl::getStream(c10::Device d) const {
  int device = indexOf(d);
  return makeStream(device, Streams::get().current(device));
}

c10::Stream GuardImpl::getDefaultStream(c10::Device d) const { return makeStream(indexOf(d), Streams::kDefault); }

c10::Stream GuardImpl::getStreamFromGlobalPool(c10::Device d, bool) const {
  int device = indexOf(d);
  return makeStream(device, Streams::get().fromPool(device));
}

c10::Stream GuardImpl::getNewStream(c10::Device d, int) const {
  // As CUDA: new streams come from the device's pool (priorities are accepted and ignored:
  // PJRT has no stream priorities).
  return getStreamFromGlobalPool(d, false);
}

c10::Stream GuardImpl::exchangeStream(c10::Stream s) const {
  int device = indexOf(s.device());
  int64_t id = checkedId(s);
  int64_t old = Streams::get().current(device);
  if (old != id) flushPending();  // pending fused work belongs to the stream it was launched on
  Streams::get().exchange(device, id);
  return makeStream(device, old);
}

bool GuardImpl::queryStream(const c10::Stream& s) const {
  flushPending();
  return Streams::get().record(indexOf(s.device()), checkedId(s))->query();
}

void GuardImpl::synchronizeStream(const c10::Stream& s) const {
  flushPending();
  auto marker = Streams::get().record(indexOf(s.device()), checkedId(s));
  rethrowing("Stream.synchronize", [&] { marker->wait(); });
}

void GuardImpl::record(void** event, const c10::Stream& s, const c10::DeviceIndex deviceIndex,
                       const c10::EventFlag) const {
  int device = indexOf(s.device());
  TORCH_CHECK(deviceIndex == -1 || deviceIndex == device, "Event device index ", int(deviceIndex),
              " does not match recording stream's device index ", device, ".");
  flushPending();
  auto marker = Streams::get().record(device, checkedId(s));
  if (!*event) *event = new TpuEvent();
  recorded(*event)->marker = std::move(marker);
  recorded(*event)->device = device;
}

void GuardImpl::block(void* event, const c10::Stream& s) const {
  if (!event || !recorded(event)->marker) return;
  Streams::get().block(indexOf(s.device()), checkedId(s), recorded(event)->marker);
}

bool GuardImpl::queryEvent(void* event) const {
  return !event || !recorded(event)->marker || recorded(event)->marker->query();
}

void GuardImpl::synchronizeEvent(void* event) const {
  if (!event || !recorded(event)->marker) return;
  rethrowing("Event.synchronize", [&] { recorded(event)->marker->wait(); });
}

void GuardImpl::destroyEvent(void* event, const c10::DeviceIndex) const noexcept { delete recorded(event); }

double GuardImpl::elapsedTime(void* start, void* end, const c10::DeviceIndex) const {
  TORCH_CHECK(start && end && recorded(start)->marker && recorded(end)->marker,
              "Both events must be recorded before calculating elapsed time.");
  TORCH_CHECK(recorded(start)->device == recorded(end)->device,
              "tpu: elapsed_time needs two events of the same device, got tpu:", recorded(start)->device,
              " and tpu:", recorded(end)->device);
  int64_t a = rethrowing("Event.elapsed_time", [&] { return recorded(start)->marker->completedNs(); });
  int64_t b = rethrowing("Event.elapsed_time", [&] { return recorded(end)->marker->completedNs(); });
  return static_cast<double>(b - a) / 1e6;  // milliseconds, as CUDA
}

std::pair<int64_t, int64_t> memGetInfo(int device) {
  TORCH_CHECK(device >= 0 && device < deviceCount(), "tpu: invalid device index ", device, " (", deviceCount(),
              " devices)");
  pjrt::Client::MemoryStats stats;
  if (runtime::Runtime::get().client().memoryStats(device, stats) && stats.bytesLimit > 0)
    return {std::max<int64_t>(stats.bytesLimit - stats.bytesInUse, 0), stats.bytesLimit};
  int64_t page = sysconf(_SC_PAGESIZE);
  int64_t total = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * page;
  int64_t available = static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * page;
  int64_t used = static_cast<int64_t>(
      DeviceAllocator::get().getDeviceStats(static_cast<c10::DeviceIndex>(device)).allocated_bytes[0].current);
  return {std::max<int64_t>(std::min(available, total - used), 0), total};
}

namespace {

void recordStream(at::Tensor& self, c10::Stream s) {
  // PJRT keeps a buffer alive until the programs that read it have finished, so memory is
  // never handed to other work early: nothing to remember, but the stream must be a tpu one.
  TORCH_CHECK(s.device_type() == c10::DeviceType::PrivateUse1, "record_stream: expected a tpu stream, got one of ",
              s.device());
  checkedId(s);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", recordStream); }

}  // namespace tpu::aten
