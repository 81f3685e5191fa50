#include "CompileCache.h"

#include "CacheWriter.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>
#include <vector>


namespace tpu::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// Header: magic[8] version u32 infoLen u32 payloadLen u64 key[32] checksum[32], little-endian.
constexpr char kMagic[8] = {'T', 'P', 'U', 'X', 'C', 'A', 'C', 'H'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 32 + 32;
constexpr std::string_view kEntrySuffix = ".bin";
constexpr std::string_view kLockSuffix = ".lock";
constexpr std::string_view kTmpPrefix = ".tmp-";
constexpr int64_t kStaleTmpSeconds = 3600;  // a writer that died mid-write

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void putU32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
}
void putU64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t getLE(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "<64 hex digits><suffix>"
bool isKeyFile(std::string_view name, std::string_view suffix) {
  if (name.size() != 64 + suffix.size() || !endsWith(name, suffix)) return false;
  for (size_t i = 0; i < 64; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(name[i])) || std::isupper(static_cast<unsigned char>(name[i])))
      return false;
  return true;
}

CacheKey keyFromHex(std::string_view hex) {
  CacheKey k{};
  auto nib = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(nib(hex[2 * i]) << 4 | nib(hex[2 * i + 1]));
  return k;
}

struct Header {
  uint32_t version = 0;
  uint64_t infoLen = 0, payloadLen = 0;
};

// Checks everything but the checksum; `fileSize` is the whole file's size.
bool parseHeader(const char* p, size_t n, uint64_t fileSize, const CacheKey& key, Header* h, std::string* why) {
  if (fileSize == 0) return *why = "empty file", false;
  if (n < kHeaderSize) return *why = "truncated header (" + std::to_string(fileSize) + " bytes)", false;
  if (std::memcmp(p, kMagic, 8) != 0) return *why = "not a torch_tpu compile cache entry (bad magic)", false;
  h->version = static_cast<uint32_t>(getLE(p + 8, 4));
  h->infoLen = getLE(p + 12, 4);
  h->payloadLen = getLE(p + 16, 8);
  if (h->version != kCacheFormatVersion)
    return *why = "format version " + std::to_string(h->version) + " (expected " +
                  std::to_string(kCacheFormatVersion) + ")",
           false;
  if (h->payloadLen > fileSize || kHeaderSize + h->infoLen + h->payloadLen != fileSize)
    return *why = "truncated or padded (the header announces " +
                  std::to_string(kHeaderSize + h->infoLen + h->payloadLen) + " bytes, the file has " +
                  std::to_string(fileSize) + ")",
           false;
  if (std::memcmp(p + 24, key.data(), key.size()) != 0) return *why = "holds a different key", false;
  return true;
}

// Reads a whole regular file. missing: it does not exist (a plain miss).
// st: the opened file's owner and mode (who may have written it).
bool readFile(const std::string& path, std::string* out, std::string* why, bool* missing, size_t limit = SIZE_MAX,
              struct stat* opened = nullptr) {
  *missing = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) *missing = true;
    *why = std::strerror(e);
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    *why = "not a regular file";
    return false;
  }
  if (opened) *opened = st;
  size_t want = std::min(static_cast<size_t>(st.st_size), limit);
  out->resize(want);
  size_t got = 0;
  while (got < want) {
    ssize_t r = ::read(fd, out->data() + got, want - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *why = std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  out->resize(got);
  return true;
}

bool writeAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    if (w == 0) return errno = ENOSPC, false;
    done += static_cast<size_t>(w);
  }
  return true;
}

struct DirFile {
  std::string name;
  int64_t size = 0;
  int64_t mtimeNs = 0;
};

