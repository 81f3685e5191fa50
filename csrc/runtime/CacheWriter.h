#pragma once
// Writes compile cache entries on a background thread. Serializing an XLA:CPU executable (it exports
// and clones the whole HLO module) costs more than compiling it: the first run of a program should not
// wait for its cache entry.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

namespace tpu::runtime {

class CacheWriter {
 public:
  static CacheWriter& global();  // lives for the process
  // Runs `job` on the writer thread, in order (inline in a forked child, which has no writer thread).
  void post(std::function<void()> job);
  // Returns when every job posted so far has run (at exit, and before cache stats are read).
  void drain();

 private:
  CacheWriter() = default;
  void run();

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> jobs_;
  bool busy_ = false;
  int owner_ = 0;  // the pid that started the thread (0: none yet)
};

}  // namespace tpu::runtime
