#pragma once
// Pinned host memory for tpu (`pin_memory()`, `torch.empty(..., pin_memory=True)`,
// DataLoader(pin_memory=True)). Blocks are page-aligned and tracked, so
// `isPinned` answers for any address inside a live block and Copy.cpp can take
// the asynchronous transfer path for them.
//
// The XLA CPU plugin has no real pinning (its "device" memory is host memory).
// GPU plugins could register these blocks with the device (PJRT_Client_DmaMap)
// so transfers run as DMA without a staging copy; not built yet.
#include <ATen/core/CachingHostAllocator.h>

#include <cstddef>

namespace tpu::aten {

// Also PrivateUse1's at::HostAllocator, so torch.accelerator's host-memory calls (empty_host_cache,
// host memory stats) reach it. Nothing is cached: a freed block goes straight back to the system.
class HostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  // Transfers from pinned blocks keep their own order (Copy.cpp), so a block needs no stream event.
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override;
  void empty_cache() override {}
  at::HostStats get_stats() override;
  void reset_accumulated_stats() override;
  void reset_peak_stats() override;

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
