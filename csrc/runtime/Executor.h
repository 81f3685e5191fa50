#pragma once
// Eager execution of the op stream: each OpCall is compiled once per
// signature (in-memory cache), launched asynchronously, and its results are
// swapped into the output storages. The host waits only at sync points.
// Debug mode (ExecutionMode.h) adds a non-finite check to each program and
// waits for and checks every op. Index kernels record out-of-range indices in
// a per-device error flag that every sync point checks (in every mode).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

#include "BoundedCache.h"
#include "MappingBudget.h"
#include "FunctionRef.h"
#include "FiniteCheck.h"
#include "FusedGraph.h"
#include "OpCall.h"
#include "csrc/pjrt/Executable.h"

namespace tpu::runtime {

class Marker;  // Streams.h

struct ExecutorStats {
  int64_t ops = 0;          // op calls executed
  int64_t cacheHits = 0;    // in-memory tier
  int64_t cacheMisses = 0;  // in-memory misses: each is loaded from the compile cache directory or compiled
  int64_t compiles = 0;     // programs compiled by XLA
  double compileSeconds = 0;
  int64_t evictions = 0;    // programs dropped from the in-memory tier at its bound
  int64_t compiledGraphs = 0;  // torch.compile graph calls, each flushed as one fused program
  int64_t fusedCompiles = 0;   // of `compiles`: fused-mode graphs (and torch.compile graphs) compiled by XLA
  int64_t mappingSheds = 0;    // times the program caches shed half at the memory-mapping cap (MappingBudget.h)
  int64_t donatedBuffers = 0;  // strict in-place writes whose program reused the storage's old buffer
};

int64_t newOpId();

class Executor {
 public:
  static Executor& get();
  Executor();

  // Runs `call` (compiling `build` on a cache miss) and updates its output storages.
  void run(const OpCall& call, FunctionRef<BuildFn> build);
  // Waits until every launched program has finished; rethrows device errors.
  void synchronize();
  // Copies the bytes of `storage` to `dst` (nbytes), waiting for the value.
  void download(const DeviceStorage& storage, void* dst);
  // Replaces the content of `storage` by `bytes` (nbytes of it).
  void upload(DeviceStorage& storage, const void* bytes, hlo::DType elem);
  // The same without a copy where the plugin's buffers live in host memory (the CPU plugin):
  // `storage` takes a buffer aliasing `bytes`, which must stay alive and unchanged until
  // `released` runs (on a plugin thread, or here after a copy): once that buffer and every
  // program reading it are gone.
  void lendHost(DeviceStorage& storage, const void* bytes, hlo::DType elem, std::function<void()> released);

  // Asynchronous host transfers (non_blocking copies with pinned host memory).
  // Each returns once the transfer is started; `keepAlive` (the host memory's
  // owner) is held until it completes. Host memory that a pending transfer
  // reads or writes is waited for by awaitHostRange (every copy through the host
  // calls it first, so copies stay in program order) and by synchronize().
  void uploadAsync(DeviceStorage& storage, const void* bytes, hlo::DType elem, std::shared_ptr<void> keepAlive);
  void downloadAsync(const DeviceStorage& storage, void* dst, std::shared_ptr<void> keepAlive);
  void awaitHostRange(const void* begin, size_t nbytes);
  struct HostTransferStats {
    int64_t asyncUploads = 0, asyncDownloads = 0;  // started since the start of the process
    int64_t pending = 0;                           // not yet known to be complete
  };
  HostTransferStats hostTransferStats();
  // Replaces the content of `dst` by that of `src` (same nbytes, another device), copied
  // device to device by the plugin (PJRT_Buffer_CopyToDevice); does not wait.
  void copyToDevice(const DeviceStorage& src, DeviceStorage& dst);
  // The device every tensor of `call` lives on; raises (RuntimeError) when they differ.
  static int deviceOf(const OpCall& call);
  // Raises (IndexError) the first out-of-range index recorded on a device since
  // the last check, naming the op. Reads 4 bytes per device that ran an index
  // op since; free when none did. Called by synchronize() and download().
  void checkDeviceFlags();

  // Fused mode: ops are deferred into one graph (see FusedGraph.h). Switching
  // flushes pending work.
  void setFused(bool fused);
  bool fused() const { return fusedMode_; }
  // Runs the pending fused graph, if any.
  void flush(const char* reason);
  FusedStats fusedStats() const;
  void setFusedMaxOps(size_t n);
  // `storage` is being freed: a pending graph must not produce it.
  void forget(DeviceStorage* storage);
  // torch.compile (torch_tpu/compile): every op between beginCompiledGraph and
  // endCompiledGraph is traced into one fused graph whatever the eager mode. Pending
  // work is flushed first (the graph's module text is then the same every call and hits
  // the cache); the size bound and learned step boundaries do not cut it; the end flushes
  // it as one program. Nested scopes join the outermost one.
  void beginCompiledGraph();
  void endCompiledGraph();
  bool capturing() const { return captureDepth_ > 0; }
  // An op group (ForeachKernels.cpp): in Strict mode, the ops until endOpGroup trace into one fused graph, flushed
  // at the end, with fused replay (a repeated group binds to its recorded program, no trace). False, and nothing
  // to end, where ops are fused already (Fused mode, a compiled graph) or a group is open.
  // `waitForOtherThread`: a group another thread has open is waited for (up to 10 s) rather than refused, so
  // that threads' steps group alike however they interleave (the caller must not hold what that thread needs:
  // torch_tpu/optim.py waits with the GIL released).
  bool beginOpGroup(bool waitForOtherThread = false);
  void endOpGroup();
  // Inside a compiled-graph scope: the graph's final flush records what it ran.
  void captureCompiledGraph(std::shared_ptr<CapturedGraph> into);
  // Runs a captured graph again on new buffers (FusedGraph::replay), as one compiled-graph call.
  void replayCompiledGraph(const CapturedGraph& g, const std::vector<DeviceStorage*>& inputs,
                           const std::vector<HostOperand>& operands, const std::vector<DeviceStorage*>& outputs);

