#pragma once
// Debug mode's non-finite check, outside the op's own program: whether a whole storage holds only
// finite values, by one small program per (element type, length) shared by every op. Tracing the check
// into each op's program instead made every Debug program a second compile of its Strict one (a reduction
// costs XLA:CPU ~100 ms to compile, more than most ops themselves).
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "DeviceStorage.h"
#include "csrc/hlo/Builder.h"
#include "csrc/pjrt/Executable.h"

namespace tpu::runtime {

// pred scalar: every element of every value is finite (the check traced into a program).
hlo::Value allFinite(hlo::Builder& b, const std::vector<hlo::Value>& values);

class FiniteCheck {
 public:
  // True when every element of `s`'s buffer is finite (a storage never written holds zeros). Waits for
  // the buffer and the check; only for float element types.
  bool allFinite(const DeviceStorage& s);
  // allFinite, remembered for the storage's current buffer: a storage whose buffer was checked (or produced
  // by an op whose results were) is not read again until something replaces the buffer.
  bool knownFinite(DeviceStorage& s);
  // `s`'s current buffer was just found finite.
  static void markFinite(DeviceStorage& s) { s.finite = s.buffer; }
  // Programs loaded so far (the executor then asks its mapping budget, MappingBudget.h), and dropping
  // them all (they are small and come back from the disk cache).
  size_t loaded() const { return loaded_; }
  size_t size();
  void shed();

 private:
  std::mutex mutex_;
  std::map<std::pair<int, int64_t>, std::shared_ptr<pjrt::Executable>> programs_;
  std::atomic<size_t> loaded_{0};
};

}  // namespace tpu::runtime
