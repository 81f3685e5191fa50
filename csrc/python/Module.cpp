// torch_tpu._C: the Python surface of the runtime (device module, stats).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Generator.h>
#include <chrono>
#include <iostream>
#include <thread>
#include <torch/csrc/utils/pybind.h>

#include "csrc/aten/DeviceAllocator.h"
#include "csrc/aten/Generator.h"
#include "csrc/aten/Guard.h"
#include "csrc/aten/HostAllocator.h"
#include "csrc/runtime/Executor.h"
#include "csrc/runtime/HostMemoryPolicy.h"
#include "csrc/runtime/LargeBlockCache.h"
#include "csrc/runtime/Runtime.h"

namespace py = pybind11;
using namespace tpu;

void registerCompileCacheBindings(py::module& m);  // CacheBindings.cpp
void registerCompileBindings(py::module& m);       // CompileBindings.cpp
void registerPallasBindings(py::module& m);        // PallasBindings.cpp
void registerDistributedBindings(py::module& m);   // DistributedBindings.cpp
namespace tpu::python {
void initEagerModes(py::module& m);  // EagerModes.cpp
void initOptimizerStep(py::module& m);  // OptimizerStep.cpp
}
namespace tpu::aten {
std::string registerFbgemmKernels();  // JaggedKernels.cpp: "" or why the kernels could not be registered
std::string registerTorchrecKernels();  // ShardedEmbeddingKernels.cpp: the same for torchrec's own ops
}

