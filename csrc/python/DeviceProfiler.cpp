// torch.profiler with ProfilerActivity.PrivateUse1 (torch.profiler.ProfilerActivity.TPU once renamed): a kineto
// activity profiler, registered through torch's PrivateUse1ProfilerRegistry, that turns runtime::trace spans
// (program executions, compiles, host<->device transfers) into device activities. They land on a `tpu:N`
// timeline in the chrome trace (pid = device index; one row each for programs, compiles and transfers), and
// programs count as device (kernel) time in key_averages(), as CUDA kernels do.
#ifndef USE_KINETO
#define USE_KINETO 1  // the torch wheel is built with kineto; its plugin headers are guarded by this macro
#endif
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>

#include "csrc/runtime/DeviceTrace.h"
#include "csrc/runtime/Runtime.h"

namespace tpu::python {
namespace {

using libkineto::ActivityType;
namespace trace = runtime::trace;

// Rows of the device timeline.
constexpr int32_t kProgramsRow = 0, kCompilesRow = 1, kTransfersRow = 2;

ActivityType activityOf(trace::Kind k) {
  switch (k) {
    case trace::Kind::Execute: return ActivityType::CONCURRENT_KERNEL;
    case trace::Kind::Transfer: return ActivityType::GPU_MEMCPY;
    case trace::Kind::Compile: return ActivityType::PRIVATEUSE1_RUNTIME;
  }
  return ActivityType::PRIVATEUSE1_RUNTIME;
}

int32_t rowOf(trace::Kind k) {
  return k == trace::Kind::Execute ? kProgramsRow : k == trace::Kind::Compile ? kCompilesRow : kTransfersRow;
}

class Session : public libkineto::IActivityProfilerSession {
 public:
  // Kineto configures every plugin for every trace; record only when PrivateUse1 activities were asked for.
  explicit Session(bool active) : active_(active) {}
  void start() override {
    startNs_ = trace::nowNs();
    // Kineto also restarts sessions it configured earlier for a later CPU-only trace: ask torch's profiler
    // state which activities this trace is for.
    using torch::profiler::impl::ProfilerState;
    using torch::profiler::impl::ProfilerStateBase;
    const ProfilerStateBase* state = ProfilerStateBase::get();
    if (state) active_ = state->config().state == ProfilerState::KINETO_PRIVATEUSE1;
    if (!active_) return;
    trace::take();  // drop spans from before the window
    trace::setEnabled(true);
  }
  void stop() override {
    endNs_ = trace::nowNs();
    if (!active_) return;
    trace::setEnabled(false);
    spans_ = trace::take();  // waits for programs still running
  }
  std::vector<std::string> errors() override { return {}; }

  void pushCorrelationId(uint64_t id) override { trace::pushCorrelation(id); }
  void popCorrelationId() override { trace::popCorrelation(); }

  // With the CPU ops' activities: each program is linked (a flow arrow in the trace, and its device time
  // attributed to the op in key_averages) to the op that launched it.
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    linked_ = std::move(linked);
    processTrace(logger);
    linked_ = nullptr;
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    buffer_.span = libkineto::TraceSpan(startNs_, endNs_, "tpu");
    int32_t id = 0;
    for (const trace::Span& s : spans_) {
      buffer_.emplace_activity(buffer_.span, activityOf(s.kind), s.name);
      libkineto::GenericTraceActivity& a = *buffer_.activities.back();
      a.startTime = s.startNs;
      a.endTime = std::max(s.endNs, s.startNs);
      a.device = s.device < 0 ? 0 : s.device;  // compiles are for every device: shown on tpu:0
      a.resource = rowOf(s.kind);
      a.id = ++id;
      a.addMetadataQuoted("device", "tpu:" + std::to_string(a.device));
      if (s.launchNs) a.addMetadataQuoted("launched", std::to_string(s.launchNs / 1000) + " us");
      if (s.correlation && linked_) {
        a.linked = linked_(static_cast<int32_t>(s.correlation));
        if (a.linked) {
          a.flow.id = static_cast<uint32_t>(s.correlation);
          a.flow.type = libkineto::kLinkAsyncCpuGpu;
          a.flow.start = false;
          a.addMetadataQuoted("correlation", std::to_string(s.correlation));
        }
      }
      a.log(logger);
    }
    spans_.clear();  // kineto may process a finished session again in a later (CPU-only) trace
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    std::string platform;
    try {
      platform = runtime::Runtime::get().client().platformName();
    } catch (...) {
    }
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{0, 0, "tpu:0", platform.empty() ? "tpu" : "tpu (" + platform + " via PJRT)"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> r;
    r.push_back(libkineto::ResourceInfo{kProgramsRow, kProgramsRow, 0, "programs"});
    r.push_back(libkineto::ResourceInfo{kCompilesRow, kCompilesRow, 0, "compiles"});
    r.push_back(libkineto::ResourceInfo{kTransfersRow, kTransfersRow, 0, "transfers"});
    return r;
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::make_unique<libkineto::CpuTraceBuffer>(std::move(buffer_));
  }

 private:
  libkineto::getLinkedActivityCallback linked_;
  bool active_;
  int64_t startNs_ = 0, endNs_ = 0;
  std::vector<trace::Span> spans_;
  libkineto::CpuTraceBuffer buffer_;
};

class TpuActivityProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config&) override {
    bool active = false;
    for (ActivityType t : activities_) active |= types.count(t) > 0;
    return std::make_unique<Session>(active);
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "torch_tpu";
  std::set<ActivityType> activities_{ActivityType::PRIVATEUSE1_RUNTIME, ActivityType::PRIVATEUSE1_DRIVER};
};

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);

}  // namespace
}  // namespace tpu::python
