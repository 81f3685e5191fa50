// Whose compile cache entries are loaded (CacheTrust): folders and entries
// other users can write are refused unless sealed with the team's key, and an
// entry whose seal does not verify never reaches the plugin.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "TempDir.h"
#include "csrc/runtime/CompileCache.h"

using namespace tpu;
using runtime::CacheKey;
using runtime::CacheTrust;
using runtime::CompileCache;
using runtime::CompileCacheConfig;
namespace fs = std::filesystem;

namespace {

CompileCacheConfig configFor(const std::string& dir, CacheTrust trust = {}) {
  CompileCacheConfig c;
  c.dir = dir;
  c.maxBytes = 0;
  c.lockTimeoutSeconds = 30;
  c.trust = std::move(trust);
  return c;
}

CacheTrust keyed(const std::string& key) {
  CacheTrust t;
  t.key = key;
  return t;
}

CacheKey keyOf(const std::string& s) { return runtime::compileCacheKey(s, "opts", "identity"); }

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// One fetch: the payload accepted ("" when the entry was not used) and whether it was produced here.
struct Fetched {
  std::string accepted;
  bool produced = false;
};
Fetched fetch(CompileCache& c, const CacheKey& key, const std::string& value) {
  Fetched r;
  c.fetchOrProduce(
      key, "op=test",
      [&](const std::string& payload, std::string*) {
        r.accepted = payload;
        return true;
      },
      [&]() -> std::string {
        r.produced = true;
        return "value:" + value;
      });
  return r;
}

std::string hex(const runtime::Sha256::Digest& d) { return runtime::Sha256::hex(d); }

}  // namespace

