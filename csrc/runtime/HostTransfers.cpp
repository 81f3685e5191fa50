// Executor: transfers between host memory and device storages (uploads, downloads, lent host memory).
#include <algorithm>
#include <cstring>

#include "DeviceTrace.h"
#include "ElementCodec.h"
#include "Executor.h"
#include "Runtime.h"
#include "Streams.h"
#include "csrc/pjrt/Error.h"

namespace tpu::runtime {

using hlo::DType;

namespace {

std::shared_ptr<Marker> transferMarker(pjrt::Event done) {
  std::vector<pjrt::Event> events;
  events.push_back(std::move(done));
  return std::make_shared<Marker>(std::move(events), std::vector<std::shared_ptr<Marker>>{});
}

}  // namespace

void Executor::addHostTransfer(HostTransfer t, int device) {
  // As a CUDA copy enqueued on the current stream: that stream's later events, Stream.synchronize()
  // and wait_stream() include the transfer (DCP saves a side stream's non_blocking downloads after
  // synchronizing that stream alone).
  Streams::get().block(device, Streams::get().current(device), t.done);
  std::lock_guard<std::mutex> lock(hostMutex_);
  std::erase_if(hostTransfers_, [](const HostTransfer& h) { return h.done->query(); });
  hostTransfers_.push_back(std::move(t));
  hostPending_ = hostTransfers_.size();
}

void Executor::awaitHostRange(const void* begin, size_t nbytes) {
  if (hostPending_.load(std::memory_order_relaxed) == 0) return;  // the common case: nothing in flight
  auto b = reinterpret_cast<uintptr_t>(begin), e = b + std::max<size_t>(nbytes, 1);
  std::vector<HostTransfer> overlapping;
  {
    std::lock_guard<std::mutex> lock(hostMutex_);
    for (auto it = hostTransfers_.begin(); it != hostTransfers_.end();) {
      if (it->begin < e && b < it->end) {
        overlapping.push_back(std::move(*it));
        it = hostTransfers_.erase(it);
      } else {
        ++it;
      }
    }
    hostPending_ = hostTransfers_.size();
  }
  for (HostTransfer& t : overlapping) t.done->wait();
}

Executor::HostTransferStats Executor::hostTransferStats() {
  std::lock_guard<std::mutex> lock(hostMutex_);
  std::erase_if(hostTransfers_, [](const HostTransfer& h) { return h.done->query(); });
  hostPending_ = hostTransfers_.size();
  HostTransferStats s = hostStats_;
  s.pending = static_cast<int64_t>(hostTransfers_.size());
  return s;
}

void Executor::download(const DeviceStorage& storage, void* dst) {
  awaitHostRange(dst, storage.nbytes);  // a pending upload may still read dst
  if (storage.inGraph) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (storage.inGraph) fusedGraph_.flush("host read");
  }
  checkFlags(/*atOp=*/false);  // an earlier op's out-of-range index raises here, before any value is read
  requireComputed(storage);
  if (storage.nbytes == 0) return;
  if (!storage.buffer) {
    std::memset(dst, 0, storage.nbytes);
    return;
  }
  size_t bufBytes = static_cast<size_t>(storage.elemCount()) * hlo::byteWidth(storage.elem);
  std::shared_ptr<pjrt::Buffer> keep = storage.buffer;
  int64_t t0 = trace::enabled() ? trace::nowNs() : 0;
  keep->toHost(dst, bufBytes).await();
  if (t0) trace::span(trace::Kind::Transfer, "device to host " + std::to_string(bufBytes) + " B", storage.device, t0, trace::nowNs());
  if (bufBytes < storage.nbytes) std::memset(static_cast<char*>(dst) + bufBytes, 0, storage.nbytes - bufBytes);
}

void Executor::downloadAsync(const DeviceStorage& storage, void* dst, std::shared_ptr<void> keepAlive) {
  awaitHostRange(dst, storage.nbytes);
  if (storage.inGraph) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (storage.inGraph) fusedGraph_.flush("host read");
  }
  checkFlags(/*atOp=*/false);
  requireComputed(storage);
  if (storage.nbytes == 0) return;
  if (!storage.buffer) {
    std::memset(dst, 0, storage.nbytes);
    return;
  }
  size_t bufBytes = static_cast<size_t>(storage.elemCount()) * hlo::byteWidth(storage.elem);
  HostTransfer t;
  t.buffer = storage.buffer;  // PJRT buffers are immutable: later writes to the storage swap in a new one
  t.done = transferMarker(t.buffer->toHost(dst, bufBytes));
  if (bufBytes < storage.nbytes) std::memset(static_cast<char*>(dst) + bufBytes, 0, storage.nbytes - bufBytes);
  t.keepAlive = std::move(keepAlive);
  t.begin = reinterpret_cast<uintptr_t>(dst);
  t.end = t.begin + storage.nbytes;
  addHostTransfer(std::move(t), storage.device);
  std::lock_guard<std::mutex> lock(hostMutex_);
  hostStats_.asyncDownloads += 1;
}

