#include "HostAllocator.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace tpu::aten {
namespace {

constexpr size_t kPage = 4096;

// Live blocks by start address -> size (size 0 blocks still occupy one page).
std::mutex gMutex;
std::map<uintptr_t, size_t> gBlocks;
HostAllocatorStats gStats;

void freeBlock(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto it = gBlocks.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != gBlocks.end()) {
      gStats.liveBlocks -= 1;
      gStats.liveBytes -= static_cast<int64_t>(it->second);
      gBlocks.erase(it);
    }
  }
  std::free(ptr);
}

}  // namespace

c10::DataPtr HostAllocator::allocate(size_t nbytes) {
  // Whole pages: a block never shares a page with pageable memory, as with cudaHostAlloc.
  size_t span = (std::max<size_t>(nbytes, 1) + kPage - 1) / kPage * kPage;
  void* ptr = std::aligned_alloc(kPage, span);
  TORCH_CHECK_WITH(OutOfMemoryError, ptr, "tpu: could not allocate ", nbytes, " bytes of pinned host memory");
  {
    std::lock_guard<std::mutex> lock(gMutex);
    gBlocks.emplace(reinterpret_cast<uintptr_t>(ptr), std::max<size_t>(nbytes, 1));
    gStats.liveBlocks += 1;
    gStats.liveBytes += static_cast<int64_t>(nbytes);
    gStats.allocations += 1;
  }
  return {ptr, ptr, &freeBlock, c10::Device(c10::DeviceType::CPU)};
}

c10::DeleterFnPtr HostAllocator::raw_deleter() const { return &freeBlock; }

void HostAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

HostAllocator& HostAllocator::get() {
  static HostAllocator allocator;
  return allocator;
}

bool isPinnedHostPtr(const void* ptr) {
  auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gBlocks.upper_bound(p);
  if (it == gBlocks.begin()) return false;
  --it;
  return p < it->first + it->second;
}

HostAllocatorStats hostAllocatorStats() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gStats;
}

}  // namespace tpu::aten
