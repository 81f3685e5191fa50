// The persistent compile cache alone: entries, corruption, locking, eviction,
// and (with the test plugin) real executables through compileWithCache.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <thread>

#include "TestPlugin.h"
#include "TempDir.h"
#include "csrc/runtime/CacheWriter.h"
#include "csrc/runtime/CompileCache.h"

using namespace tpu;
using runtime::CacheKey;
using runtime::CompileCache;
using runtime::CompileCacheConfig;
namespace fs = std::filesystem;

namespace {

CompileCacheConfig configFor(const std::string& dir, uint64_t maxBytes = 0) {
  CompileCacheConfig c;
  c.dir = dir;
  c.maxBytes = maxBytes;
  c.lockTimeoutSeconds = 30;
  return c;
}

CacheKey keyOf(const std::string& s) { return runtime::compileCacheKey(s, "opts", "identity"); }

std::string readAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void writeAll(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

int countFiles(const std::string& dir, const std::string& suffix) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().string().ends_with(suffix);
  return n;
}

// fetchOrProduce with plain bytes: `produced` counts the "compiles".
CompileCache::Source fetch(CompileCache& c, const CacheKey& key, const std::string& value, std::string* got,
                           std::atomic<int>* produced = nullptr) {
  return c.fetchOrProduce(
      key, "op=test",
      [&](const std::string& payload, std::string* why) {
        if (payload.rfind("value:", 0) != 0) return *why = "not a test payload", false;
        *got = payload;
        return true;
      },
      [&]() -> std::string {
        if (produced) ++*produced;
        *got = "value:" + value;
        return *got;
      });
}

}  // namespace

TEST(CompileCache, ParsesSizes) {
  EXPECT_EQ(CompileCacheConfig::parseBytes("123"), 123u);
  EXPECT_EQ(CompileCacheConfig::parseBytes(" 64K "), 64u << 10);
  EXPECT_EQ(CompileCacheConfig::parseBytes("10G"), 10ull << 30);
  EXPECT_EQ(CompileCacheConfig::parseBytes("2MiB"), 2u << 20);
  EXPECT_EQ(CompileCacheConfig::parseBytes("0"), 0u);
  EXPECT_FALSE(CompileCacheConfig::parseBytes("ten"));
  EXPECT_FALSE(CompileCacheConfig::parseBytes("5X"));
  EXPECT_FALSE(CompileCacheConfig::parseBytes("-1"));
  EXPECT_FALSE(CompileCacheConfig::parseBytes("99999999999999999999"));
}

TEST(CompileCache, KeyCoversTextOptionsAndIdentity) {
  CacheKey k = runtime::compileCacheKey("module", "opts", "plugin 1");
  EXPECT_EQ(k, runtime::compileCacheKey("module", "opts", "plugin 1"));
  EXPECT_NE(k, runtime::compileCacheKey("module ", "opts", "plugin 1"));
  EXPECT_NE(k, runtime::compileCacheKey("module", "opts2", "plugin 1"));
  EXPECT_NE(k, runtime::compileCacheKey("module", "opts", "plugin 2"));
}

TEST(CompileCache, StoresAndLoadsAcrossInstances) {
  TempDir dir;
  std::string sub = dir.path + "/a/b";  // created on first write
  CompileCache writer(configFor(sub));
  std::string got;
  std::atomic<int> produced{0};
  EXPECT_EQ(fetch(writer, keyOf("p"), "1", &got, &produced), CompileCache::Source::Produced);
  EXPECT_EQ(got, "value:1");
  EXPECT_TRUE(fs::exists(writer.entryPath(keyOf("p"))));
  CompileCache reader(configFor(sub));  // another process
  got.clear();
  EXPECT_EQ(fetch(reader, keyOf("p"), "other", &got, &produced), CompileCache::Source::Disk);
  EXPECT_EQ(got, "value:1");
  EXPECT_EQ(produced, 1);
  EXPECT_EQ(writer.stats().misses, 1);
  EXPECT_EQ(writer.stats().writes, 1);
  EXPECT_EQ(reader.stats().hits, 1);
  EXPECT_EQ(reader.stats().compiles, 0);
  EXPECT_EQ(countFiles(sub, ".bin"), 1);
  EXPECT_EQ(countFiles(sub, ".tmp"), 0);
  auto info = CompileCache::inspect(sub, true);
  EXPECT_EQ(info.entries, 1);
  EXPECT_EQ(info.invalid, 0);
}

