#pragma once
// Device buffers whose last reference goes away on a background thread. Destroying a PJRT
// buffer frees its memory, and on the CPU plugin that is glibc freeing large blocks (chunk
// consolidation, madvise): about a tenth of the calling thread's time in a replayed
// training step, spent on buffers that finished programs no longer read. Retiring them
// here keeps that off the thread that launches work.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "csrc/pjrt/Buffer.h"

namespace tpu::runtime {

class BufferReaper {
 public:
  static BufferReaper& get();
  // Drops these references on the reaper's thread, those that are not the last at once (a
  // buffer still referenced elsewhere lives on); `buffers` is left empty.
  void retire(std::vector<std::shared_ptr<pjrt::Buffer>>& buffers);
  // Handles whose memory a program took (donated, pjrt::Buffer::takeHandle): destroying one frees nothing
  // but waits until that program has started. They wait until a batch of them (or anything else) wakes
  // the thread: a Strict in-place op does not pay a thread wake-up. `handles` is left empty.
  void retireDonated(std::vector<std::unique_ptr<pjrt::Buffer>>& handles);
  // Returns once everything retired so far has been dropped (synchronize, exit).
  void drain();

 private:
  BufferReaper() = default;
  void run();
  // Appends to `to` (mutex_ held), starting the thread the first time.
  template <typename Ptr>
  void enqueueLocked(std::vector<Ptr>& to, std::vector<Ptr>& buffers);
  bool idleLocked() const { return queue_.empty() && handles_.empty() && !busy_; }

  std::mutex mutex_;
  std::condition_variable wake_, drained_;
  std::vector<std::shared_ptr<pjrt::Buffer>> queue_;
  std::vector<std::unique_ptr<pjrt::Buffer>> handles_;
  bool busy_ = false;  // the thread is dropping a batch taken from queue_
  std::thread thread_;
};

}  // namespace tpu::runtime