std::vector<DirFile> listDir(const std::string& dir, bool* exists) {
  std::vector<DirFile> files;
  DIR* d = ::opendir(dir.c_str());
  *exists = d != nullptr;
  if (!d) return files;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // removed meanwhile
    files.push_back({name, static_cast<int64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  ::closedir(d);
  return files;
}

// Removes a lock file nobody holds (holders re-check the inode after locking).
bool removeIdleLock(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return ::unlink(path.c_str()) == 0;
  bool removed = false;
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) removed = ::unlink(path.c_str()) == 0;
  ::close(fd);
  return removed;
}

// Errors after which the directory is no use for writing at all.
bool directoryWideError(int e) {
  return e == EROFS || e == EACCES || e == EPERM || e == ENOSPC || e == EDQUOT || e == EFBIG || e == ENOTDIR;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string infoField(const std::string& info, const std::string& name) {
  size_t pos = 0;
  while (pos < info.size()) {
    size_t end = info.find('\n', pos);
    if (end == std::string::npos) end = info.size();
    std::string_view line(info.data() + pos, end - pos);
    if (line.size() > name.size() && line.substr(0, name.size()) == name && line[name.size()] == '=')
      return std::string(line.substr(name.size() + 1));
    pos = end + 1;
  }
  return "?";
}

}  // namespace

// --- configuration ----------------------------------------------------------

std::optional<uint64_t> CompileCacheConfig::parseBytes(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  size_t i = 0;
  uint64_t v = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  if (i == 0) return std::nullopt;
  std::string unit = lower(std::string(s.substr(i)));
  int shift = 0;
  if (!unit.empty()) {
    const std::string units = "kmgt";
    size_t u = units.find(unit[0]);
    std::string rest = unit.substr(u == std::string::npos ? 0 : 1);
    if (u != std::string::npos) shift = 10 * static_cast<int>(u + 1);
    if (!(rest.empty() || rest == "b" || rest == "ib")) return std::nullopt;
    if (u == std::string::npos && rest != "b") return std::nullopt;
  }
  if (shift && v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

std::string CompileCacheConfig::defaultDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/torch_tpu";
  const char* home = std::getenv("HOME");
  std::string h = home && home[0] == '/' ? home : "";
  if (h.empty())
    if (passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir && pw->pw_dir[0] == '/') h = pw->pw_dir;
  return h.empty() ? "" : h + "/.cache/torch_tpu";
}

CompileCacheConfig CompileCacheConfig::fromEnv() {
  CompileCacheConfig c;
  if (const char* on = std::getenv("TORCH_TPU_CACHE")) {
    std::string v = lower(on);
    if (v == "0" || v == "false" || v == "off" || v == "no") {
      c.enabled = false;
      c.note = "disabled by TORCH_TPU_CACHE=" + std::string(on);
    }
  }
  const char* dir = std::getenv("TORCH_TPU_CACHE_DIR");
  c.dir = dir && dir[0] ? dir : defaultDir();
  while (c.dir.size() > 1 && c.dir.back() == '/') c.dir.pop_back();
  if (c.dir.empty() && c.enabled) {
    c.enabled = false;
    c.note = "disabled: no cache folder (set TORCH_TPU_CACHE_DIR or HOME)";
  }
  if (const char* mb = std::getenv("TORCH_TPU_CACHE_MAX_BYTES"); mb && mb[0]) {
    if (auto v = parseBytes(mb))
      c.maxBytes = *v;
    else
      c.note = "ignoring TORCH_TPU_CACHE_MAX_BYTES=" + std::string(mb) +
               " (expected bytes, e.g. 1000000 or 10G; 0 for no bound)";
  }
  if (const char* t = std::getenv("TORCH_TPU_CACHE_LOCK_TIMEOUT"); t && t[0]) {
    char* end = nullptr;
    double v = std::strtod(t, &end);
    if (end && *end == 0 && v >= 0)
      c.lockTimeoutSeconds = v;
    else
      c.note = "ignoring TORCH_TPU_CACHE_LOCK_TIMEOUT=" + std::string(t) + " (expected seconds)";
  }
  c.trust = CacheTrust::fromEnv();
  if (!c.trust.error.empty() && c.enabled) {
    c.enabled = false;
    c.note = c.trust.error;
  }
  return c;
}

void compileCacheWarning(const std::string& message) { std::cerr << "[torch_tpu] warning: " << message << "\n"; }

// --- the cache --------------------------------------------------------------

// Held while compiling one key. The holder removes the lock file before it
// lets go, so no lock files pile up; a waiter that then gets the removed file
// notices (lockKey compares inodes) and starts over with the current one.
class CompileCache::KeyLock {
 public:
  KeyLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~KeyLock() {
    ::unlink(path_.c_str());
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  int fd_;
  std::string path_;
};

CompileCache::CompileCache(CompileCacheConfig config) : config_(std::move(config)) {}

CompileCache::~CompileCache() { CacheWriter::global().drain(); }

void CompileCache::warn(const std::string& message) {
  int n = warnings_++;
  if (n < kMaxWarnings)
    compileCacheWarning(message);
  else if (n == kMaxWarnings)
    compileCacheWarning("further compile cache warnings are suppressed (see torch.tpu.compile_cache_stats())");
}

CompileCache& CompileCache::global() {
  static CompileCache* cache = [] {
    auto* c = new CompileCache(CompileCacheConfig::fromEnv());  // lives for the process
    if ((c->config_.enabled || !c->config_.trust.error.empty()) && !c->config_.note.empty())
      compileCacheWarning(c->config_.note);
    return c;
  }();
  return *cache;
}

std::string CompileCache::entryPath(const CacheKey& key) const {
  return config_.dir + "/" + Sha256::hex(key) + std::string(kEntrySuffix);
}

void CompileCache::disableWrites(const std::string& why) {
  if (writable_.exchange(false))
    warn("the compile cache directory " + config_.dir + " is not usable for writing (" + why +
         "): compiled programs stay in memory only (existing entries are still read)");
}

bool CompileCache::ensureDirectory() {
  if (dirReady_.load()) return true;
  if (!writable_.load()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (dirReady_.load()) return true;
  // mkdir -p
  for (size_t pos = 1; pos <= config_.dir.size(); ++pos) {
    if (pos != config_.dir.size() && config_.dir[pos] != '/') continue;
    std::string prefix = config_.dir.substr(0, pos);
    // 0755: a umask of 002 must not make the folder writable by the group (CacheTrust).
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      int e = errno;
      struct stat st;
      if (::stat(prefix.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;  // exists, e.g. EACCES on mkdir
      disableWrites("cannot create " + prefix + ": " + std::strerror(e));
      return false;
    }
  }
  struct stat st;
  if (::stat(config_.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    disableWrites(config_.dir + " is not a directory");
    return false;
  }
  if (!checkFolder(st)) return false;
  dirReady_ = true;
  return true;
}

bool CompileCache::checkFolder(const struct stat& st) {
  std::string why = config_.trust.ownershipProblem(st);
  if (why.empty()) return true;
  if (folder_.exchange(2) != 2) {
    writable_ = false;
    warn("not using the compile cache folder " + config_.dir + ": it is " + why +
         ". Its entries are native code this process would run, so compiled programs stay in memory. Use a "
         "folder of your own (TORCH_TPU_CACHE_DIR), `chmod go-w` it, seal a shared folder's entries with a team "
         "key (TORCH_TPU_CACHE_KEY_FILE), or accept it with TORCH_TPU_CACHE_TRUST_SHARED=1");
  }
  return false;
}

bool CompileCache::usable() {
  if (!enabled()) return false;
  int state = folder_.load();
  if (state) return state == 1;
  struct stat st;
  if (::stat(config_.dir.c_str(), &st) != 0) return true;  // not there yet: ensureDirectory creates and checks it
  if (!checkFolder(st)) return false;
  folder_ = 1;
  return true;
}

void CompileCache::reportBadEntry(const CacheKey& key, const std::string& why, bool untrusted) {
  {
    std::lock_guard<std::mutex> lock(statsMutex_);
    ++stats_.corrupt;
    stats_.untrusted += untrusted;
  }
  bool first;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first = reported_.insert(key).second;
  }
  if (first) warn("ignoring compile cache entry " + why + "; recompiling and replacing it");
}

std::optional<std::string> CompileCache::load(const CacheKey& key) {
  if (!usable()) return std::nullopt;
  std::string path = entryPath(key), bytes, why;
  bool missing = false;
  struct stat st;
  if (!readFile(path, &bytes, &why, &missing, SIZE_MAX, &st)) {
    if (!missing) reportBadEntry(key, path + " (unreadable: " + why + ")");
    return std::nullopt;
  }
  // Checked on the opened file: a name swapped after the check cannot slip in.
  if (std::string owner = config_.trust.ownershipProblem(st); !owner.empty()) {
    reportBadEntry(key, path + " (" + owner + ": never loaded)", true);
    return std::nullopt;
  }
  std::optional<std::string> payload = decodeEntry(bytes, key, &why, nullptr, config_.trust);
  if (!payload) {
    reportBadEntry(key, path + " (" + why + ")", config_.trust.signs() && why.rfind("seal", 0) == 0);
    return std::nullopt;
  }
  // Least-recently-used eviction goes by mtime: a hit refreshes it (best effort).
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  return payload;
}

std::string CompileCache::encodeEntry(const CacheKey& key, std::string_view info, std::string_view payload,
                                      const CacheTrust& trust) {
  std::string out;
  out.reserve(kHeaderSize + info.size() + payload.size());
  out.append(kMagic, 8);
  putU32(out, kCacheFormatVersion);
  putU32(out, static_cast<uint32_t>(info.size()));
  putU64(out, payload.size());
  out.append(reinterpret_cast<const char*>(key.data()), key.size());
  out.append(32, '\0');  // the seal, over what follows
  out.append(info);
  out.append(payload);
  Sha256::Digest seal = trust.seal(key, std::string_view(out).substr(kHeaderSize));
  out.replace(56, 32, reinterpret_cast<const char*>(seal.data()), seal.size());
  return out;
}

std::optional<std::string> CompileCache::decodeEntry(const std::string& bytes, const CacheKey& key,
                                                     std::string* why, std::string* info, const CacheTrust& trust) {
  Header h;
  if (!parseHeader(bytes.data(), bytes.size(), bytes.size(), key, &h, why)) return std::nullopt;
  std::string_view body(bytes.data() + kHeaderSize, h.infoLen + h.payloadLen);
  Sha256::Digest seal = trust.seal(key, body);
  if (std::memcmp(seal.data(), bytes.data() + 56, 32) != 0)
    return *why = trust.signs() ? "seal mismatch: not sealed with this cache key (TORCH_TPU_CACHE_KEY_FILE), or altered"
                                : "checksum mismatch",
           std::nullopt;
  if (info) *info = std::string(body.substr(0, h.infoLen));
  return std::string(body.substr(h.infoLen));
}

bool CompileCache::store(const CacheKey& key, std::string_view info, std::string_view payload) {
  if (!usable() || !writable_.load() || !ensureDirectory()) return false;
  std::string bytes = encodeEntry(key, info, payload, config_.trust);
  if (config_.maxBytes && bytes.size() > config_.maxBytes) return false;  // larger than the whole cache
  static std::atomic<uint64_t> counter{0};
  std::string hex = Sha256::hex(key);
  std::string tmp = config_.dir + "/" + std::string(kTmpPrefix) + hex.substr(0, 16) + "-" +
                    std::to_string(::getpid()) + "-" + std::to_string(counter++);
  std::string path = entryPath(key);
  auto fail = [&](const char* what, int e) {
    if (directoryWideError(e)) {
      disableWrites(std::string(what) + ": " + std::strerror(e));
    } else {
      {
        std::lock_guard<std::mutex> lock(statsMutex_);
        ++stats_.writeErrors;
      }
      if (e == ENOENT) dirReady_ = false;  // the directory was removed: recreate it next time
      warn("could not write compile cache entry " + path + " (" + what + ": " + std::strerror(e) + ")");
    }
    return false;
  };
  // No fsync: after a power loss a renamed entry may be incomplete, which the
  // length and checksum checks turn into a miss.
  // 0644: writable by this user only, whatever the umask (CacheTrust reads no group-writable entry).
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail("create", errno);
  if (!writeAll(fd, bytes)) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail("write", e);
  }
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return fail("close", e);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    // Something that is not an entry took the entry's name (e.g. a directory).
    if ((e == EISDIR || e == ENOTEMPTY || e == EEXIST) && ::rmdir(path.c_str()) == 0 &&
        ::rename(tmp.c_str(), path.c_str()) == 0) {
      e = 0;
    }
    if (e) {
      ::unlink(tmp.c_str());
      return fail("rename", e);
    }
  }
  {
    std::lock_guard<std::mutex> lock(statsMutex_);
    ++stats_.writes;
    stats_.writeBytes += static_cast<int64_t>(bytes.size());
  }
  afterWrite(static_cast<int64_t>(bytes.size()));
  return true;
}

void CompileCache::afterWrite(int64_t bytes) {
  if (!config_.maxBytes) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (accountedBytes_ < 0) {
    bool exists;
    accountedBytes_ = 0;
    for (const DirFile& f : listDir(config_.dir, &exists))
      if (isKeyFile(f.name, kEntrySuffix)) accountedBytes_ += f.size;
  } else {
    accountedBytes_ += bytes;
  }
  if (accountedBytes_ <= static_cast<int64_t>(config_.maxBytes)) return;
  // Other processes write too: prune rescans. Leave some room so that a full
  // cache does not rescan on every write.
  PruneResult r = prune(config_.dir, config_.maxBytes - config_.maxBytes / 10);
  accountedBytes_ = r.remainingBytes;
  std::lock_guard<std::mutex> s(statsMutex_);
  stats_.evictions += r.removed;
}

std::unique_ptr<CompileCache::KeyLock> CompileCache::lockKey(const CacheKey& key) {
  if (!writable_.load() || !ensureDirectory()) return nullptr;
  std::string path = config_.dir + "/" + Sha256::hex(key) + std::string(kLockSuffix);
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(config_.lockTimeoutSeconds));
  bool waited = false;
  int sleepUs = 200;
  for (;;) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
      int e = errno;
      if (directoryWideError(e)) disableWrites("create " + path + ": " + std::strerror(e));
      return nullptr;  // compile without the lock
    }
    for (;;) {
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
        // prune may have removed the file meanwhile: the lock must be on the current one.
        struct stat held, now;
        if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
            held.st_dev == now.st_dev)
          return std::make_unique<KeyLock>(fd, path);
        break;  // reopen
      }
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK) {  // no locks on this file system: go without
        ::close(fd);
        return nullptr;
      }
      if (!waited) {
        waited = true;
        std::lock_guard<std::mutex> lock(statsMutex_);
        ++stats_.lockWaits;
      }
      if (Clock::now() >= deadline) {
        ::close(fd);
        {
          std::lock_guard<std::mutex> lock(statsMutex_);
          ++stats_.lockTimeouts;
        }
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", config_.lockTimeoutSeconds);
        warn("waited " + std::string(secs) + " s for " + path +
             " (another process compiling the same program): compiling here");
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
      sleepUs = std::min(sleepUs * 2, 20000);
    }
    ::close(fd);
  }
}