TEST(CacheTrust, HmacIsOpenSslsHmacSha256) {
  // RFC 4231, test case 2.
  EXPECT_EQ(hex(runtime::hmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(CacheTrust, OwnershipRule) {
  struct stat st {};
  st.st_uid = ::geteuid();
  st.st_mode = S_IFDIR | 0755;
  CacheTrust plain;
  EXPECT_EQ(plain.ownershipProblem(st), "");
  st.st_mode = S_IFDIR | 0775;
  EXPECT_NE(plain.ownershipProblem(st).find("writable by other users (mode 0775)"), std::string::npos);
  st.st_mode = S_IFDIR | 01777;  // sticky does not help: others may still plant entries for new keys
  EXPECT_NE(plain.ownershipProblem(st), "");
  st.st_mode = S_IFDIR | 0755;
  st.st_uid = ::geteuid() + 1;
  EXPECT_NE(plain.ownershipProblem(st).find("owned by uid"), std::string::npos);
  CacheTrust shared;
  shared.trustShared = true;
  EXPECT_EQ(shared.ownershipProblem(st), "");
  EXPECT_EQ(keyed("k").ownershipProblem(st), "");  // sealed entries: the seal decides, not the owner
}

TEST(CacheTrust, FolderWritableByOthersIsRefusedWithOneWarning) {
  TempDir dir;
  ::chmod(dir.path.c_str(), 0777);
  CompileCache cache(configFor(dir.path));
  testing::internal::CaptureStderr();
  for (const char* p : {"a", "b"}) {
    Fetched f = fetch(cache, keyOf(p), p);
    EXPECT_TRUE(f.produced);
  }
  std::string err = testing::internal::GetCapturedStderr();
  size_t first = err.find("not using the compile cache folder");
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("not using the compile cache folder", first + 1), std::string::npos) << err;
  EXPECT_NE(err.find("mode 0777"), std::string::npos) << err;
  EXPECT_FALSE(cache.usable());
  EXPECT_TRUE(fs::is_empty(dir.path));  // nothing written there either
  CompileCache optedIn(configFor(dir.path, [] {
    CacheTrust t;
    t.trustShared = true;
    return t;
  }()));
  EXPECT_TRUE(optedIn.usable());
}

TEST(CacheTrust, EntryWritableOrOwnedByOthersIsNeverLoaded) {
  TempDir dir;
  CompileCache writer(configFor(dir.path));
  ASSERT_TRUE(fetch(writer, keyOf("p"), "1").produced);
  const std::string path = writer.entryPath(keyOf("p"));
  ::chmod(path.c_str(), 0666);
  CompileCache reader(configFor(dir.path));
  testing::internal::CaptureStderr();
  Fetched f = fetch(reader, keyOf("p"), "2");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(f.produced);
  EXPECT_EQ(f.accepted, "");
  EXPECT_EQ(reader.stats().untrusted, 1);
  EXPECT_NE(err.find("never loaded"), std::string::npos) << err;
  if (::geteuid() == 0) {  // only root can hand a file to another user
    ::chmod(path.c_str(), 0644);
    ASSERT_EQ(::chown(path.c_str(), 12345, 12345), 0);
    CompileCache third(configFor(dir.path));
    testing::internal::CaptureStderr();
    Fetched g = fetch(third, keyOf("p"), "3");
    err = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(g.produced);
    EXPECT_EQ(third.stats().untrusted, 1);
    EXPECT_NE(err.find("owned by uid 12345"), std::string::npos) << err;
  }
  // What this process writes itself is 0644 whatever the umask.
  mode_t old = ::umask(0);
  CompileCache own(configFor(dir.path + "/sub"));
  fetch(own, keyOf("q"), "q");
  ::umask(old);
  struct stat st;
  ASSERT_EQ(::stat(own.entryPath(keyOf("q")).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(::stat((dir.path + "/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
}

TEST(CacheTrust, SealedEntriesLoadOnlyWithTheSameKey) {
  TempDir dir;
  ::chmod(dir.path.c_str(), 0777);  // a team folder: writable by the group and others
  CompileCache writer(configFor(dir.path, keyed("team secret")));
  ASSERT_TRUE(writer.usable());
  ASSERT_TRUE(fetch(writer, keyOf("p"), "1").produced);

  CompileCache same(configFor(dir.path, keyed("team secret")));
  Fetched f = fetch(same, keyOf("p"), "2");
  EXPECT_FALSE(f.produced);
  EXPECT_EQ(f.accepted, "value:1");

  CompileCache other(configFor(dir.path, keyed("another key")));
  testing::internal::CaptureStderr();
  f = fetch(other, keyOf("p"), "3");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(f.produced);
  EXPECT_EQ(f.accepted, "");
  EXPECT_EQ(other.stats().untrusted, 1);
  EXPECT_NE(err.find("seal mismatch"), std::string::npos) << err;
}

TEST(CacheTrust, ForgedEntriesInASharedFolderAreNeverLoaded) {
  TempDir dir;
  ::chmod(dir.path.c_str(), 0777);
  const CacheTrust team = keyed("team secret");
  // An unsigned entry with a valid checksum, planted by someone without the key.
  writeFile(CompileCache(configFor(dir.path, team)).entryPath(keyOf("p")),
            CompileCache::encodeEntry(keyOf("p"), "op=test", "value:forged"));
  // A genuinely sealed entry of another program, moved to this key's name with its header rewritten.
  std::string moved = CompileCache::encodeEntry(keyOf("other"), "op=test", "value:other", team);
  CacheKey k = keyOf("q");
  moved.replace(24, 32, reinterpret_cast<const char*>(k.data()), k.size());
  writeFile(CompileCache(configFor(dir.path, team)).entryPath(k), moved);

  CompileCache reader(configFor(dir.path, team));
  testing::internal::CaptureStderr();
  Fetched f = fetch(reader, keyOf("p"), "real");
  Fetched g = fetch(reader, k, "real q");
  testing::internal::GetCapturedStderr();
  EXPECT_TRUE(f.produced);
  EXPECT_TRUE(g.produced);
  EXPECT_EQ(f.accepted, "");
  EXPECT_EQ(g.accepted, "");
  EXPECT_EQ(reader.stats().untrusted, 2);
  // The replacements written over them are sealed and load.
  CompileCache again(configFor(dir.path, team));
  EXPECT_EQ(fetch(again, keyOf("p"), "x").accepted, "value:real");
  EXPECT_EQ(fetch(again, k, "x").accepted, "value:real q");
}