namespace {

py::dict statArray(const c10::CachingAllocator::StatArray& a) {
  const auto& s = a[0];
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["allocated"] = s.allocated;
  d["freed"] = s.freed;
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native extension";
  m.def("_configure_plugins", [](const std::vector<std::pair<std::string, std::string>>& candidates) {
    std::vector<runtime::PluginCandidate> c;
    for (const auto& [name, path] : candidates) c.push_back({name, path});
    runtime::Runtime::configure(std::move(c));
  });
  // glibc malloc's policy for large host blocks (csrc/runtime/HostMemoryPolicy.h), set by _configure_plugins.
  m.def("_host_memory_policy", [] { return runtime::hostMemoryPolicy(); });
  m.def("_host_block_cache_stats", []() -> py::object {
    runtime::LargeBlockCache* cache = runtime::hostBlockCache();
    if (!cache) return py::none();
    runtime::LargeBlockCache::Stats s = cache->stats();
    py::dict d;
    d["live_bytes"] = s.liveBytes;
    d["cached_bytes"] = s.cachedBytes;
    d["allocations"] = s.allocations;
    d["reuses"] = s.reuses;
    d["fallbacks"] = s.fallbacks;
    return d;
  });
  m.def("_host_block_cache_trim", [] {
    if (runtime::LargeBlockCache* cache = runtime::hostBlockCache()) cache->trim();
  });
  m.def("_is_available", [] { return runtime::Runtime::available(); });
  // Starts the runtime, raising the error that says which plugins were tried.
  m.def("_init", [] {
    try {
      runtime::Runtime::get();
    } catch (const std::exception& e) {
      throw std::runtime_error(e.what());
    }
  });
  m.def("_device_count", [] { return aten::deviceCount(); });
  m.def("_current_device", [] { return aten::currentDevice(); });
  m.def("_set_device", [](int d) { aten::setCurrentDevice(d); });
  m.def("_synchronize", [] {
    py::gil_scoped_release release;
    runtime::Executor::get().synchronize();
  });
  // Pinned host memory and asynchronous (non_blocking) host transfers.
  m.def("_host_memory_stats", [] {
    aten::HostAllocatorStats a = aten::hostAllocatorStats();
    runtime::Executor::HostTransferStats t = runtime::Executor::get().hostTransferStats();
    py::dict d;
    d["pinned_blocks"] = a.liveBlocks;
    d["pinned_bytes"] = a.liveBytes;
    d["pinned_allocations"] = a.allocations;
    d["async_uploads"] = t.asyncUploads;
    d["async_downloads"] = t.asyncDownloads;
    d["pending_transfers"] = t.pending;
    return d;
  });
  m.def("_device_description", [] { return runtime::Runtime::get().description(); });
  m.def("_platform_name", [] { return runtime::Runtime::get().client().platformName(); });
  m.def("_platform_version", [] { return runtime::Runtime::get().client().platformVersion(); });
  m.def("_plugin_path", [] { return runtime::Runtime::get().pluginPath(); });
  m.def("_plugin_name", [] { return runtime::Runtime::get().pluginName(); });
  m.def("_pjrt_api_version", [] {
    const auto& p = runtime::Runtime::get().client().plugin();
    return std::make_pair(p.apiMajor(), p.apiMinor());
  });
  m.def("_default_generator", [](int device) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(aten::defaultGenerator(static_cast<c10::DeviceIndex>(device))));
  });
  m.def("_memory_stats", [](int device) {
    auto stats = aten::DeviceAllocator::get().getDeviceStats(static_cast<c10::DeviceIndex>(device));
    py::dict d;
    d["allocated_bytes"] = statArray(stats.allocated_bytes);
    d["reserved_bytes"] = statArray(stats.reserved_bytes);
    d["active_bytes"] = statArray(stats.active_bytes);
    d["requested_bytes"] = statArray(stats.requested_bytes);
    d["allocation"] = statArray(stats.allocation);
    d["segment"] = statArray(stats.segment);
    d["active"] = statArray(stats.active);
    return d;
  });
  // Streams: ids per device (0 = default, 1..32 = the pool); torch_tpu/streams.py wraps them.
  m.attr("_device_type_id") = static_cast<int>(c10::DeviceType::PrivateUse1);
  m.def("_current_stream", [](int device) {
    return aten::GuardImpl().getStream(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device))).id();
  });
  m.def("_set_stream", [](int64_t id, int device) {
    aten::GuardImpl().exchangeStream(c10::Stream(c10::Stream::UNSAFE,
                                                 c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)),
                                                 static_cast<c10::StreamId>(id)));
  });
  // Event.event_id is the guard's event pointer (torch_tpu/streams.py: elapsed_time of two torch.tpu.Events).
  m.def("_event_elapsed_time", [](uintptr_t start, uintptr_t end) {
    return aten::GuardImpl().elapsedTime(reinterpret_cast<void*>(start), reinterpret_cast<void*>(end), -1);
  });
  m.def("_mem_get_info", [](int device) { return aten::memGetInfo(device); });
  m.def("_reset_peak_memory_stats", [](int device) {
    aten::DeviceAllocator::get().resetPeakStats(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_reset_accumulated_memory_stats", [](int device) {
    aten::DeviceAllocator::get().resetAccumulatedStats(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_executor_stats", [] {
    auto s = runtime::Executor::get().stats();
    py::dict d;
    d["ops"] = s.ops;
    d["cache_hits"] = s.cacheHits;
    d["cache_misses"] = s.cacheMisses;
    d["compiles"] = s.compiles;
    d["compile_seconds"] = s.compileSeconds;
    d["cached_executables"] = runtime::Executor::get().cacheSize();
    d["evictions"] = s.evictions;
    d["compiled_graphs"] = s.compiledGraphs;
    d["fused_compiles"] = s.fusedCompiles;
    d["mapping_sheds"] = s.mappingSheds;
    d["donated_buffers"] = s.donatedBuffers;
    return d;
  });
  m.def("_set_fused_max_ops", [](size_t n) { runtime::Executor::get().setFusedMaxOps(n); });
  m.def("_fused_stats", [] {
    auto s = runtime::Executor::get().fusedStats();
    py::dict d;
    d["flushes"] = s.flushes;
    d["fused_ops"] = s.fusedOps;
    d["cache_hits"] = s.cacheHits;
    d["compiles"] = s.compiles;
    d["donated_buffers"] = s.donatedBuffers;
    d["step_boundaries"] = s.stepBoundaries;
    d["running_graphs"] = s.runningGraphs;
    d["replays"] = s.replays;
    d["eager_replays"] = s.eagerReplays;
    d["replay_fallbacks"] = s.replayFallbacks;
    return d;
  });
  // torch.compile (torch_tpu/compile/backend.py): the ops between these two calls become one
  // fused program, flushed at the end (which may compile, so the GIL is released).
  m.def("_compiled_graph_begin", [] { runtime::Executor::get().beginCompiledGraph(); });
  m.def("_compiled_graph_end", [] {
    py::gil_scoped_release release;
    runtime::Executor::get().endCompiledGraph();
  });
  m.def("_reset_executor_stats", [] { runtime::Executor::get().resetStats(); });
  // Called at exit. Autograd starts one device thread per tpu device at the
  // first backward; each takes the GIL once while starting. A thread still
  // waiting for it when the interpreter finalizes is killed inside a noexcept
  // frame (std::terminate), so let every started thread finish starting first.
  m.def("_settle_autograd_threads", [] {
    if (aten::startedAutogradThreads() == 0) return;
    int expected = aten::deviceCount();
    py::gil_scoped_release release;
    for (int waited = 0; aten::startedAutogradThreads() < expected && waited < 2000; ++waited)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  // Called at exit: work still queued runs, and an error it found on the device
  // (an out-of-range index flagged but never synchronized) is reported as a
  // warning naming the op, as CUDA reports a device-side assert at exit.
  m.def("_report_unsynchronized_errors", [] {
    if (!runtime::Runtime::started()) return;  // never start a plugin at exit
    py::gil_scoped_release release;
    const char* what = "an error found on the device was never synchronized before exit: ";
    try {
      runtime::Executor::get().synchronize();
    } catch (const c10::Error& e) {
      std::cerr << "[torch_tpu] warning: " << what << e.what_without_backtrace() << std::endl;
    } catch (const std::exception& e) {
      std::cerr << "[torch_tpu] warning: " << what << e.what() << std::endl;
    }
  });
  m.def("_clear_executable_cache", [] { runtime::Executor::get().clearCache(); });
  m.def("_register_fbgemm_kernels", &aten::registerFbgemmKernels);
  m.def("_register_torchrec_kernels", &aten::registerTorchrecKernels);
  registerCompileCacheBindings(m);
  registerCompileBindings(m);
  registerPallasBindings(m);
  registerDistributedBindings(m);
  python::initEagerModes(m);
  python::initOptimizerStep(m);
}
