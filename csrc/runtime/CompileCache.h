#pragma once
// The persistent tier of the compile cache: a directory of serialized
// executables shared by every process on the host (and, on a shared file
// system, by every host). Torch-free.
//
// Tier 1 (in memory, keyed by the integer op signature) lives in the Executor;
// this tier is consulted only on a tier-1 miss, with the program's text.
//
// Entry file <dir>/<sha256 hex>.bin: a fixed header (magic, format version,
// info and payload lengths, the full key, SHA-256 of info+payload), then the
// info text (op name, platform) and the payload (PJRT serialized executable).
// Written to a temporary file in the same directory and renamed into place;
// verified on every read. A truncated, garbled, foreign or unreadable entry is
// a miss (recompiled, replaced, one warning line on stderr), never loaded.
// A per-key lock file (<hex>.lock, flock; removed by its holder when done)
// lets one process compile while the others wait for its entry (up to a
// timeout, then they compile themselves).
// Entries are native code this process runs: CacheTrust.h says whose entries
// are loaded (this user's in a private folder, or sealed with the team's key).
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "CacheTrust.h"
#include "FunctionRef.h"
#include "Sha256.h"
#include "csrc/pjrt/Client.h"


namespace tpu::runtime {

// The torch_tpu version that is part of every key (must match torch_tpu.__version__).
inline constexpr const char* kTorchTpuVersion = "0.1.0";
inline constexpr uint32_t kCacheFormatVersion = 1;

using CacheKey = Sha256::Digest;

struct CompileCacheConfig {
  bool enabled = true;            // persistent tier on
  std::string dir;                // TORCH_TPU_CACHE_DIR or defaultDir()
  uint64_t maxBytes = 10ull << 30;  // TORCH_TPU_CACHE_MAX_BYTES; 0: no bound
  double lockTimeoutSeconds = 300;  // TORCH_TPU_CACHE_LOCK_TIMEOUT
  std::string note;               // why disabled, or a warning about a bad setting
  CacheTrust trust;               // whose entries are loaded (TORCH_TPU_CACHE_KEY_FILE, ..._TRUST_SHARED)

  // TORCH_TPU_CACHE (0/false/off/no disables), TORCH_TPU_CACHE_DIR,
  // TORCH_TPU_CACHE_MAX_BYTES (bytes, or with a K/M/G/T suffix), TORCH_TPU_CACHE_LOCK_TIMEOUT (s),
  // and CacheTrust::fromEnv().
  static CompileCacheConfig fromEnv();
  // $XDG_CACHE_HOME/torch_tpu, else ~/.cache/torch_tpu; "" when there is no home.
  static std::string defaultDir();
  // "123", "64K", "10G" (binary units); nullopt when malformed.
  static std::optional<uint64_t> parseBytes(std::string_view s);
};

struct CompileCacheStats {
  int64_t hits = 0;          // programs loaded from the directory
  int64_t misses = 0;        // programs not found there (then compiled)
  int64_t writes = 0;        // entries written
  int64_t writeBytes = 0;
  int64_t evictions = 0;     // entries removed to respect maxBytes
  int64_t corrupt = 0;       // truncated / garbled / foreign / unreadable / unloadable entries seen
  int64_t untrusted = 0;     // entries refused for who may have written them (owner, mode, seal)
  int64_t writeErrors = 0;
  int64_t lockWaits = 0;     // times this process waited for another one's compile
  int64_t lockTimeouts = 0;
  int64_t compiles = 0;      // programs produced (compiled), with or without the directory
  double compileSeconds = 0;
  double loadSeconds = 0;    // reading + verifying + loading entries
};

// What a directory holds (CLI `stats`, compile_cache_stats()).
struct CacheDirInfo {
  bool exists = false;
  int64_t entries = 0;       // *.bin files with a valid header
  int64_t bytes = 0;         // bytes of every *.bin file
  int64_t invalid = 0;       // *.bin files that are not valid entries (with verify: checksum too)
  int64_t tmpFiles = 0;
  int64_t lockFiles = 0;
  int64_t oldest = 0, newest = 0;  // mtimes (s since epoch) of the entries
  // "platform version / torch_tpu version" -> entries.
  std::vector<std::pair<std::string, int64_t>> groups;
};

struct PruneResult {
  int64_t removed = 0;
  int64_t removedBytes = 0;
  int64_t remainingBytes = 0;
};

class CompileCache {
 public:
  explicit CompileCache(CompileCacheConfig config);
  ~CompileCache();  // waits for its entries still being written behind
  // The process-wide instance; its configuration is read from the environment once.
  static CompileCache& global();

  const CompileCacheConfig& config() const { return config_; }
  bool enabled() const { return config_.enabled; }
  // Enabled, and the folder is one whose entries may be loaded (checked once; refused with one warning).
  bool usable();
  bool writable() const { return writable_.load(); }

