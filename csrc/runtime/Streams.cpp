#include "Streams.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace tpu::runtime {
namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Current stream per device of this thread (CUDA's are thread-local too); absent = default.
thread_local std::vector<int64_t> tCurrent;

}  // namespace

Marker::Marker(std::vector<pjrt::Event> events, std::vector<std::shared_ptr<Marker>> deps)
    : events_(std::move(events)), deps_(std::move(deps)), stamp_(std::make_shared<Stamp>()), recordedNs_(nowNs()) {
  // Stamp each program's completion as it happens, so elapsed times measure the device's
  // work rather than when the host happened to look.
  stamp_->pending = static_cast<int>(events_.size());
  hooked_ = true;
  for (pjrt::Event& e : events_) {
    std::shared_ptr<Stamp> stamp = stamp_;
    bool ok = e.onReady([stamp](bool) {
      int64_t t = nowNs();
      int64_t seen = stamp->lastReadyNs.load();
      while (seen < t && !stamp->lastReadyNs.compare_exchange_weak(seen, t)) {
      }
      --stamp->pending;
    });
    if (!ok) {  // the plugin has no PJRT_Event_OnReady: stamp when first seen complete
      hooked_ = false;
      break;
    }
  }
}

void Marker::finishLocked(int64_t depsNs) {
  int64_t own = hooked_ && !events_.empty() ? stamp_->lastReadyNs.load() : nowNs();
  doneNs_ = std::max({recordedNs_, own, depsNs});
  events_.clear();
  deps_.clear();  // completed: the chain of earlier markers can go
  done_ = true;
}

bool Marker::query() {
  if (done_) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return true;
  int64_t depsNs = 0;
  for (const auto& d : deps_) {
    if (!d->query()) return false;
    depsNs = std::max(depsNs, d->completedNs());
  }
  if (hooked_) {
    if (stamp_->pending.load() > 0) return false;
  } else {
    for (const pjrt::Event& e : events_)
      if (!e.ready()) return false;
  }
  finishLocked(depsNs);
  return true;
}

void Marker::wait() {
  if (done_) return;
  std::vector<std::shared_ptr<Marker>> deps;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    deps = deps_;
  }
  for (const auto& d : deps) d->wait();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    for (pjrt::Event& e : events_) e.await();  // throws the device's error, if any
  }
  // The OnReady callbacks run on the plugin's thread right after the events fire.
  for (int spin = 0; !query(); ++spin) {
    if (spin > 100000) {  // ~seconds: never hang on a callback that does not come
      std::lock_guard<std::mutex> lock(mutex_);
      if (!done_) finishLocked(0);
      return;
    }
    std::this_thread::yield();
  }
}

int64_t Marker::completedNs() {
  if (!query()) wait();
  return doneNs_;
}

Streams& Streams::get() {
  static Streams* streams = new Streams();  // outlives static destruction order
  return *streams;
}

int64_t Streams::current(int device) const {
  return static_cast<size_t>(device) < tCurrent.size() ? tCurrent[device] : kDefault;
}

int64_t Streams::exchange(int device, int64_t stream) {
  if (tCurrent.size() <= static_cast<size_t>(device)) tCurrent.resize(device + 1, kDefault);
  return std::exchange(tCurrent[device], stream);
}

int64_t Streams::fromPool(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (nextPool_.size() <= static_cast<size_t>(device)) nextPool_.resize(device + 1, 0);
  nextPool_[device] = nextPool_[device] % kPoolSize + 1;
  return nextPool_[device];
}

Streams::State& Streams::stateLocked(int device, int64_t stream) {
  if (states_.size() <= static_cast<size_t>(device)) states_.resize(device + 1);
  auto& perDevice = states_[device];
  if (perDevice.size() <= static_cast<size_t>(stream)) perDevice.resize(stream + 1);
  return perDevice[stream];
}

void Streams::noteLaunch(int device, const std::shared_ptr<pjrt::Buffer>& out) {
  int64_t stream = current(device);
  std::lock_guard<std::mutex> lock(mutex_);
  State& s = stateLocked(device, stream);
  // Dead buffers are dropped when the list doubles: amortised O(1) per launch.
  if (s.launched.size() >= std::max<size_t>(256, 2 * s.prunedSize)) {
    std::erase_if(s.launched, [](const auto& w) { return w.expired(); });
    s.prunedSize = s.launched.size();
  }
  s.launched.push_back(out);
}

std::shared_ptr<Marker> Streams::record(int device, int64_t stream) {
  std::vector<std::weak_ptr<pjrt::Buffer>> launched;
  std::vector<std::shared_ptr<Marker>> deps;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    State& s = stateLocked(device, stream);
    launched.swap(s.launched);
    s.prunedSize = 0;
    deps.swap(s.waits);
    s.prunedWaits = 0;
    if (s.last) deps.push_back(s.last);
  }
  // A finished predecessor drops its own chain here, so chains stay as long as the work in flight.
  for (const auto& d : deps) d->query();
  std::vector<pjrt::Event> events;
  for (const auto& w : launched)
    if (auto b = w.lock()) events.push_back(b->readyEvent());
  auto marker = std::make_shared<Marker>(std::move(events), std::move(deps));
  std::lock_guard<std::mutex> lock(mutex_);
  stateLocked(device, stream).last = marker;
  return marker;
}

void Streams::block(int device, int64_t stream, std::shared_ptr<Marker> m) {
  std::lock_guard<std::mutex> lock(mutex_);
  State& s = stateLocked(device, stream);
  // Finished waits are dropped when the list doubles (many non_blocking copies, no event recorded).
  if (s.waits.size() >= std::max<size_t>(64, 2 * s.prunedWaits)) {
    std::erase_if(s.waits, [](const auto& w) { return w->query(); });
    s.prunedWaits = s.waits.size();
  }
  s.waits.push_back(std::move(m));
}

void Streams::clearFinished() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& perDevice : states_)
    for (State& s : perDevice) {
      s.launched.clear();
      s.prunedSize = 0;
    }
}

}  // namespace tpu::runtime
