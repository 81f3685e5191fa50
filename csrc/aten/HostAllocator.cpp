#include "HostAllocator.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "csrc/runtime/AddressRanges.h"

namespace tpu::aten {
namespace {

constexpr size_t kPage = 4096;

// Live blocks (size 0 blocks still occupy one page); the value is the bytes asked for.
runtime::AddressRanges<size_t> gBlocks;
// Without a cache, active and allocated are the same blocks: one request is one block is one system call.
std::mutex gStatsMutex;
at::HostStats gStats;
std::atomic<int64_t> gAllocationsEver{0};  // hostAllocatorStats' count: torch's resets do not clear it

void freeBlock(void* ptr) {
  if (auto block = gBlocks.erase(reinterpret_cast<uintptr_t>(ptr))) {
    std::lock_guard<std::mutex> lock(gStatsMutex);
    gStats.active_requests.decrease(1);
    gStats.active_bytes.decrease(block->value);
    gStats.allocations.decrease(1);
    gStats.allocated_bytes.decrease(block->value);
    gStats.num_host_free += 1;
  }
  std::free(ptr);
}

}  // namespace

c10::DataPtr HostAllocator::allocate(size_t nbytes) {
  // Whole pages: a block never shares a page with pageable memory, as with cudaHostAlloc.
  size_t span = (std::max<size_t>(nbytes, 1) + kPage - 1) / kPage * kPage;
  void* ptr = std::aligned_alloc(kPage, span);
  TORCH_CHECK_WITH(OutOfMemoryError, ptr, "tpu: could not allocate ", nbytes, " bytes of pinned host memory");
  gBlocks.insert(reinterpret_cast<uintptr_t>(ptr), std::max<size_t>(nbytes, 1), nbytes);
  {
    std::lock_guard<std::mutex> lock(gStatsMutex);
    gStats.active_requests.increase(1);
    gStats.active_bytes.increase(nbytes);
    gStats.allocations.increase(1);
    gStats.allocated_bytes.increase(nbytes);
    gStats.num_host_alloc += 1;
  }
  gAllocationsEver += 1;
  return {ptr, ptr, &freeBlock, c10::Device(c10::DeviceType::CPU)};
}

c10::DeleterFnPtr HostAllocator::raw_deleter() const { return &freeBlock; }

void HostAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

bool HostAllocator::record_event(void* ptr, void*, c10::Stream) { return isPinnedHostPtr(ptr); }

at::HostStats HostAllocator::get_stats() {
  std::lock_guard<std::mutex> lock(gStatsMutex);
  return gStats;
}

void HostAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(gStatsMutex);
  for (auto* stat : {&gStats.active_requests, &gStats.active_bytes, &gStats.allocations, &gStats.allocated_bytes})
    stat->reset_accumulated();
  gStats.num_host_alloc = gStats.num_host_free = 0;
}

void HostAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(gStatsMutex);
  for (auto* stat : {&gStats.active_requests, &gStats.active_bytes, &gStats.allocations, &gStats.allocated_bytes})
    stat->reset_peak();
}

HostAllocator& HostAllocator::get() {
  static HostAllocator allocator;
  return allocator;
}

bool isPinnedHostPtr(const void* ptr) { return gBlocks.find(reinterpret_cast<uintptr_t>(ptr)).has_value(); }

HostAllocatorStats hostAllocatorStats() {
  std::lock_guard<std::mutex> lock(gStatsMutex);
  return {gStats.active_requests.current, gStats.active_bytes.current, gAllocationsEver.load()};
}

REGISTER_HOST_ALLOCATOR(c10::DeviceType::PrivateUse1, &HostAllocator::get())

}  // namespace tpu::aten
