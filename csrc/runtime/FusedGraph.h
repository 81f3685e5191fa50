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
};

// A flushed graph whose program may still run, with the input buffers it reads: they are
// kept until it finishes because the plugin's PJRT_Buffer_Destroy waits for a running
// program that reads the buffer, which would make every flush wait for its own graph.
struct RunningGraph {
  pjrt::Event done;
  std::vector<std::shared_ptr<pjrt::Buffer>> inputs;
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
  bool record(const OpCall& call, FunctionRef<BuildFn> build, bool observeSteps = true);
  StepDetector& steps() { return steps_; }
  // Runs the pending graph and gives every live written storage its buffer.
  // Callers hold the executor lock.
  void flush(const char* reason);
  // `s` is being freed (or fully replaced): the graph no longer produces it.
  void forget(DeviceStorage* s);
  // Hands over the flushed graphs that may still run (synchronize waits for them).
  std::deque<RunningGraph> takeRunning() { return std::exchange(running_, {}); }
  FusedStats stats() const;

  hlo::Value storageValue(hlo::Builder& b, DeviceStorage* s, hlo::DType as) override;
  void setStorageValue(DeviceStorage* s, hlo::Value flat) override;
  hlo::Value operandValue(hlo::Builder& b, const HostOperand& o) override;

 private:
  struct Param {
    std::shared_ptr<pjrt::Buffer> buffer;  // a storage's buffer, kept alive until the flush
    DeviceStorage* storage = nullptr;      // whose buffer it is (a donation candidate)
    hlo::Type type{hlo::DType::F32, {}};
    HostOperand operand{hlo::DType::F32};
    bool indexFlag = false;  // the device's out-of-range flag
  };
  void reset();
  void releaseFinished();
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
  FusedStats stats_;
};

}  // namespace tpu::runtime
