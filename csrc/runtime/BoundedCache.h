#pragma once
// The in-memory tier of compiled programs, with a bound on their number. Every
// loaded executable keeps the plugin's code mapped (XLA:CPU maps each program's
// JIT'd code separately); a process that compiles many distinct programs must let
// old ones go, or it reaches the kernel's limit on memory mappings
// (vm.max_map_count) and the plugin crashes. When the bound is reached, the least
// recently used half goes (it comes back from the disk tier or a recompile). A hit
// only stamps a counter: no allocation on the hot path.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace tpu::runtime {

template <class Key, class Value, class Hash = std::hash<Key>>
class BoundedCache {
 public:
  explicit BoundedCache(size_t maxEntries) : max_(std::max<size_t>(maxEntries, 2)) {}

  // The cached value, or nullptr.
  Value* find(const Key& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    it->second.lastUse = ++tick_;
    return &it->second.value;
  }
  void insert(Key key, Value value) {
    if (map_.size() >= max_) evictOlderHalf();
    map_.insert_or_assign(std::move(key), Slot{std::move(value), ++tick_});
  }
  size_t size() const { return map_.size(); }
  // Drops the least recently used half (the process nears its memory-mapping cap: MappingBudget.h).
  void shed() {
    if (map_.size() >= 2) evictOlderHalf();
  }
  int64_t evictions() const { return evictions_; }
  void clear() { map_.clear(); }

 private:
  struct Slot {
    Value value;
    uint64_t lastUse;
  };
  void evictOlderHalf() {
    std::vector<uint64_t> stamps;
    stamps.reserve(map_.size());
    for (const auto& kv : map_) stamps.push_back(kv.second.lastUse);
    auto middle = stamps.begin() + static_cast<ptrdiff_t>(stamps.size() / 2);
    std::nth_element(stamps.begin(), middle, stamps.end());
    const uint64_t cut = *middle;
    evictions_ += static_cast<int64_t>(std::erase_if(map_, [cut](const auto& kv) { return kv.second.lastUse < cut; }));
  }

  size_t max_;
  uint64_t tick_ = 0;
  int64_t evictions_ = 0;
  std::unordered_map<Key, Slot, Hash> map_;
};

}  // namespace tpu::runtime
