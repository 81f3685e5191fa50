#pragma once
// The device side of one torch storage: a flat, immutable PJRT buffer that is
// swapped whenever the storage is written (PJRT buffers cannot be mutated).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "csrc/hlo/Type.h"
#include "csrc/pjrt/Buffer.h"

namespace tpu::runtime {

struct DeviceStorage {
  size_t nbytes = 0;
  int device = 0;
  // 1-D buffer of `elem` with nbytes / byteWidth(elem) elements; null until the
  // storage is first written (reads of never-written memory see zeros).
  std::shared_ptr<pjrt::Buffer> buffer;
  hlo::DType elem = hlo::DType::U8;
  // The buffer Executor::lendHost gave it: host memory the runtime must not write, so never
  // donated to a program (Executor::run donates an in-place write's old buffer otherwise).
  std::weak_ptr<pjrt::Buffer> lent;
  // Debug mode: the buffer FiniteCheck last found to hold only finite values.
  std::weak_ptr<pjrt::Buffer> finite;
  // Fused mode: the pending graph holds a value for this storage (its current
  // content when `written`; `buffer` is stale until the graph is flushed).
  bool inGraph = false;
  bool written = false;
  int32_t fusedSlot = -1;  // while inGraph: its position in the graph's first-touch order
  // The address the allocator gave this storage (its data pointer), for
  // resolving raw pointers (at::from_blob on a tpu pointer) back to it.
  uintptr_t address = 0;
  // Why its value is unknown: the graph that was to compute it failed on the device. Reads raise
  // (never the zeros of unwritten memory) until something writes all of it.
  std::shared_ptr<const std::string> lost;

  int64_t elemCount() const { return static_cast<int64_t>(nbytes / hlo::byteWidth(elem)); }
};

// Raises (RuntimeError) when `s` is lost, naming the failure.
void requireComputed(const DeviceStorage& s);

}  // namespace tpu::runtime