TEST(CompileCache, DisabledOnlyProduces) {
  TempDir dir;
  CompileCacheConfig c = configFor(dir.path);
  c.enabled = false;
  CompileCache cache(c);
  std::string got;
  std::atomic<int> produced{0};
  fetch(cache, keyOf("p"), "1", &got, &produced);
  fetch(cache, keyOf("p"), "1", &got, &produced);
  EXPECT_EQ(produced, 2);
  EXPECT_EQ(cache.stats().compiles, 2);
  EXPECT_EQ(cache.stats().misses, 0);
  EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(CompileCache, BadEntriesAreMissesRecompiledAndReplaced) {
  const CacheKey key = keyOf("p");
  const std::string good = CompileCache::encodeEntry(key, "op=test", "value:1");
  const std::string other = CompileCache::encodeEntry(keyOf("q"), "op=test", "value:1");
  struct Case {
    const char* name;
    std::function<void(const std::string& path)> spoil;
  };
  std::vector<Case> cases = {
      {"truncated", [&](const std::string& p) { writeAll(p, good.substr(0, good.size() - 3)); }},
      {"truncated header", [&](const std::string& p) { writeAll(p, good.substr(0, 20)); }},
      {"flipped payload byte", [&](const std::string& p) { std::string b = good; b.back() ^= 1; writeAll(p, b); }},
      {"flipped checksum byte", [&](const std::string& p) { std::string b = good; b[60] ^= 0x80; writeAll(p, b); }},
      {"wrong magic", [&](const std::string& p) { std::string b = good; b[0] = 'X'; writeAll(p, b); }},
      {"other format version", [&](const std::string& p) { std::string b = good; b[8] = 9; writeAll(p, b); }},
      {"huge length", [&](const std::string& p) { std::string b = good; b[23] = 0x7f; writeAll(p, b); }},
      {"zero length", [&](const std::string& p) { writeAll(p, ""); }},
      {"other key", [&](const std::string& p) { writeAll(p, other); }},
      {"foreign file", [&](const std::string& p) { writeAll(p, "#!/bin/sh\necho hello\n"); }},
      {"a directory", [&](const std::string& p) { fs::create_directory(p); }},
      {"payload the plugin rejects",
       [&](const std::string& p) { writeAll(p, CompileCache::encodeEntry(key, "op=test", "garbage")); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    CompileCache cache(configFor(dir.path));
    c.spoil(cache.entryPath(key));
    testing::internal::CaptureStderr();
    std::string got;
    std::atomic<int> produced{0};
    EXPECT_EQ(fetch(cache, key, "1", &got, &produced), CompileCache::Source::Produced);
    EXPECT_EQ(got, "value:1");
    EXPECT_EQ(produced, 1);
    EXPECT_EQ(cache.stats().corrupt, 1);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("warning: ignoring compile cache entry"), std::string::npos) << err;
    // Replaced by a valid entry that a fresh process loads.
    CompileCache again(configFor(dir.path));
    got.clear();
    EXPECT_EQ(fetch(again, key, "2", &got), CompileCache::Source::Disk);
    EXPECT_EQ(got, "value:1");
    EXPECT_EQ(again.stats().corrupt, 0);
  }
}

TEST(CompileCache, UnusableDirectoryDegradesToMemoryWithOneWarning) {
  TempDir dir;
  writeAll(dir.path + "/file", "x");
  CompileCache cache(configFor(dir.path + "/file/cache"));  // a path below a regular file
  testing::internal::CaptureStderr();
  std::string got;
  std::atomic<int> produced{0};
  for (const char* p : {"a", "b", "c"}) EXPECT_EQ(fetch(cache, keyOf(p), p, &got, &produced), CompileCache::Source::Produced);
  EXPECT_EQ(got, "value:c");
  EXPECT_EQ(produced, 3);
  EXPECT_FALSE(cache.writable());
  std::string err = testing::internal::GetCapturedStderr();
  size_t first = err.find("not usable for writing");
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("not usable for writing", first + 1), std::string::npos) << err;
}

TEST(CompileCache, ReadOnlyDirectoryDegradesToMemory) {
  if (::geteuid() == 0) {
    // root ignores permission bits: covered by UnusableDirectory... and FullDisk.
    SUCCEED();
    return;
  }
  TempDir dir;
  fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
  CompileCache cache(configFor(dir.path));
  testing::internal::CaptureStderr();
  std::string got;
  EXPECT_EQ(fetch(cache, keyOf("a"), "a", &got), CompileCache::Source::Produced);
  EXPECT_FALSE(cache.writable());
  EXPECT_NE(testing::internal::GetCapturedStderr().find("not usable for writing"), std::string::npos);
}

TEST(CompileCache, FullDiskDegradesToMemoryAndLeavesNoTemporaryFile) {
  TempDir dir;
  CompileCache cache(configFor(dir.path));
  // File size limit: writes beyond 100 bytes fail with EFBIG, as on a full disk.
  struct rlimit old;
  ::getrlimit(RLIMIT_FSIZE, &old);
  auto oldHandler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = {100, old.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string got;
  std::string big(1000, 'x');
  auto src = fetch(cache, keyOf("a"), big, &got);  // (its warning goes to stderr, under the same limit)
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, oldHandler);
  EXPECT_EQ(src, CompileCache::Source::Produced);
  EXPECT_EQ(got, "value:" + big);
  EXPECT_FALSE(cache.writable());
  EXPECT_EQ(countFiles(dir.path, ".bin"), 0);
  for (const auto& e : fs::directory_iterator(dir.path))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp-", 0), std::string::npos) << e.path();
}

TEST(CompileCache, EvictsLeastRecentlyUsedWithinTheBound) {
  TempDir dir;
  const std::string payload(1000, 'v');
  const size_t entryBytes = CompileCache::encodeEntry(keyOf("0"), "op=test", "value:" + payload).size();
  const uint64_t bound = 4 * entryBytes + entryBytes / 2;
  CompileCache cache(configFor(dir.path, bound));
  std::string got;
  for (int i = 0; i < 10; ++i) {
    fetch(cache, keyOf(std::to_string(i)), payload, &got);
    // Distinct mtimes, oldest first; entry 0 stays in use (a hit refreshes it).
    struct timespec t[2] = {{1000000 + i * 10, 0}, {1000000 + i * 10, 0}};
    ::utimensat(AT_FDCWD, cache.entryPath(keyOf(std::to_string(i))).c_str(), t, 0);
    if (i > 0) {
      std::string again;
      EXPECT_EQ(fetch(cache, keyOf("0"), payload, &again), CompileCache::Source::Disk) << i;
      struct timespec t0[2] = {{1000000 + i * 10 + 5, 0}, {1000000 + i * 10 + 5, 0}};
      ::utimensat(AT_FDCWD, cache.entryPath(keyOf("0")).c_str(), t0, 0);
    }
    auto info = CompileCache::inspect(dir.path, false);
    EXPECT_LE(static_cast<uint64_t>(info.bytes), bound) << i;
  }
  EXPECT_GT(cache.stats().evictions, 0);
  EXPECT_TRUE(fs::exists(cache.entryPath(keyOf("0"))));  // recently used
  EXPECT_TRUE(fs::exists(cache.entryPath(keyOf("9"))));  // newest
  EXPECT_FALSE(fs::exists(cache.entryPath(keyOf("1"))));  // least recently used
  // Lock files of evicted entries go too.
  EXPECT_LE(countFiles(dir.path, ".lock"), countFiles(dir.path, ".bin"));
}

TEST(CompileCache, PruneAndClear) {
  TempDir dir;
  CompileCache cache(configFor(dir.path));
  std::string got;
  for (int i = 0; i < 5; ++i) fetch(cache, keyOf(std::to_string(i)), "x", &got);
  writeAll(dir.path + "/unrelated.txt", "keep me");
  auto info = CompileCache::inspect(dir.path, true);
  EXPECT_EQ(info.entries, 5);
  int64_t one = info.bytes / 5;
  auto r = CompileCache::prune(dir.path, static_cast<uint64_t>(2 * one));
  EXPECT_EQ(r.removed, 3);
  EXPECT_EQ(r.remainingBytes, 2 * one);
  EXPECT_EQ(CompileCache::inspect(dir.path, false).entries, 2);
  EXPECT_EQ(CompileCache::clear(dir.path), 2);
  EXPECT_EQ(CompileCache::inspect(dir.path, false).entries, 0);
  EXPECT_TRUE(fs::exists(dir.path + "/unrelated.txt"));
}

TEST(CompileCache, RacingProducersCompileOnceAndLeaveOneValidEntry) {
  TempDir dir;
  constexpr int kN = 6;
  std::atomic<int> produced{0}, ready{0};
  std::vector<std::string> got(kN);
  std::vector<CompileCache::Source> sources(kN);
  std::vector<std::thread> threads;
  for (int t = 0; t < kN; ++t) {
    threads.emplace_back([&, t] {
      CompileCache cache(configFor(dir.path));  // one per "process"
      ++ready;
      while (ready < kN) std::this_thread::yield();
      sources[t] = cache.fetchOrProduce(
          keyOf("shared"), "op=test",
          [&](const std::string& payload, std::string*) { return got[t] = payload, true; },
          [&]() -> std::string {
            ++produced;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a slow compile
            return got[t] = "value:" + std::to_string(t);
          });
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(produced, 1);
  for (int t = 1; t < kN; ++t) EXPECT_EQ(got[t], got[0]);
  EXPECT_EQ(countFiles(dir.path, ".bin"), 1);
  auto info = CompileCache::inspect(dir.path, true);
  EXPECT_EQ(info.entries, 1);
  EXPECT_EQ(info.invalid, 0);
  EXPECT_EQ(info.tmpFiles, 0);
  EXPECT_EQ(info.lockFiles, 0);  // removed by their holders
}

// Write-behind (fetchOrProduceLater): the caller returns before its bytes are made; the key's lock is held
// until the entry is written, so a racing producer waits for it and loads it instead of compiling again.
TEST(CompileCache, WriteBehindHoldsTheKeyUntilWritten) {
  TempDir dir;
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> produced{0};
  CompileCache first(configFor(dir.path));
  EXPECT_EQ(first.fetchOrProduceLater(
                keyOf("k"), "op=test", [](const std::string&, std::string*) { return false; },
                [&]() -> std::function<std::string()> {
                  ++produced;
                  return [&] {  // a slow serialization, on the writer thread
                    std::unique_lock<std::mutex> l(m);
                    cv.wait(l, [&] { return release; });
                    return std::string("value:first");
                  };
                }),
            CompileCache::Source::Produced);
  EXPECT_EQ(countFiles(dir.path, ".bin"), 0);  // not written yet: the caller did not wait for it
  std::string got;
  std::thread second([&] {
    CompileCache other(configFor(dir.path));  // another "process"
    EXPECT_EQ(fetch(other, keyOf("k"), "second", &got, &produced), CompileCache::Source::Disk);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {
    std::lock_guard<std::mutex> l(m);
    release = true;
  }
  cv.notify_all();
  second.join();
  runtime::CacheWriter::global().drain();
  EXPECT_EQ(produced, 1);
  EXPECT_EQ(got, "value:first");
  EXPECT_EQ(CompileCache::inspect(dir.path, true).entries, 1);
  EXPECT_EQ(countFiles(dir.path, ".lock"), 0);
}

TEST(CompileCache, LockTimeoutCompilesAnyway) {
  TempDir dir;
  std::mutex m;
  std::condition_variable cv;
  bool inside = false, release = false;
  std::thread holder([&] {
    CompileCache cache(configFor(dir.path));
    cache.fetchOrProduce(
        keyOf("k"), "op=test", [](const std::string&, std::string*) { return false; },
        [&]() -> std::string {
          std::unique_lock<std::mutex> l(m);
          inside = true;
          cv.notify_all();
          cv.wait(l, [&] { return release; });
          return "value:holder";
        });
  });
  {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return inside; });
  }
  CompileCacheConfig c = configFor(dir.path);
  c.lockTimeoutSeconds = 0.2;
  CompileCache impatient(c);
  testing::internal::CaptureStderr();
  std::string got;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(fetch(impatient, keyOf("k"), "mine", &got), CompileCache::Source::Produced);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("compiling here"), std::string::npos) << err;
  EXPECT_EQ(impatient.stats().lockTimeouts, 1);
  {
    std::lock_guard<std::mutex> l(m);
    release = true;
  }
  cv.notify_all();
  holder.join();
  EXPECT_EQ(CompileCache::inspect(dir.path, true).entries, 1);
}

// --- with the test plugin: real executables ------------------------------------

TEST(CompileCache, ExecutablesRoundTripThroughTheDirectory) {
  auto& client = testRuntime().client();
  TempDir dir;
  const std::string mlir = R"(module {
  func.func public @main(%a: tensor<3xf32>) -> (tensor<3xf32>) {
    %0 = "stablehlo.multiply"(%a, %a) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    "func.return"(%0) : (tensor<3xf32>) -> ()
  }
})";
  float a[3] = {1, 2, 3};
  auto in = client.bufferFromHost(a, pjrt::ElementType::F32, {3}, 0);
  auto runIt = [&](const pjrt::Executable& exe) {
    auto outs = exe.execute({in->raw()}, client.devices()[0]);
    return toHost<float>(*outs[0], 3);
  };
  CompileCache first(configFor(dir.path));
  auto p1 = runtime::compileWithCache(client, mlir, pjrt::CompileOptions{}, "test::square", &first);
  EXPECT_TRUE(p1.compiled);
  EXPECT_EQ(runIt(*p1.exe), (std::vector<float>{1, 4, 9}));
  CompileCache second(configFor(dir.path));
  auto p2 = runtime::compileWithCache(client, mlir, pjrt::CompileOptions{}, "test::square", &second);
  EXPECT_FALSE(p2.compiled);
  EXPECT_EQ(second.stats().hits, 1);
  EXPECT_EQ(runIt(*p2.exe), (std::vector<float>{1, 4, 9}));
  // Other compile options: another key, compiled again.
  pjrt::CompileOptions other;
  other.deviceOrdinal = 0;
  auto p3 = runtime::compileWithCache(client, mlir, other, "test::square", &second);
  EXPECT_TRUE(p3.compiled);
  p3.exe.reset();  // the entry is written behind, from the writer's own reference
  runtime::CacheWriter::global().drain();
  EXPECT_EQ(CompileCache::inspect(dir.path, true).entries, 2);
  // The identity names the plugin precisely.
  const std::string& id = runtime::pluginIdentity(client);
  EXPECT_NE(id.find("platform=" + client.platformName()), std::string::npos);
  EXPECT_NE(id.find("plugin="), std::string::npos);
  EXPECT_NE(id.find(std::string("torch_tpu=") + runtime::kTorchTpuVersion), std::string::npos);
}
