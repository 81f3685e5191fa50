#include "HostAllocator.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "csrc/runtime/AddressRanges.h"

namespace tpu::aten {
namespace {

constexpr size_t kPage = 4096;

// Live blocks (size 0 blocks still occupy one page); the value is the bytes asked for.
runtime::AddressRanges<size_t> gBlocks;
std::atomic<int64_t> gLiveBlocks{0}, gLiveBytes{0}, gAllocations{0};

void freeBlock(void* ptr) {
  if (auto block = gBlocks.erase(reinterpret_cast<uintptr_t>(ptr))) {
    gLiveBlocks -= 1;
    gLiveBytes -= static_cast<int64_t>(block->value);
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
  gLiveBlocks += 1;
  gLiveBytes += static_cast<int64_t>(nbytes);
  gAllocations += 1;
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

bool isPinnedHostPtr(const void* ptr) { return gBlocks.find(reinterpret_cast<uintptr_t>(ptr)).has_value(); }

HostAllocatorStats hostAllocatorStats() { return {gLiveBlocks.load(), gLiveBytes.load(), gAllocations.load()}; }

}  // namespace tpu::aten