  enum class Source { Disk, Produced };
  // The tier-2 protocol for one program: load the entry and hand it to
  // `accept` (false: it could not be used -> counted corrupt, recompiled); else
  // take the key's lock, look again (another process may just have written
  // it), else `produce` (compile; returns the bytes to store, "" to store
  // nothing) and store the result. With the tier disabled: just produce.
  Source fetchOrProduce(const CacheKey& key, std::string_view info,
                        FunctionRef<bool(const std::string& payload, std::string* why)> accept, FunctionRef<std::string()> produce);
  // The same, writing behind: `produce` returns a function that makes the bytes to store (empty: store
  // nothing), run on CacheWriter's thread with the key's lock held until the entry is written.
  Source fetchOrProduceLater(const CacheKey& key, std::string_view info,
                             FunctionRef<bool(const std::string& payload, std::string* why)> accept,
                             FunctionRef<std::function<std::string()>()> produce);

  // Building blocks (public for tests and tools).
  std::optional<std::string> load(const CacheKey& key);  // verified payload, or nullopt (miss)
  bool store(const CacheKey& key, std::string_view info, std::string_view payload);
  std::string entryPath(const CacheKey& key) const;

  CompileCacheStats stats() const;
  void resetStats();
  // Removes every entry of this cache's directory.
  int64_t clearDirectory();

  // Any directory (the CLI works on one without starting a plugin).
  static CacheDirInfo inspect(const std::string& dir, bool verify);
  // (entries, bytes) from the file names and sizes alone (opens nothing).
  static std::pair<int64_t, int64_t> usage(const std::string& dir);
  // Removes least-recently-used entries (oldest mtime; a hit refreshes it)
  // until at most maxBytes remain; also stale temporary and orphan lock files.
  static PruneResult prune(const std::string& dir, uint64_t maxBytes);
  static int64_t clear(const std::string& dir);
  // One entry file, serialized / parsed (the on-disk format).
  // `trust` seals it (a SHA-256 checksum, or the key's HMAC).
  static std::string encodeEntry(const CacheKey& key, std::string_view info, std::string_view payload,
                                 const CacheTrust& trust = {});
  // Empty optional + `why` when `bytes` is not a valid entry for `key` (sealed as `trust` seals).
  static std::optional<std::string> decodeEntry(const std::string& bytes, const CacheKey& key, std::string* why,
                                                std::string* info = nullptr, const CacheTrust& trust = {});

 private:
  class KeyLock;
  std::unique_ptr<KeyLock> lockKey(const CacheKey& key);
  Source fetchOrProduceImpl(const CacheKey& key, std::string_view info,
                            FunctionRef<bool(const std::string&, std::string*)> accept,
                            FunctionRef<std::function<std::string()>()> produce, bool writeBehind);
  bool ensureDirectory();
  void disableWrites(const std::string& why);
  void reportBadEntry(const CacheKey& key, const std::string& why, bool untrusted = false);
  // Refuses the folder when `st` says another user may write it.
  bool checkFolder(const struct stat& st);
  // compileCacheWarning, at most kMaxWarnings times (then says so once).
  void warn(const std::string& message);
  static constexpr int kMaxWarnings = 8;
  void afterWrite(int64_t bytes);

  CompileCacheConfig config_;
  std::atomic<bool> writable_{true};
  std::atomic<bool> dirReady_{false};
  std::atomic<int> folder_{0};  // 0: not checked yet, 1: trusted, 2: refused
  std::mutex mutex_;
  std::set<CacheKey> reported_;
  std::atomic<int> warnings_{0};
  int64_t accountedBytes_ = -1;  // bytes in the directory as last scanned + written since; -1: not scanned
  mutable std::mutex statsMutex_;
  CompileCacheStats stats_;
};

// Prints one "[torch_tpu] warning: ..." line on stderr.
void compileCacheWarning(const std::string& message);

// The key: module text, compile options bytes, the identity of what compiles
// (plugin, device kind, PJRT API version, host CPU for the CPU plugin), the
// torch_tpu version and the cache format version.
CacheKey compileCacheKey(std::string_view module, std::string_view options, std::string_view identity);
// Everything about `client` that changes the compiled binary (computed once per client).
const std::string& pluginIdentity(const pjrt::Client& client);

// The Executor's hook: an executable for `module`, from the directory or compiled.
struct CompiledProgram {
  std::shared_ptr<pjrt::Executable> exe;  // shared: a pending cache write (CacheWriter) holds it too
  bool compiled = false;  // false: loaded from the directory
  double seconds = 0;     // compile (or load) time
};
CompiledProgram compileWithCache(const pjrt::Client& client, const std::string& module,
                                 const pjrt::CompileOptions& options, const char* opName,
                                 CompileCache* cache = nullptr /* CompileCache::global() */);

}  // namespace tpu::runtime
