#pragma once
// Pinned host memory for tpu (`pin_memory()`, `torch.empty(..., pin_memory=True)`,
// DataLoader(pin_memory=True)). Blocks are page-aligned and tracked, so
// `isPinned` answers for any address inside a live block and Copy.cpp can take
// the asynchronous transfer path for them.
//
// The XLA CPU plugin has no real pinning (its "device" memory is host memory).
// GPU plugins could register these blocks with the device (PJRT_Client_DmaMap)
// so transfers run as DMA without a staging copy; not built yet.
#include <c10/core/Allocator.h>

#include <cstddef>

namespace tpu::aten {

class HostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  static HostAllocator& get();
};

// True when `ptr` lies inside a live pinned block (or is a zero-size pinned allocation's address).
bool isPinnedHostPtr(const void* ptr);

struct HostAllocatorStats {
  int64_t liveBlocks = 0;
  int64_t liveBytes = 0;
  int64_t allocations = 0;  // since the start of the process
};
HostAllocatorStats hostAllocatorStats();

}  // namespace tpu::aten