CompileCache::Source CompileCache::fetchOrProduce(const CacheKey& key, std::string_view info,
                                                  FunctionRef<bool(const std::string&, std::string*)> accept,
                                                  FunctionRef<std::string()> produce) {
  return fetchOrProduceImpl(key, info, accept, [&]() -> std::function<std::string()> {
    std::string bytes = produce();
    if (bytes.empty()) return {};
    return [bytes = std::move(bytes)] { return bytes; };
  }, /*writeBehind=*/false);
}

CompileCache::Source CompileCache::fetchOrProduceLater(
    const CacheKey& key, std::string_view info, FunctionRef<bool(const std::string&, std::string*)> accept,
    FunctionRef<std::function<std::string()>()> produce) {
  return fetchOrProduceImpl(key, info, accept, produce, /*writeBehind=*/true);
}

CompileCache::Source CompileCache::fetchOrProduceImpl(
    const CacheKey& key, std::string_view info, FunctionRef<bool(const std::string&, std::string*)> accept,
    FunctionRef<std::function<std::string()>()> produce, bool writeBehind) {
  const bool persistent = usable();
  auto produceAndStore = [&](std::shared_ptr<KeyLock> lock) {
    auto t0 = Clock::now();
    std::function<std::string()> bytesLater = produce();
    double secs = since(t0);
    {
      std::lock_guard<std::mutex> guard(statsMutex_);
      ++stats_.compiles;
      stats_.compileSeconds += secs;
      if (persistent) ++stats_.misses;
    }
    if (!persistent || !bytesLater) return Source::Produced;
    // The key's lock is held until the entry is written: another process waiting for it loads the entry
    // rather than compiling the program again.
    auto write = [this, key, info = std::string(info), bytesLater = std::move(bytesLater), lock = std::move(lock)] {
      std::string bytes = bytesLater();
      if (!bytes.empty()) store(key, info, bytes);
    };
    if (writeBehind)
      CacheWriter::global().post(std::move(write));
    else
      write();
    return Source::Produced;
  };
  if (!persistent) return produceAndStore(nullptr);
  auto tryLoad = [&]() {
    auto t0 = Clock::now();
    std::optional<std::string> payload = load(key);
    bool ok = false;
    if (payload) {
      std::string why = "the plugin could not load it";
      ok = accept(*payload, &why);
      if (!ok) reportBadEntry(key, entryPath(key) + " (" + why + ")");
    }
    std::lock_guard<std::mutex> lock(statsMutex_);
    stats_.loadSeconds += since(t0);
    if (ok) ++stats_.hits;
    return ok;
  };
  // What the first look finds, so that a bad entry is not reported twice (a
  // replacement is renamed into place: it always has another inode).
  std::string path = entryPath(key);
  struct stat before;
  bool had = ::stat(path.c_str(), &before) == 0;
  if (tryLoad()) return Source::Disk;
  std::shared_ptr<KeyLock> lock = lockKey(key);
  // Another process may have written the entry while we waited for its lock
  // (or just before we took it).
  if (lock) {
    struct stat now;
    if (::stat(path.c_str(), &now) == 0 &&
        (!had || now.st_ino != before.st_ino || now.st_dev != before.st_dev) && tryLoad())
      return Source::Disk;
  }
  return produceAndStore(std::move(lock));
}

