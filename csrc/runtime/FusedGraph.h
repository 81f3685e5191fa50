#pragma once
// Fused eager mode: ops are traced into one pending HLO function instead of
// running one by one. Storages hold pending values; the graph is compiled (once
// per structure) and run when a value is needed on the host, at a size bound,
// at a learned step boundary, on synchronize or on a mode change. Values of
// storages that died before the flush are never materialised; buffers the graph
// overwrites are donated to it.
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "BoundedCache.h"
#include "FunctionRef.h"
#include "OpTrace.h"
#include "StepDetector.h"
#include "csrc/pjrt/Executable.h"

namespace tpu::runtime {

struct FusedStats {
  int64_t flushes = 0;
  int64_t fusedOps = 0;
  int64_t cacheHits = 0;
  int64_t compiles = 0;
  int64_t donatedBuffers = 0;
  int64_t stepBoundaries = 0;  // flushes at a learned step boundary
  int64_t runningGraphs = 0;   // flushed graphs whose programs have not finished yet
  int64_t replays = 0;         // compiled graphs launched again without tracing
  int64_t eagerReplays = 0;    // fused-mode graphs whose ops were bound to a recorded program (no tracing)
  int64_t replayFallbacks = 0; // replays that ran their ops as a prefix module (a mismatch, liveness, donation)
};

struct FusedRecording;

// A flushed graph whose program may still run, with the input buffers it reads: they are
// kept until it finishes because the plugin's PJRT_Buffer_Destroy waits for a running
// program that reads the buffer, which would make every flush wait for its own graph.
struct RunningGraph {
  pjrt::Event done;
  std::vector<std::shared_ptr<pjrt::Buffer>> inputs;
  bool opGroup = false;  // a Strict op group's program (Executor::beginOpGroup)
};

// What a compiled graph's flush ran (torch.compile replay, torch_tpu/compile/replay.py):
// the executable and where each of its parameters and results came from, so a later call
// with new input buffers can launch it again without tracing. Storages are named by
// their allocator address (`DeviceStorage::address`, Python's untyped_storage().data_ptr()).
struct CapturedGraph {
  std::shared_ptr<pjrt::Executable> exe;
  int device = 0;
  struct Param {
    uintptr_t storage = 0;  // 0: a host operand or the index flag
    HostOperand operand{hlo::DType::F32};
    bool indexFlag = false;
    bool donated = false;  // aliased to a result: the buffer must be ours alone at replay
    hlo::DType elem = hlo::DType::U8;
    size_t nbytes = 0;
  };
  std::vector<Param> params;
  struct Result {
    uintptr_t storage = 0;
    hlo::DType elem = hlo::DType::U8;
    size_t nbytes = 0;
  };
  std::vector<Result> results;
  bool indexFlagResult = false;  // the last result is the device's new out-of-range flag
  // Set when the capture holds the whole graph: one flush at the graph's end, nothing cut
  // earlier (a host read inside the graph flushes part of it: not replayable).
  bool complete = false;
  // Storages the graph read before anything wrote them (their zeros are constants of the module):
  // harmless for storages the graph allocated, wrong for a replay whose argument holds values there.
  std::vector<uintptr_t> zeroRead;
  // Set before the capture when the graph's arguments hold no plain numbers. A replay launches with the
  // captured operand values and checks the arguments' offsets, so every host operand but a random state,
  // and every view offset, is a constant of the graph: the module bakes them in, and XLA folds them
  // (addmm's `beta == 0` select, scaling by 1, static slices instead of dynamic ones).
  bool constantOperands = false;
};

class FusedGraph final : public TraceContext {
 public:
  FusedGraph();
  bool empty() const { return ops_ == 0 && order_.empty(); }
  size_t ops() const { return ops_; }
  // The device the pending graph runs on (one graph holds one device's ops).
  int device() const { return device_; }
  // Adds the op; true when it ends a learned period of the op stream (a step boundary: flush now).
  // A compiled graph's ops (observeSteps false) are kept out of the eager stream's period.
  // `replayable`: the graph may be recorded for, and bound to, fused replay (not a compiled graph's ops).
  bool record(const OpCall& call, FunctionRef<BuildFn> build, bool observeSteps = true, bool replayable = true);
  StepDetector& steps() { return steps_; }
  // Runs the pending graph and gives every live written storage its buffer.
  // Callers hold the executor lock.
  void flush(const char* reason);
  // flush() of a Strict op group: its program is one Strict launch, not held to the fused graphs' bound.
  void flushOpGroup();
  // The next flush also records what it ran into `into` (null: stop recording).
  void captureNextFlush(std::shared_ptr<CapturedGraph> into) { capture_ = std::move(into); }
  // Launches a captured graph: `inputs[p]` gives the buffer of storage parameter p (null for
  // operand and flag parameters), `operands[p]` the value of operand parameter p (random
  // states drawn again), `outputs[r]` receives result r. Callers hold the executor lock.
  void replay(const CapturedGraph& g, const std::vector<DeviceStorage*>& inputs,
              const std::vector<HostOperand>& operands, const std::vector<DeviceStorage*>& outputs);
  // `s` is being freed (or fully replaced): the graph no longer produces it.
  void forget(DeviceStorage* s);
  // Hands over the flushed graphs that may still run (synchronize waits for them).
  std::deque<RunningGraph> takeRunning() {
    runningGraphs_ = 0;
    return std::exchange(running_, {});
  }
  // Drops launched graphs' references to `buffer` (they only say how far the device has got): after it,
  // only storages, a host transfer or the graph being built hold it. Callers hold the executor lock.
  void dropRunningHolds(const pjrt::Buffer* buffer);
  FusedStats stats() const;
  // Programs kept in memory by module text, and dropping their least recently used half.
  size_t cachedPrograms() const { return cache_.size(); }
  void shedPrograms() { cache_.shed(); }

