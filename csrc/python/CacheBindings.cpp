// torch_tpu._C bindings of the compile cache (torch.tpu.compile_cache_stats, the
// `python -m torch_tpu.cache` tool). Registered by Module.cpp.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "csrc/runtime/CacheWriter.h"
#include "csrc/runtime/CompileCache.h"
#include "csrc/runtime/Executor.h"

namespace py = pybind11;
using tpu::runtime::CompileCache;
using tpu::runtime::Executor;

namespace {

// Entries still being written (CacheWriter) land before anything reads the directory or its counts.
void drainWrites() {
  py::gil_scoped_release release;
  tpu::runtime::CacheWriter::global().drain();
}

py::dict dirInfo(const std::string& dir, bool verify) {
  drainWrites();
  tpu::runtime::CacheDirInfo info;
  {
    py::gil_scoped_release release;
    info = CompileCache::inspect(dir, verify);
  }
  py::dict d;
  d["directory"] = dir;
  d["exists"] = info.exists;
  d["entries"] = info.entries;
  d["bytes"] = info.bytes;
  d["invalid_entries"] = info.invalid;
  d["temporary_files"] = info.tmpFiles;
  d["lock_files"] = info.lockFiles;
  d["oldest"] = info.oldest;
  d["newest"] = info.newest;
  py::dict groups;
  for (const auto& [name, n] : info.groups) groups[py::str(name)] = n;
  d["groups"] = groups;
  return d;
}

}  // namespace

void registerCompileCacheBindings(py::module& m) {
  m.def("_compile_cache_config", [] {
    CompileCache& c = CompileCache::global();
    py::dict d;
    d["enabled"] = c.enabled();
    d["writable"] = c.enabled() && c.writable();
    d["directory"] = c.config().dir;
    d["max_bytes"] = c.config().maxBytes;
    d["lock_timeout"] = c.config().lockTimeoutSeconds;
    d["note"] = c.config().note;
    d["usable"] = c.usable();  // enabled and the folder passes CacheTrust's owner/mode rule
    d["signed"] = c.config().trust.signs();
    d["trust_shared"] = c.config().trust.trustShared;
    d["torch_tpu_version"] = tpu::runtime::kTorchTpuVersion;
    d["format_version"] = tpu::runtime::kCacheFormatVersion;
    return d;
  });
  m.def("_compile_cache_drain", &drainWrites);
  m.def("_compile_cache_stats", [](bool scan) {
    drainWrites();
    CompileCache& c = CompileCache::global();
    auto ex = Executor::get().stats();
    auto s = c.stats();
    py::dict memory;
    memory["hits"] = ex.cacheHits;
    memory["misses"] = ex.cacheMisses;
    memory["entries"] = Executor::get().cacheSize();
    memory["evictions"] = ex.evictions;
    py::dict disk;
    disk["enabled"] = c.enabled();
    disk["writable"] = c.usable() && c.writable();
    disk["directory"] = c.config().dir;
    disk["max_bytes"] = c.config().maxBytes;
    disk["hits"] = s.hits;
    disk["misses"] = s.misses;
    disk["writes"] = s.writes;
    disk["written_bytes"] = s.writeBytes;
    disk["evictions"] = s.evictions;
    disk["corrupt_entries"] = s.corrupt;
    disk["untrusted_entries"] = s.untrusted;
    disk["write_errors"] = s.writeErrors;
    disk["lock_waits"] = s.lockWaits;
    disk["lock_timeouts"] = s.lockTimeouts;
    disk["load_seconds"] = s.loadSeconds;
    if (scan && c.enabled()) {
      std::pair<int64_t, int64_t> u;
      {
        py::gil_scoped_release release;
        u = CompileCache::usage(c.config().dir);
      }
      disk["entries"] = u.first;
      disk["bytes"] = u.second;
    } else {
      disk["bytes"] = 0;
      disk["entries"] = 0;
    }
    py::dict d;
    d["memory"] = memory;
    d["disk"] = disk;
    d["compiles"] = s.compiles;
    d["compile_seconds"] = s.compileSeconds;
    return d;
  });
  m.def("_reset_compile_cache_stats", [] {
    CompileCache::global().resetStats();
    Executor::get().resetStats();
  });
  m.def("_clear_compile_cache", [](bool persistent) {
    drainWrites();
    Executor::get().clearCache();
    if (!persistent || !CompileCache::global().enabled()) return int64_t{0};
    py::gil_scoped_release release;
    return CompileCache::global().clearDirectory();
  });
  m.def("_cache_dir_inspect", &dirInfo, py::arg("directory"), py::arg("verify") = false);
  m.def("_cache_dir_prune", [](const std::string& dir, uint64_t maxBytes) {
    drainWrites();
    tpu::runtime::PruneResult r;
    {
      py::gil_scoped_release release;
      r = CompileCache::prune(dir, maxBytes);
    }
    py::dict d;
    d["removed"] = r.removed;
    d["removed_bytes"] = r.removedBytes;
    d["remaining_bytes"] = r.remainingBytes;
    return d;
  });
  m.def("_cache_dir_clear", [](const std::string& dir) {
    drainWrites();
    py::gil_scoped_release release;
    return CompileCache::clear(dir);
  });
  m.def("_parse_bytes", [](const std::string& s) { return tpu::runtime::CompileCacheConfig::parseBytes(s); });
}