CompileCacheStats CompileCache::stats() const {
  std::lock_guard<std::mutex> lock(statsMutex_);
  return stats_;
}

void CompileCache::resetStats() {
  std::lock_guard<std::mutex> lock(statsMutex_);
  stats_ = CompileCacheStats{};
}

int64_t CompileCache::clearDirectory() {
  int64_t n = clear(config_.dir);
  std::lock_guard<std::mutex> lock(mutex_);
  accountedBytes_ = -1;
  reported_.clear();
  return n;
}

// --- directory tools ----------------------------------------------------------

CacheDirInfo CompileCache::inspect(const std::string& dir, bool verify) {
  CacheDirInfo info;
  const CacheTrust trust = verify ? CacheTrust::fromEnv() : CacheTrust{};
  std::map<std::string, int64_t> groups;
  for (const DirFile& f : listDir(dir, &info.exists)) {
    if (isKeyFile(f.name, kLockSuffix)) {
      ++info.lockFiles;
      continue;
    }
    if (f.name.rfind(kTmpPrefix, 0) == 0) {
      ++info.tmpFiles;
      continue;
    }
    if (!isKeyFile(f.name, kEntrySuffix)) continue;  // not ours
    info.bytes += f.size;
    CacheKey key = keyFromHex(f.name);
    std::string bytes, why, text;
    bool missing;
    bool ok = readFile(dir + "/" + f.name, &bytes, &why, &missing, verify ? SIZE_MAX : kHeaderSize + 1024);
    if (ok && verify) {
      ok = decodeEntry(bytes, key, &why, &text, trust).has_value();
    } else if (ok) {
      Header h;
      ok = parseHeader(bytes.data(), bytes.size(), static_cast<uint64_t>(f.size), key, &h, &why);
      if (ok) text = bytes.substr(kHeaderSize, std::min<size_t>(h.infoLen, bytes.size() - kHeaderSize));
    }
    if (!ok) {
      if (!missing) ++info.invalid;
      continue;
    }
    ++info.entries;
    int64_t mtime = f.mtimeNs / 1000000000;
    info.oldest = info.oldest ? std::min(info.oldest, mtime) : mtime;
    info.newest = std::max(info.newest, mtime);
    ++groups["platform " + infoField(text, "platform") + " (version " + infoField(text, "platform_version") +
             "), torch_tpu " + infoField(text, "torch_tpu")];
  }
  info.groups.assign(groups.begin(), groups.end());
  return info;
}

