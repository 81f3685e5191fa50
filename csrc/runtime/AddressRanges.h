#pragma once
// A thread-safe set of disjoint address ranges [start, start + size), each with
// a value: which allocation a pointer falls into (pinned host blocks, the
// address ranges reserved for device storages).
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace tpu::runtime {

template <typename V>
class AddressRanges {
 public:
  struct Range {
    uintptr_t start;
    size_t size;
    V value;
  };

  void insert(uintptr_t start, size_t size, V value) {
    std::lock_guard<std::mutex> lock(mutex_);
    ranges_.insert_or_assign(start, Entry{size, value});
  }
  // Removes the range that starts at `start`, returning it (nothing if none does).
  std::optional<Range> erase(uintptr_t start) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ranges_.find(start);
    if (it == ranges_.end()) return std::nullopt;
    Range r{it->first, it->second.size, it->second.value};
    ranges_.erase(it);
    return r;
  }
  // The range holding address `p`, if any.
  std::optional<Range> find(uintptr_t p) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ranges_.upper_bound(p);
    if (it == ranges_.begin()) return std::nullopt;
    --it;
    if (p >= it->first + it->second.size) return std::nullopt;
    return Range{it->first, it->second.size, it->second.value};
  }

 private:
  struct Entry {
    size_t size;
    V value;
  };
  mutable std::mutex mutex_;
  std::map<uintptr_t, Entry> ranges_;
};

}  // namespace tpu::runtime
