// LargeBlockCache (csrc/runtime/LargeBlockCache.h) and the GOT hooks that feed it a library's large
// malloc-family requests (csrc/runtime/PluginMallocHooks.h), on a fixture library that allocates like a plugin.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "csrc/runtime/HostMemoryPolicy.h"
#include "csrc/runtime/LargeBlockCache.h"
#include "csrc/runtime/PluginMallocHooks.h"

using tpu::runtime::LargeBlockCache;

namespace {

constexpr size_t kMiB = size_t(1) << 20;

bool allBytes(const void* p, size_t n, unsigned char value) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != value) return false;
  }
  return true;
}

}  // namespace

TEST(LargeBlockCache, ReusesAFreedBlockOfAboutTheSameSize) {
  LargeBlockCache cache(256 * kMiB, 64 * kMiB);
  ASSERT_TRUE(cache.ok());
  void* a = cache.allocate(3 * kMiB, 64, false);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(cache.owns(a));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % LargeBlockCache::kGranule, 0u);  // huge-page aligned
  EXPECT_EQ(cache.usableSize(a), 4 * kMiB);
  std::memset(a, 7, 4 * kMiB);
  cache.release(a);
  EXPECT_EQ(cache.stats().cachedBytes, 4 * kMiB);

  void* b = cache.allocate(4 * kMiB - 100, 64, false);  // fits the kept block: same pages, contents kept
  EXPECT_EQ(b, a);
  EXPECT_TRUE(allBytes(b, 4 * kMiB, 7));
  cache.release(b);
  void* c = cache.allocate(3 * kMiB, 64, true);  // zeroed on reuse
  EXPECT_EQ(c, a);
  EXPECT_TRUE(allBytes(c, 4 * kMiB, 0));
  cache.release(c);
  void* small = cache.allocate(2 * kMiB - 4096, 64, false);  // 4 MiB would waste over a quarter: new block
  EXPECT_NE(small, a);
  EXPECT_EQ(cache.usableSize(small), 2 * kMiB);
  cache.release(small);

  LargeBlockCache::Stats s = cache.stats();
  EXPECT_EQ(s.allocations, 4u);
  EXPECT_EQ(s.reuses, 2u);
  EXPECT_EQ(s.liveBytes, 0u);
  cache.trim();
  EXPECT_EQ(cache.stats().cachedBytes, 0u);
}

TEST(LargeBlockCache, KeepsNoMoreThanItsLimitAndFallsBackWhenFull) {
  LargeBlockCache cache(64 * kMiB, 8 * kMiB);
  ASSERT_TRUE(cache.ok());
  void* blocks[3];
  for (void*& b : blocks) {
    b = cache.allocate(6 * kMiB, 64, false);
    ASSERT_NE(b, nullptr);
  }
  for (void* b : blocks) cache.release(b);
  EXPECT_LE(cache.stats().cachedBytes, 8 * kMiB);
  EXPECT_EQ(cache.stats().liveBytes, 0u);

  // The whole range is usable once kept blocks give their pages back.
  void* whole = cache.allocate(64 * kMiB, 64, false);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(cache.allocate(2 * kMiB, 64, false), nullptr);  // full
  EXPECT_EQ(cache.allocate(128 * kMiB, 64, false), nullptr);  // larger than the range
  cache.release(whole);
  EXPECT_EQ(cache.allocate(2 * kMiB, 1 << 20, false), nullptr);  // alignment over 64 KiB: malloc's job
  EXPECT_EQ(cache.stats().fallbacks, 3u);
  void* small = cache.allocate(100 * 1024, 4096, false);  // 64 KiB multiples below 2 MiB
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(cache.usableSize(small), 128u * 1024);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 4096, 0u);
  cache.release(small);
}

class PluginMallocHooks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    handle_ = dlopen(TPU_TEST_MALLOC_USER, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    cache_ = new LargeBlockCache(1024 * kMiB, 256 * kMiB);  // never freed: the library's hooks point at it
    ASSERT_EQ(tpu::runtime::installPluginMallocHooks(handle_, cache_), "");
  }
  template <typename F>
  static F fn(const char* name) {
    return reinterpret_cast<F>(dlsym(handle_, name));
  }
  static inline void* handle_ = nullptr;
  static inline LargeBlockCache* cache_ = nullptr;
};

