#pragma once
// Streams and events for tpu, without torch. PJRT buffers are immutable and PJRT runs a
// program after the producers of its inputs, so streams need not order memory accesses:
// a stream is an identity (per device, thread-local current one, as in CUDA) that
// remembers the work launched while it was current. An event recorded on a stream is a
// Marker: the completion of that work, of the stream's previous marker (work on one
// stream is ordered) and of the markers the stream was told to wait for.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "csrc/pjrt/Buffer.h"

namespace tpu::runtime {

class Marker {
 public:
  Marker(std::vector<pjrt::Event> events, std::vector<std::shared_ptr<Marker>> deps);
  // True once all the marked work has finished (never blocks).
  bool query();
  // Blocks until the marked work has finished; rethrows a device error.
  void wait();
  // steady_clock time (ns) at which the marked work was complete: the latest completion
  // among its programs (stamped by PJRT_Event_OnReady callbacks where the plugin has
  // them, else when first seen complete), never before the marker was recorded.
  int64_t completedNs();

 private:
  struct Stamp {  // shared with the OnReady callbacks, which may outlive the marker
    std::atomic<int> pending{0};
    std::atomic<int64_t> lastReadyNs{0};
  };
  void finishLocked(int64_t depsNs);
  std::mutex mutex_;
  std::vector<pjrt::Event> events_;
  std::vector<std::shared_ptr<Marker>> deps_;
  std::shared_ptr<Stamp> stamp_;
  bool hooked_ = false;  // every event has an OnReady callback counting `pending` down
  int64_t recordedNs_;
  std::atomic<bool> done_{false};
  int64_t doneNs_ = 0;
};

class Streams {
 public:
  static Streams& get();
  static constexpr int64_t kDefault = 0;
  static constexpr int64_t kPoolSize = 32;  // as CUDA's per-device pool: ids 1..32, round robin

  int64_t current(int device) const;  // this thread's current stream on `device`
  int64_t exchange(int device, int64_t stream);
  int64_t fromPool(int device);
  // A program launched on `device` produced `out`: work of the thread's current stream.
  void noteLaunch(int device, const std::shared_ptr<pjrt::Buffer>& out);
  // A marker for everything launched on (device, stream) so far; it becomes the stream's last.
  std::shared_ptr<Marker> record(int device, int64_t stream);
  // Markers recorded on (device, stream) from now on also wait for `m` (Event.wait / wait_stream).
  void block(int device, int64_t stream, std::shared_ptr<Marker> m);
  // Every launched program has finished (Executor::synchronize): forget the launches.
  void clearFinished();

 private:
  struct State {
    std::vector<std::weak_ptr<pjrt::Buffer>> launched;  // since the last marker
    size_t prunedSize = 0;
    std::shared_ptr<Marker> last;
    std::vector<std::shared_ptr<Marker>> waits;  // also asynchronous host transfers
    size_t prunedWaits = 0;
  };
  State& stateLocked(int device, int64_t stream);
  std::mutex mutex_;
  std::vector<std::vector<State>> states_;  // [device][stream id]
  std::vector<int64_t> nextPool_;
};

}  // namespace tpu::runtime