  // For FusedGraph, which runs with the executor lock held.
  std::shared_ptr<pjrt::Buffer> operandBufferLocked(const HostOperand& op, int device);
  void trackInFlightLocked(const std::shared_ptr<pjrt::Buffer>& buffer, int device);
  // A fused graph's program came from compileWithCache: counted in stats() like strict programs.
  // After a program was loaded into a cache: sheds the older half of both program caches when the
  // process nears its cap on memory mappings (MappingBudget.h).
  void relieveMappingsLocked();
  void noteFusedProgramLocked(bool compiled, double seconds);
  // The device error flag: the code naming what a program checks (an index op's out-of-range
  // indices, or an assertion), the device's current flag buffer, and its new value after such a program.
  int32_t flagCodeLocked(const OpCall& call);
  std::shared_ptr<pjrt::Buffer> flagBufferLocked(int device);
  void setFlagLocked(int device, std::shared_ptr<pjrt::Buffer> flag);

  ExecutorStats stats() const;
  void resetStats();
  void clearCache();
  size_t cacheSize() const;

 private:
  struct Entry;
  struct KeyHash {
    size_t operator()(const std::vector<int64_t>& k) const noexcept;
  };
  // One device's error flag: an S32 scalar, 0 or the code (index into flagCauses_ + 1) of the
  // first op that saw an out-of-range index or a failed assertion.
  struct DeviceFlag {
    std::shared_ptr<pjrt::Buffer> value, zero;
    bool dirty = false;  // an index op ran since the last check
  };
  std::shared_ptr<Entry> compile(const OpCall& call, FunctionRef<BuildFn> build,
                                 const std::vector<DeviceStorage*>& storages, const std::vector<char>& donate,
                                 bool checkNonFinite);
  std::shared_ptr<pjrt::Buffer> flagBuffer(int device);
  // An in-place write may hand the storage's buffer to XLA: only the storage holds it once launched
  // graphs' holds are dropped, and it is not host memory on loan.
  bool donatable(const DeviceStorage& s);
  void checkFlags(bool atOp);
  void debugCheck(const OpCall& call, const Entry& entry, const std::vector<DeviceStorage*>& storages,
                  const std::shared_ptr<pjrt::Buffer>& nonFinite, size_t bytes);
  // Debug mode: raises (or warns, TORCH_TPU_DEBUG_NONFINITE=warn) that `call` made a NaN or Inf from finite inputs.
  void reportNonFinite(const OpCall& call);

  // A transfer that still reads (upload) or writes (download) [begin, end) of host memory.
  // `done` is also work of the stream current when it started (addHostTransfer).
  struct HostTransfer {
    std::shared_ptr<Marker> done;
    std::shared_ptr<void> keepAlive;
    std::shared_ptr<pjrt::Buffer> buffer;  // a download's source, alive until it is read
    uintptr_t begin = 0, end = 0;
  };
  void addHostTransfer(HostTransfer t, int device);
  std::mutex hostMutex_;
  std::vector<HostTransfer> hostTransfers_;
  std::atomic<size_t> hostPending_{0};
  HostTransferStats hostStats_;

  mutable std::mutex mutex_;
  BoundedCache<std::vector<int64_t>, std::shared_ptr<Entry>, KeyHash> cache_;
  MappingBudget mappings_;
  std::unordered_map<std::vector<int64_t>, std::shared_ptr<pjrt::Buffer>, KeyHash> operandCache_;
  std::vector<std::weak_ptr<pjrt::Buffer>> inFlight_;
  size_t inFlightPruned_ = 0;  // inFlight_'s size after the last pruning
  std::vector<DeviceFlag> flags_;
  struct FlagCause {
    ErrorKind kind = ErrorKind::Index;  // Runtime for a failed assertion; the op's CPU error type for an index
    std::string message;  // the assertion's message, or "index out of range in <op>"
    bool operator==(const FlagCause&) const = default;
  };
  std::vector<FlagCause> flagCauses_;
  std::atomic<bool> flagsDirty_{false};
  std::mutex flagMutex_;  // held by an index op from reading the flag to swapping it
  ExecutorStats stats_;
  FusedGraph fusedGraph_;
  FiniteCheck finiteCheck_;
  bool fusedMode_ = false;
  size_t fusedMaxOps_ = 1000;  // XLA compile time grows fast beyond this
  int captureDepth_ = 0;           // open compiled-graph scopes
  bool fusedBeforeCapture_ = false;  // the eager mode's policy, restored at the end
  bool grouping_ = false;            // an op group is open (beginOpGroup), by groupThread_
  std::condition_variable groupEnded_;  // notified (under mutex_) when a group ends
  std::thread::id groupThread_;
  // Whether this thread's op joins the fused graph; another thread's op while a group is open runs strict (after
  // the group so far when it touches a storage the group holds). Both with the lock held.
  bool fusesHereLocked(const OpCall& call);
  void recordFusedLocked(const OpCall& call, FunctionRef<BuildFn> build, int device);
};

}  // namespace tpu::runtime