std::pair<int64_t, int64_t> CompileCache::usage(const std::string& dir) {
  bool exists;
  int64_t n = 0, bytes = 0;
  for (const DirFile& f : listDir(dir, &exists))
    if (isKeyFile(f.name, kEntrySuffix)) ++n, bytes += f.size;
  return {n, bytes};
}

PruneResult CompileCache::prune(const std::string& dir, uint64_t maxBytes) {
  PruneResult r;
  bool exists;
  std::vector<DirFile> files = listDir(dir, &exists);
  int64_t nowNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  std::vector<DirFile> entries;
  std::set<std::string> kept;
  for (const DirFile& f : files) {
    if (isKeyFile(f.name, kEntrySuffix)) {
      entries.push_back(f);
      r.remainingBytes += f.size;
    } else if (f.name.rfind(kTmpPrefix, 0) == 0 && nowNs - f.mtimeNs > kStaleTmpSeconds * 1000000000ll) {
      ::unlink((dir + "/" + f.name).c_str());
    }
  }
  std::sort(entries.begin(), entries.end(), [](const DirFile& a, const DirFile& b) {
    return a.mtimeNs != b.mtimeNs ? a.mtimeNs < b.mtimeNs : a.name < b.name;
  });
  for (const DirFile& f : entries) {
    if (r.remainingBytes > static_cast<int64_t>(maxBytes) && ::unlink((dir + "/" + f.name).c_str()) == 0) {
      ++r.removed;
      r.removedBytes += f.size;
      r.remainingBytes -= f.size;
    } else {
      kept.insert(f.name.substr(0, 64));
    }
  }
  // Lock files of entries that are gone, unless someone holds them.
  for (const DirFile& f : files)
    if (isKeyFile(f.name, kLockSuffix) && !kept.count(f.name.substr(0, 64))) removeIdleLock(dir + "/" + f.name);
  return r;
}

int64_t CompileCache::clear(const std::string& dir) {
  int64_t removed = 0;
  bool exists;
  for (const DirFile& f : listDir(dir, &exists)) {
    std::string path = dir + "/" + f.name;
    if (isKeyFile(f.name, kEntrySuffix)) {
      removed += ::unlink(path.c_str()) == 0;
    } else if (f.name.rfind(kTmpPrefix, 0) == 0) {
      ::unlink(path.c_str());
    } else if (isKeyFile(f.name, kLockSuffix)) {
      removeIdleLock(path);
    }
  }
  return removed;
}

}  // namespace tpu::runtime
