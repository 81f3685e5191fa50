// The compile cache's keys and the Executor's hook into it (compileWithCache):
// what identifies a compiled program, and compile-or-load with tracing and logs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>

#include "CompileCache.h"
#include "DeviceTrace.h"
#include "PrecisionCost.h"
#include "csrc/pjrt/CompileOptions.h"

namespace tpu::runtime {
namespace {

using Clock = std::chrono::steady_clock;

bool logCache() {
  static const bool on = [] {
    const char* e = std::getenv("TORCH_TPU_LOG");
    return e && (std::strstr(e, "cache") || std::strstr(e, "all"));
  }();
  return on;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

CacheKey compileCacheKey(std::string_view module, std::string_view options, std::string_view identity) {
  return Sha256()
      .field("torch_tpu compile cache")
      .field(std::to_string(kCacheFormatVersion))
      .field(kTorchTpuVersion)
      .field(identity)
      .field(options)
      .field(module)
      .finish();
}

namespace {

// The plugin binary: its size and the SHA-256 of its first and last 256 KiB
// (platform version strings are not always specific, e.g. "cpu"; hashing the
// whole library would cost a noticeable fraction of a warm start).
std::string pluginFingerprint(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "unreadable " + path;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return "unreadable " + path;
  }
  constexpr size_t kChunk = 256 * 1024;
  Sha256 h;
  h.field(std::to_string(st.st_size));
  std::string buf(kChunk, '\0');
  off_t size = st.st_size;
  for (off_t at : {static_cast<off_t>(0), size > static_cast<off_t>(kChunk) ? size - static_cast<off_t>(kChunk) : 0}) {
    ssize_t r = ::pread(fd, buf.data(), kChunk, at);
    if (r > 0) h.update(buf.data(), static_cast<size_t>(r));
  }
  ::close(fd);
  return std::to_string(st.st_size) + " bytes, " + Sha256::hex(h.finish()).substr(0, 32);
}

// XLA:CPU compiles for the host's instruction set: entries must not travel to a different CPU.
std::string hostCpuFeatures() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return "unknown";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  for (const char* field : {"vendor_id", "flags", "Features", "CPU implementer", "CPU part"}) {
    size_t pos = text.find(std::string("\n") + field);
    if (text.rfind(field, 0) == 0) pos = 0;
    if (pos == std::string::npos) continue;
    size_t end = text.find('\n', pos + 1);
    out += text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  }
  return out.empty() ? "unknown" : Sha256::hex(Sha256::hash(out)).substr(0, 32);
}

}  // namespace

const std::string& pluginIdentity(const pjrt::Client& client) {
  static std::mutex mutex;
  static std::map<const pjrt::Client*, std::string> known;
  std::lock_guard<std::mutex> lock(mutex);
  std::string& id = known[&client];
  if (!id.empty()) return id;
  std::string kind;
  try {
    kind = client.deviceKind(0);
  } catch (const std::exception&) {
    kind = "?";
  }
  id = std::string("torch_tpu=") + kTorchTpuVersion + "\nplatform=" + client.platformName() +
       "\nplatform_version=" + client.platformVersion() + "\npjrt_api=" +
       std::to_string(client.plugin().apiMajor()) + "." + std::to_string(client.plugin().apiMinor()) +
       "\ndevice_kind=" + kind + "\nplugin=" + pluginFingerprint(client.plugin().path());
  if (client.platformName() == "cpu") id += "\nhost_cpu=" + hostCpuFeatures();
  // Flags the plugins read from the environment change what they compile.
  for (const char* var : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"})
    if (const char* v = std::getenv(var)) id += std::string("\n") + var + "=" + v;
  return id;
}

CompiledProgram compileWithCache(const pjrt::Client& client, const std::string& module,
                                 const pjrt::CompileOptions& options, const char* opName, CompileCache* c) {
  CompileCache& cache = c ? *c : CompileCache::global();
  warnDotPrecisionCostOnce(client.platformName(), module);
  CompiledProgram out;
  CacheKey key{};
  std::string info;
  if (cache.enabled()) {
    key = compileCacheKey(module, pjrt::encodeCompileOptions(options), pluginIdentity(client));
    info = std::string("op=") + opName + "\nplatform=" + client.platformName() +
           "\nplatform_version=" + client.platformVersion() + "\ntorch_tpu=" + kTorchTpuVersion;
  }
  auto t0 = Clock::now();
  CompileCache::Source source = cache.fetchOrProduceLater(
      key, info,
      [&](const std::string& payload, std::string* why) {
        try {
          out.exe = client.deserialize(payload);
          return true;
        } catch (const std::exception& e) {
          *why = std::string("the plugin could not load it: ") + e.what();
          return false;
        }
      },
      [&]() -> std::function<std::string()> {
        out.exe = client.compile(module, options);
        if (!cache.enabled()) return {};
        // Serialized on the cache's writer thread (for XLA:CPU it costs more than the compile itself), which
        // holds the executable until then: the caller may drop it first.
        return [exe = out.exe]() -> std::string {
          try {
            return exe->serialize();
          } catch (const std::exception& e) {
            static std::atomic<bool> warned{false};
            if (!warned.exchange(true))
              compileCacheWarning(std::string("the plugin cannot serialize executables (") + e.what() +
                                  "): the persistent compile cache stays empty");
            return {};
          }
        };
      });
  out.compiled = source == CompileCache::Source::Produced;
  out.seconds = since(t0);
  if (trace::enabled()) {
    int64_t end = trace::nowNs();
    trace::span(trace::Kind::Compile, std::string(out.compiled ? "compile " : "load from cache ") + opName, -1,
                end - static_cast<int64_t>(out.seconds * 1e9), end);
  }
  if (logCache()) {
    std::string where = !cache.enabled()          ? "persistent tier off, compiled"
                        : out.compiled            ? "disk miss, compiled"
                                                  : "disk hit";
    std::cerr << "[torch_tpu] cache: memory miss " << opName << ": " << where;
    if (cache.enabled()) std::cerr << " (key " << Sha256::hex(key).substr(0, 16) << ")";
    std::cerr << " in " << out.seconds * 1e3 << " ms\n";
  }
  return out;
}

}  // namespace tpu::runtime