void Executor::uploadAsync(DeviceStorage& storage, const void* bytes, DType elem, std::shared_ptr<void> keepAlive) {
  awaitHostRange(bytes, storage.nbytes);  // a pending download may still write the source
  if (storage.inGraph) forget(&storage);
  int64_t n = static_cast<int64_t>(storage.nbytes / hlo::byteWidth(elem));
  pjrt::Client::AsyncUpload up =
      Runtime::get().client().bufferFromHostAsync(bytes, toElementType(elem), {n}, storage.device);
  storage.buffer = std::shared_ptr<pjrt::Buffer>(std::move(up.buffer));
  storage.lost.reset();
  storage.elem = elem;
  if (up.doneWithHost.valid()) {
    HostTransfer t;
    t.done = transferMarker(std::move(up.doneWithHost));
    t.keepAlive = std::move(keepAlive);
    t.buffer = storage.buffer;
    t.begin = reinterpret_cast<uintptr_t>(bytes);
    t.end = t.begin + storage.nbytes;
    addHostTransfer(std::move(t), storage.device);
  }
  std::lock_guard<std::mutex> lock(hostMutex_);
  hostStats_.asyncUploads += 1;
}

void Executor::copyToDevice(const DeviceStorage& src, DeviceStorage& dst) {
  if (src.nbytes != dst.nbytes)
    throw std::logic_error("copyToDevice: storages of different sizes");
  if (src.inGraph) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (src.inGraph) fusedGraph_.flush("cross-device copy");
  }
  if (dst.inGraph) forget(&dst);  // replaced whole
  requireComputed(src);
  std::shared_ptr<pjrt::Buffer> from = src.buffer;
  if (!from) {  // never written: reads as zeros on the other device too
    dst.buffer.reset();
    return;
  }
  auto& client = Runtime::get().client();
  std::shared_ptr<pjrt::Buffer> moved;
  try {
    moved = std::shared_ptr<pjrt::Buffer>(from->copyToDevice(client.devices().at(dst.device)));
  } catch (const pjrt::PjrtError&) {
    // A plugin without device-to-device copies: through the host.
    std::vector<unsigned char> host(static_cast<size_t>(src.elemCount()) * hlo::byteWidth(src.elem));
    from->toHost(host.data(), host.size()).await();
    moved = std::shared_ptr<pjrt::Buffer>(
        client.bufferFromHost(host.data(), toElementType(src.elem), {src.elemCount()}, dst.device));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  dst.buffer = std::move(moved);
  dst.lost.reset();
  dst.elem = src.elem;
  trackInFlightLocked(dst.buffer, dst.device);
}

void Executor::upload(DeviceStorage& storage, const void* bytes, DType elem) {
  awaitHostRange(bytes, storage.nbytes);  // a pending download may still write the source
  if (storage.inGraph) forget(&storage);  // replaced whole: pending writes to it are moot
  int64_t n = static_cast<int64_t>(storage.nbytes / hlo::byteWidth(elem));
  int64_t t0 = trace::enabled() ? trace::nowNs() : 0;
  storage.buffer = std::shared_ptr<pjrt::Buffer>(
      Runtime::get().client().bufferFromHost(bytes, toElementType(elem), {n}, storage.device));
  storage.lost.reset();
  if (t0) trace::span(trace::Kind::Transfer, "host to device " + std::to_string(storage.nbytes) + " B", storage.device, t0, trace::nowNs());
  storage.elem = elem;
}

void Executor::lendHost(DeviceStorage& storage, const void* bytes, DType elem, std::function<void()> released) {
  // Device memory elsewhere is not host memory: there it would be a copy that must finish anyway.
  // Lending also needs OnReady: the release is only known from a callback.
  static const bool hostMemory =
      Runtime::get().client().platformName() == "cpu" && Runtime::get().client().api()->PJRT_Event_OnReady;
  if (!hostMemory) {
    upload(storage, bytes, elem);
    released();
    return;
  }
  awaitHostRange(bytes, storage.nbytes);
  if (storage.inGraph) forget(&storage);
  int64_t n = static_cast<int64_t>(storage.nbytes / hlo::byteWidth(elem));
  pjrt::Client::AsyncUpload up =
      Runtime::get().client().bufferAliasingHost(bytes, toElementType(elem), {n}, storage.device);
  storage.buffer = std::shared_ptr<pjrt::Buffer>(std::move(up.buffer));
  storage.lost.reset();
  storage.elem = elem;
  storage.lent = storage.buffer;
  // Not a HostTransfer: synchronize() must not wait for a buffer that is still in use.
  up.doneWithHost.onReady([released = std::move(released)](bool) { released(); });
}

}  // namespace tpu::runtime
