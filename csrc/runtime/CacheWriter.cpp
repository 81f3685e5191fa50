#include "CacheWriter.h"

#include <unistd.h>

#include <thread>

namespace tpu::runtime {

CacheWriter& CacheWriter::global() {
  static CacheWriter* writer = new CacheWriter();  // never destroyed: Python's atexit drains it
  return *writer;
}

void CacheWriter::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (owner_ == 0) {
      owner_ = ::getpid();
      std::thread([this] { run(); }).detach();
    }
    if (owner_ == ::getpid()) {
      jobs_.push_back(std::move(job));
      wake_.notify_one();
      return;
    }
  }
  job();
}

void CacheWriter::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (owner_ != ::getpid()) return;
  idle_.wait(lock, [this] { return jobs_.empty() && !busy_; });
}

void CacheWriter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return !jobs_.empty(); });
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      job();
    } catch (...) {  // a job reports its own failures; the writer goes on
    }
    job = nullptr;  // what it holds (a cache key's lock) is released before drain() returns
    lock.lock();
    busy_ = false;
    if (jobs_.empty()) idle_.notify_all();
  }
}

}  // namespace tpu::runtime
