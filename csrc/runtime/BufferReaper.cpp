#include "BufferReaper.h"

namespace tpu::runtime {

BufferReaper& BufferReaper::get() {
  static BufferReaper* reaper = new BufferReaper();  // lives for the process, as the Executor
  return *reaper;
}

void BufferReaper::retire(std::vector<std::shared_ptr<pjrt::Buffer>>& buffers) {
  // A reference that is not the last is dropped here (a decrement, nothing freed): the queue then
  // never shares a buffer with a storage, so how far the thread has got cannot decide whether a
  // later program may donate that storage's buffer (part of its signature).
  std::erase_if(buffers, [](const std::shared_ptr<pjrt::Buffer>& b) { return b.use_count() != 1; });
  if (buffers.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    if (!queue_.empty()) {  // the thread was woken for the batch already queued
      queue_.insert(queue_.end(), std::make_move_iterator(buffers.begin()), std::make_move_iterator(buffers.end()));
      buffers.clear();
      return;
    }
    queue_.swap(buffers);
  }
  wake_.notify_one();
}

void BufferReaper::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void BufferReaper::run() {
  std::vector<std::shared_ptr<pjrt::Buffer>> batch;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return !queue_.empty(); });
    batch.swap(queue_);
    busy_ = true;
    lock.unlock();
    batch.clear();  // the PJRT_Buffer_Destroy calls, outside the lock
    lock.lock();
    busy_ = false;
    if (queue_.empty()) drained_.notify_all();
  }
}

}  // namespace tpu::runtime