TEST_F(PluginMallocHooks, LargeRequestsComeFromTheCacheAndSmallOnesFromMalloc) {
  auto userMalloc = fn<void* (*)(size_t)>("userMalloc");
  auto userFree = fn<void (*)(void*)>("userFree");
  auto userFreeThroughPointer = fn<void (*)(void*)>("userFreeThroughPointer");
  uint64_t before = cache_->stats().allocations;
  void* large = userMalloc(tpu::runtime::kLargeBytes);
  void* small = userMalloc(tpu::runtime::kLargeBytes - 1);
  EXPECT_TRUE(cache_->owns(large));
  EXPECT_FALSE(cache_->owns(small));
  EXPECT_EQ(cache_->stats().allocations, before + 1);
  userFree(small);
  userFreeThroughPointer(large);  // the GLOB_DAT entry was hooked too
  EXPECT_EQ(cache_->stats().liveBytes, 0u);

  void* again = userMalloc(tpu::runtime::kLargeBytes);  // the freed block, pages kept
  EXPECT_EQ(again, large);
  userFree(again);

  // The rest of the process is untouched: this test's own malloc is glibc's.
  void* mine = std::malloc(8 * kMiB);
  EXPECT_FALSE(cache_->owns(mine));
  std::free(mine);
}

TEST_F(PluginMallocHooks, AlignedZeroedAndGrownBlocks) {
  auto userPosixMemalign = fn<int (*)(void**, size_t, size_t)>("userPosixMemalign");
  auto userAlignedAlloc = fn<void* (*)(size_t, size_t)>("userAlignedAlloc");
  auto userCalloc = fn<void* (*)(size_t, size_t)>("userCalloc");
  auto userRealloc = fn<void* (*)(void*, size_t)>("userRealloc");
  auto userMalloc = fn<void* (*)(size_t)>("userMalloc");
  auto userFree = fn<void (*)(void*)>("userFree");

  void* p = nullptr;
  ASSERT_EQ(userPosixMemalign(&p, 4096, 8 * kMiB), 0);
  EXPECT_TRUE(cache_->owns(p));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  std::memset(p, 0xab, 8 * kMiB);
  userFree(p);
  void* z = userCalloc(2, 4 * kMiB);  // reuses the dirty block, zeroed
  EXPECT_EQ(z, p);
  EXPECT_TRUE(allBytes(z, 8 * kMiB, 0));
  userFree(z);
  void* a = userAlignedAlloc(64, 3 * kMiB);
  EXPECT_TRUE(cache_->owns(a));
  userFree(a);
  void* odd = nullptr;
  EXPECT_EQ(userPosixMemalign(&odd, 24, 4 * kMiB), EINVAL);  // not a power of two: refused as glibc does

  // realloc keeps the contents across a move; a malloc block stays malloc's.
  auto* r = static_cast<unsigned char*>(userMalloc(2 * kMiB));
  std::memset(r, 5, 2 * kMiB);
  auto* grown = static_cast<unsigned char*>(userRealloc(r, 16 * kMiB));
  ASSERT_NE(grown, nullptr);
  EXPECT_TRUE(cache_->owns(grown));
  EXPECT_TRUE(allBytes(grown, 2 * kMiB, 5));
  EXPECT_EQ(userRealloc(grown, 0), nullptr);  // frees, as glibc's realloc(p, 0) does
  void* libcBlock = userMalloc(64);
  void* stillLibc = userRealloc(libcBlock, 4 * kMiB);
  EXPECT_FALSE(cache_->owns(stillLibc));
  userFree(stillLibc);
  EXPECT_EQ(cache_->stats().liveBytes, 0u);
}

TEST_F(PluginMallocHooks, InstallingAgainChangesNothingAndAnotherCacheIsRefused) {
  EXPECT_EQ(tpu::runtime::installPluginMallocHooks(handle_, cache_), "");
  LargeBlockCache other(64 * kMiB, 0);
  EXPECT_NE(tpu::runtime::installPluginMallocHooks(handle_, &other), "");
  void* p = fn<void* (*)(size_t)>("userMalloc")(4 * kMiB);
  EXPECT_TRUE(cache_->owns(p));
  fn<void (*)(void*)>("userFree")(p);
}

// The policy registers fork handlers: a child forked while another thread holds the cache's lock can still
// allocate (without them it would wait forever for a thread that does not exist in it).
TEST(HostMemoryPolicy, ForkWhileAnotherThreadHoldsTheCacheLock) {
  setenv("TORCH_TPU_HOST_MALLOC", "cache", 1);
  tpu::runtime::applyHostMemoryPolicy();
  void* handle = dlopen(TPU_TEST_MALLOC_USER, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  tpu::runtime::adoptPluginAllocations(handle);
  LargeBlockCache* cache = tpu::runtime::hostBlockCache();
  if (!cache) GTEST_SKIP() << "hooks already installed in this process: " << tpu::runtime::hostMemoryPolicy();

  std::atomic<bool> held{false};
  std::thread holder([&] {
    cache->lockForFork();
    held = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cache->unlockAfterFork();
  });
  while (!held) std::this_thread::yield();
  pid_t pid = fork();  // the prepare handler waits for the holder to let go
  if (pid == 0) {
    alarm(10);  // a child stuck on the lock dies of SIGALRM instead of hanging the test
    void* p = cache->allocate(2 * kMiB, 64, false);
    if (p) cache->release(p);
    _exit(p ? 0 : 1);
  }
  holder.join();
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}