  hlo::Value storageValue(hlo::Builder& b, DeviceStorage* s, hlo::DType as) override;
  void setStorageValue(DeviceStorage* s, hlo::Value flat) override;
  hlo::Value operandValue(hlo::Builder& b, const HostOperand& o) override;
  std::optional<hlo::Value> viewOffset(hlo::Builder& b, const TensorArg& a, size_t arg, bool write) override;

 private:
  struct Param {
    std::shared_ptr<pjrt::Buffer> buffer;  // a storage's buffer, kept alive until the flush
    DeviceStorage* storage = nullptr;      // whose buffer it is (a donation candidate)
    hlo::Type type{hlo::DType::F32, {}};
    HostOperand operand{hlo::DType::F32};
    bool indexFlag = false;  // the device's out-of-range flag
  };
  void reset();
  // Launches `g` on `held` (per parameter: the storage buffer, null for operands and the flag) and
  // `operands`; result r goes to `outputs[r]` (null: nobody holds it any more, dropped).
  void launch(const CapturedGraph& g, std::vector<std::shared_ptr<pjrt::Buffer>> held,
              const std::vector<HostOperand>& operands, const std::vector<DeviceStorage*>& outputs,
              const char* label);
  // The executable for a module text: the in-memory tier, else compileWithCache. Throws naming the graph.
  std::shared_ptr<pjrt::Executable> programFor(std::string text, bool& hit, double& seconds);
  // Fused replay (FusedReplay.h).
  bool replayOp(const OpCall& call, uint64_t signature);
  void flushReplay(const char* reason);
  void resumeTrace();
  void keepRecording(const char* reason);
  void touchSlot(DeviceStorage* s);
  void releaseFinished();
  void pushRunning(RunningGraph run);
  size_t donateOverwrittenBuffers(const std::vector<DeviceStorage*>& outputs, const std::vector<hlo::Value>& rets);

  std::unique_ptr<hlo::Builder> b_;
  std::unordered_map<DeviceStorage*, hlo::Value> values_;
  std::vector<DeviceStorage*> order_;  // first-touch order (nullptr once forgotten): a stable module text
  std::vector<Param> params_;
  std::optional<hlo::Value> indexFlag_;  // the flag after the graph's index ops so far
  int device_ = 0;
  size_t ops_ = 0;
  std::string firstOp_;
  std::vector<const char*> opNames_;  // only with TORCH_TPU_LOG=fused_ops
  StepDetector steps_;
  // Fused programs by module text. A training loop needs a handful; the bound keeps a
  // workload whose graphs never repeat from piling up loaded programs (BoundedCache.h).
  BoundedCache<std::string, std::shared_ptr<pjrt::Executable>> cache_{256};
  std::deque<RunningGraph> running_;
  size_t runningGraphs_ = 0;  // entries of running_ that are not op groups
  bool flushingOpGroup_ = false;
  std::shared_ptr<CapturedGraph> capture_;
  // Fused replay: the graph being traced is recorded op by op (eager ops only); a new graph whose
  // first op matches a kept recording binds its ops to it instead of tracing them.
  std::shared_ptr<FusedRecording> recording_;
  std::shared_ptr<FusedRecording> replay_;                   // the candidate bound so far
  std::vector<std::shared_ptr<FusedRecording>> candidates_;  // recordings matching every op so far
  size_t replayPos_ = 0;
  std::vector<std::shared_ptr<pjrt::Buffer>> boundBuffers_;  // per parameter of replay_
  std::vector<HostOperand> boundOperands_;
  std::vector<std::shared_ptr<FusedRecording>> recordings_;  // most recently used first, at most 16
  size_t opOperands_ = 0;  // operand parameters created for the op being traced
  FusedStats stats_;
};

}  // namespace tpu::runtime
