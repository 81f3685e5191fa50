#include "BufferReaper.h"

namespace tpu::runtime {

BufferReaper& BufferReaper::get() {
  static BufferReaper* reaper = new BufferReaper();  // lives for the process, as the Executor
  return *reaper;
}

template <typename Ptr>
void BufferReaper::enqueueLocked(std::vector<Ptr>& to, std::vector<Ptr>& buffers) {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  to.insert(to.end(), std::make_move_iterator(buffers.begin()), std::make_move_iterator(buffers.end()));
  buffers.clear();
}

void BufferReaper::retire(std::vector<std::shared_ptr<pjrt::Buffer>>& buffers) {
  // A reference that is not the last is dropped here (a decrement, nothing freed): the queue then
  // never shares a buffer with a storage, so how far the thread has got cannot decide whether a
  // later program may donate that storage's buffer (part of its signature).
  std::erase_if(buffers, [](const std::shared_ptr<pjrt::Buffer>& b) { return b.use_count() != 1; });
  if (buffers.empty()) return;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    enqueueLocked(queue_, buffers);
    wake = !busy_;  // a busy thread looks at the queues again before it sleeps
  }
  if (wake) wake_.notify_one();
}

void BufferReaper::retireDonated(std::vector<std::unique_ptr<pjrt::Buffer>>& handles) {
  constexpr size_t kBatch = 4096;  // a few MB of host structs at most; wakes cost the caller ~1 us each op at 64
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    enqueueLocked(handles_, handles);
    wake = handles_.size() >= kBatch && !busy_;
  }
  if (wake) wake_.notify_one();
}

void BufferReaper::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!idleLocked()) wake_.notify_one();  // donated handles may be waiting for a batch
  drained_.wait(lock, [this] { return idleLocked(); });
}

void BufferReaper::run() {
  std::vector<std::shared_ptr<pjrt::Buffer>> batch;
  std::vector<std::unique_ptr<pjrt::Buffer>> handles;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // Woken for a batch of handles, buffers, or a drain; a spurious wake-up with only a few handles
    // takes them too.
    wake_.wait(lock, [this] { return !queue_.empty() || !handles_.empty(); });
    batch.swap(queue_);
    handles.swap(handles_);
    busy_ = true;
    lock.unlock();
    batch.clear();  // the PJRT_Buffer_Destroy calls, outside the lock
    handles.clear();
    lock.lock();
    busy_ = false;
    if (idleLocked()) drained_.notify_all();
  }
}

}  // namespace tpu::runtime
