#include "HostMemoryPolicy.h"

#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "LargeBlockCache.h"
#include "PluginMallocHooks.h"

namespace tpu::runtime {
namespace {

const char* kVariable = "TORCH_TPU_HOST_MALLOC";
constexpr int kTrimAbove = 1 << 30;  // bytes free at the heap's top before malloc returns them
constexpr size_t kGiB = size_t(1) << 30;

enum class Policy { kSystem, kKeep, kCache };
Policy gMode = Policy::kSystem;
std::string gPolicy = "system (glibc malloc's defaults)";
LargeBlockCache* gCache = nullptr;  // lives for the process: the plugin's blocks may outlive everything

void applyKeep(const std::string& why) {
  // mallopt returns 1 for a setting it took.
  bool ok = mallopt(M_ARENA_MAX, 1) == 1 && mallopt(M_MMAP_MAX, 0) == 1 &&
            mallopt(M_TRIM_THRESHOLD, kTrimAbove) == 1;
  gMode = Policy::kKeep;
  gPolicy = ok ? "keep (glibc malloc: one arena, no mmap, trim above 1 GiB" + why + ")"
               : "keep requested, but glibc refused a mallopt setting: its defaults may still apply";
}

size_t physicalBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? size_t(pages) * size_t(size) : 16 * kGiB;
}

// Registered once the cache exists; gCache is set right after, so a fork in between has nothing to hold.
void lockCacheForFork() {
  if (gCache) gCache->lockForFork();
}
void unlockCacheAfterFork() {
  if (gCache) gCache->unlockAfterFork();
}

// Address space only: four times the host's memory (never less than 16 GiB), halved where a limit on
// the address space refuses it.
LargeBlockCache* makeCache() {
  size_t keep = std::min(kGiB, physicalBytes() / 8);
  for (size_t reserve = std::clamp(4 * physicalBytes(), 16 * kGiB, 1024 * kGiB); reserve >= kGiB; reserve /= 2) {
    auto* cache = new LargeBlockCache(reserve, keep);
    if (cache->ok()) {
      pthread_atfork(lockCacheForFork, unlockCacheAfterFork, unlockCacheAfterFork);
      return cache;
    }
    delete cache;
  }
  return nullptr;
}

}  // namespace

void applyHostMemoryPolicy() {
  const char* value = std::getenv(kVariable);
  std::string policy = value && *value ? value : "cache";
  if (policy == "system") return;
  if (policy == "keep") return applyKeep("");
  if (policy != "cache") {
    throw std::invalid_argument(std::string(kVariable) + "=" + policy +
                                " is not a host malloc policy: use cache (the default on the CPU plugins: the "
                                "plugin's large blocks stay mapped between program runs), keep (glibc keeps "
                                "them, one malloc arena) or system (glibc's defaults)");
  }
  // glibc's thresholds where its dynamic ones end up (they start at 128 KiB: mapping and trimming 4 MiB
  // blocks afresh at first); setting them turns the adjustment off.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  gMode = Policy::kCache;
  gPolicy = "cache (waiting for the plugin to open)";
}

void adoptPluginAllocations(void* handle) {
  if (gMode != Policy::kCache) return;
  if (!gCache) gCache = makeCache();
  std::string why = gCache ? installPluginMallocHooks(handle, gCache) : "no address range could be reserved";
  if (!why.empty()) return applyKeep("; the large-block cache is off: " + why);
  gPolicy = "cache (the plugin's blocks from " + std::to_string(kLargeBytes >> 20) +
            " MiB kept mapped for reuse; glibc's arenas for the rest)";
}

std::string hostMemoryPolicy() { return gPolicy; }

LargeBlockCache* hostBlockCache() { return gMode == Policy::kCache ? gCache : nullptr; }

}  // namespace tpu::runtime
