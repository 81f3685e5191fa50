#pragma once
// Large host blocks that stay mapped between program runs, for the CPU plugins' allocations.
//
// On the XLA CPU plugins every device buffer and every program's temporaries come from malloc. glibc maps a
// block over 32 MiB afresh and unmaps it on free (a thread arena cannot hold one over 64 MiB at all), so a
// program with a few hundred MiB of temporaries page-faults every one of them at every run. This cache serves
// the large requests instead, the way a device allocator would: blocks are carved from one reserved address
// range, and a freed block keeps its pages for the next request of about its size. Smaller requests never
// reach it and keep glibc's per-thread arenas (PluginMallocHooks.h routes them).
//
// `owns` is lock-free (a range check), so a free of a small block costs two compares; everything else takes
// one mutex, which only large blocks ever reach.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

namespace tpu::runtime {

class LargeBlockCache {
 public:
  // Blocks from 2 MiB are whole huge pages on a huge-page boundary; smaller ones are 64 KiB multiples.
  static constexpr size_t kGranule = size_t(2) << 20;
  static constexpr size_t kSmallGranule = size_t(64) << 10;

  struct Stats {
    size_t liveBytes = 0;     // in blocks handed out
    size_t cachedBytes = 0;   // in freed blocks whose pages are kept
    uint64_t allocations = 0;
    uint64_t reuses = 0;      // allocations served by a cached block (no new pages)
    uint64_t fallbacks = 0;   // requests it could not serve (region full, alignment over a granule)
  };

  // Reserves `reserveBytes` of address space (no memory) and keeps at most `keepBytes` in freed blocks.
  // `ok()` is false when the reservation failed; the cache then serves nothing.
  LargeBlockCache(size_t reserveBytes, size_t keepBytes);
  ~LargeBlockCache();
  LargeBlockCache(const LargeBlockCache&) = delete;
  LargeBlockCache& operator=(const LargeBlockCache&) = delete;

  bool ok() const { return begin_ != 0; }
  bool owns(const void* p) const {
    auto a = reinterpret_cast<uintptr_t>(p);
    return a >= begin_ && a < end_;
  }

  // A block of at least `bytes`, aligned to `alignment` (at most kSmallGranule), zero-filled when `zeroed`;
  // nullptr when it cannot serve the request (the caller then asks malloc).
  void* allocate(size_t bytes, size_t alignment, bool zeroed);
  // `p` is a block this cache handed out (owns(p)).
  void release(void* p);
  size_t usableSize(const void* p);
  // Returns every freed block's pages to the system (torch.tpu.empty_cache()).
  void trim();
  Stats stats();
  // For pthread_atfork: held across fork() so that the child never inherits the lock taken by a thread that
  // does not exist there (as glibc does for its own arenas).
  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }

 private:
  void* reuseLocked(size_t& size, size_t alignment);
  void* carveLocked(size_t size, size_t alignment);
  void evictLocked(std::multimap<size_t, uintptr_t>::iterator it);

  uintptr_t begin_ = 0, end_ = 0;
  size_t keepBytes_;
  std::mutex mutex_;
  std::map<uintptr_t, size_t> unmapped_;          // address ranges with no pages, coalesced
  std::multimap<size_t, uintptr_t> cached_;       // freed blocks keeping their pages, by size
  std::unordered_map<uintptr_t, size_t> live_;    // block -> size
  Stats stats_;
};

}  // namespace tpu::runtime
