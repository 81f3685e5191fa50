#include "LargeBlockCache.h"

#include <sys/mman.h>

#include <cstring>

namespace tpu::runtime {
namespace {

constexpr int kReserveFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

LargeBlockCache::LargeBlockCache(size_t reserveBytes, size_t keepBytes) : keepBytes_(keepBytes) {
  reserveBytes = roundUp(reserveBytes, kGranule);
  // Over-reserve one granule so that the range can start on a granule.
  void* p = mmap(nullptr, reserveBytes + kGranule, PROT_NONE, kReserveFlags, -1, 0);
  if (p == MAP_FAILED) return;
  auto raw = reinterpret_cast<uintptr_t>(p);
  begin_ = roundUp(raw, kGranule);
  end_ = begin_ + reserveBytes;
  if (begin_ > raw) munmap(p, begin_ - raw);
  if (raw + reserveBytes + kGranule > end_) munmap(reinterpret_cast<void*>(end_), raw + kGranule - begin_);
  unmapped_[begin_] = reserveBytes;
}

LargeBlockCache::~LargeBlockCache() {
  if (ok()) munmap(reinterpret_cast<void*>(begin_), end_ - begin_);
}

void* LargeBlockCache::allocate(size_t bytes, size_t alignment, bool zeroed) {
  if (!ok()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  if (alignment > kSmallGranule || bytes > end_ - begin_) {
    ++stats_.fallbacks;
    return nullptr;
  }
  bool huge = bytes >= kGranule;
  size_t size = roundUp(bytes, huge ? kGranule : kSmallGranule);
  void* block = reuseLocked(size, alignment);
  if (block) {
    if (zeroed) std::memset(block, 0, size);
  } else {
    size_t align = huge ? kGranule : kSmallGranule;
    block = carveLocked(size, align);
    // The range is full or fragmented by kept blocks of other sizes: give their pages back and retry.
    if (!block && !cached_.empty()) {
      while (!cached_.empty()) evictLocked(cached_.begin());
      block = carveLocked(size, align);
    }
    if (!block) {
      ++stats_.fallbacks;
      return nullptr;
    }
  }
  live_[reinterpret_cast<uintptr_t>(block)] = size;
  stats_.liveBytes += size;
  ++stats_.allocations;
  return block;
}

void LargeBlockCache::release(void* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(p));
  if (it == live_.end()) return;  // not a block start: nothing of ours to free
  size_t size = it->second;
  live_.erase(it);
  stats_.liveBytes -= size;
  cached_.emplace(size, reinterpret_cast<uintptr_t>(p));
  stats_.cachedBytes += size;
  // Over the limit, the largest kept blocks give their pages back first.
  while (stats_.cachedBytes > keepBytes_) evictLocked(std::prev(cached_.end()));
}

size_t LargeBlockCache::usableSize(const void* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(p));
  return it == live_.end() ? 0 : it->second;
}

void LargeBlockCache::trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!cached_.empty()) evictLocked(cached_.begin());
}

LargeBlockCache::Stats LargeBlockCache::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

// The smallest kept block that fits, unless it would waste over a quarter of the request; `size` becomes
// the block's.
void* LargeBlockCache::reuseLocked(size_t& size, size_t alignment) {
  for (auto it = cached_.lower_bound(size); it != cached_.end() && it->first <= size + size / 4; ++it) {
    if (it->second % alignment) continue;
    void* block = reinterpret_cast<void*>(it->second);
    size = it->first;
    stats_.cachedBytes -= size;
    ++stats_.reuses;
    cached_.erase(it);
    return block;
  }
  return nullptr;
}

// First fit in address order: new blocks pack at the range's start.
void* LargeBlockCache::carveLocked(size_t size, size_t alignment) {
  for (auto it = unmapped_.begin(); it != unmapped_.end(); ++it) {
    uintptr_t rangeStart = it->first, rangeEnd = it->first + it->second;
    uintptr_t start = roundUp(rangeStart, alignment);
    if (start + size > rangeEnd) continue;
    void* block = reinterpret_cast<void*>(start);
    // Committing can fail under strict overcommit: then malloc gets the request.
    if (mprotect(block, size, PROT_READ | PROT_WRITE) != 0) return nullptr;
    if (size >= kGranule) madvise(block, size, MADV_HUGEPAGE);  // fewer faults where THP is "madvise"
    unmapped_.erase(it);
    if (start > rangeStart) unmapped_[rangeStart] = start - rangeStart;
    if (rangeEnd > start + size) unmapped_[start + size] = rangeEnd - (start + size);
    return block;
  }
  return nullptr;
}

void LargeBlockCache::evictLocked(std::multimap<size_t, uintptr_t>::iterator it) {
  size_t size = it->first;
  uintptr_t start = it->second;
  cached_.erase(it);
  stats_.cachedBytes -= size;
  // A fresh reservation over the block drops its pages and makes the range unreadable again.
  mmap(reinterpret_cast<void*>(start), size, PROT_NONE, kReserveFlags | MAP_FIXED, -1, 0);
  auto next = unmapped_.lower_bound(start);
  if (next != unmapped_.end() && next->first == start + size) {
    size += next->second;
    unmapped_.erase(next);
  }
  auto prev = unmapped_.lower_bound(start);
  if (prev != unmapped_.begin() && std::prev(prev)->first + std::prev(prev)->second == start) {
    std::prev(prev)->second += size;
  } else {
    unmapped_[start] = size;
  }
}

}  // namespace tpu::runtime
