#include "FusedGraph.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "BufferReaper.h"
#include "CompileCache.h"
#include "DeviceTrace.h"
#include "ExecutionMode.h"
#include "Executor.h"
#include "FusedReplay.h"
#include "Runtime.h"
#include "csrc/pjrt/Error.h"

namespace tpu::runtime {

using hlo::Value;

namespace {
bool logFused() {
  static const char* env = std::getenv("TORCH_TPU_LOG");
  return env && (std::strstr(env, "fused") || std::strstr(env, "all"));
}
// TORCH_TPU_LOG=fused_ops also lists each graph's ops (for finding the slow part of a step).
bool logFusedOps() {
  static const char* env = std::getenv("TORCH_TPU_LOG");
  return env && std::strstr(env, "fused_ops");
}
// TORCH_TPU_LOG=hlo prints each graph's StableHLO module before it compiles (as the Strict executor does).
bool logHlo() {
  static const char* env = std::getenv("TORCH_TPU_LOG");
  return env && (std::strstr(env, "hlo") || std::strstr(env, "all"));
}
// TORCH_TPU_FUSED_REPLAY=0 traces every graph (to compare, or to rule replay out).
bool replayEnabled() {
  static const bool on = [] {
    const char* env = std::getenv("TORCH_TPU_FUSED_REPLAY");
    return !env || std::strcmp(env, "0") != 0;
  }();
  return on;
}
constexpr size_t kMaxRecordings = 16;

// A graph that failed on the device: its results that never had a value are lost (reading one
// raises), and the error names the graph and what its results needed, as Executor's does for one op.
[[noreturn]] void graphFailure(const pjrt::PjrtError& e, const std::string& graph,
                               const std::vector<DeviceStorage*>& results) {
  size_t bytes = 0, largest = 0;
  auto lost = std::make_shared<const std::string>(graph + " failed on the device: " + e.what());
  for (DeviceStorage* s : results) {
    if (!s) continue;
    bytes += s->nbytes;
    largest = std::max(largest, s->nbytes);
    if (!s->buffer) s->lost = lost;
  }
  bool oom = e.outOfMemory();
  raiseError(oom ? ErrorKind::OutOfMemory : ErrorKind::Runtime,
             "torch_tpu: " + graph + " failed on the device" + (oom ? " allocating its results (" : " (its results: ") +
                 std::to_string(bytes) + " bytes requested in " + std::to_string(results.size()) +
                 " results, the largest " + std::to_string(largest) + " bytes)" + calledAt() + ": " + e.what());
}
}  // namespace

void requireComputed(const DeviceStorage& s) {
  if (s.lost)
    raiseError(ErrorKind::Runtime, "torch_tpu: this tensor has no value: the " + *s.lost +
                                       "\nRecompute it (or write all of it) before reading it.");
}

FusedGraph::FusedGraph() : b_(std::make_unique<hlo::Builder>()) {}

void FusedGraph::reset() {
  for (DeviceStorage* s : order_)
    if (s) {
      s->inGraph = s->written = false;
      s->fusedSlot = -1;
    }
  b_ = std::make_unique<hlo::Builder>();
  values_.clear();
  order_.clear();
  params_.clear();
  ops_ = 0;
  firstOp_.clear();
  opNames_.clear();
  indexFlag_.reset();
  recording_.reset();
  replay_.reset();
  candidates_.clear();
  replayPos_ = 0;
  boundBuffers_.clear();
  boundOperands_.clear();
}

void FusedGraph::touchSlot(DeviceStorage* s) {
  if (s->inGraph) return;
  s->inGraph = true;
  s->fusedSlot = static_cast<int32_t>(order_.size());
  order_.push_back(s);
}

bool FusedGraph::record(const OpCall& call, FunctionRef<BuildFn> build, bool observeSteps, bool replayable) {
  // A lost value never enters a graph (checked before anything is recorded, so raising leaves it whole).
  for (const TensorArg& a : call.inputs)
    if (!a.storage->inGraph) requireComputed(*a.storage);
  for (const TensorArg& a : call.outputs)
    if (!a.storage->inGraph && !a.view.coversStorage(a.storage->nbytes)) requireComputed(*a.storage);
  uint64_t signature = 0;
  bool replayed = false;
  if (!replayable || !replayEnabled()) {
    recording_.reset();  // a compiled graph's ops: not an eager step to replay
  } else {
    signature = replaySignature(call, order_.size());
    if (replay_) {
      replayed = replayOp(call, signature);
      if (!replayed) {
        ++stats_.replayFallbacks;
        resumeTrace();  // the stream left every recording: trace from this op on
      }
    }
    if (!replayed && ops_ == 0) {
      for (const auto& r : recordings_)
        if (r->ops.front().signature == signature) candidates_.push_back(r);
      if (!candidates_.empty()) {
        replay_ = candidates_.front();
        firstOp_ = call.name;
        device_ = !call.outputs.empty() ? call.outputs[0].storage->device
                  : !call.inputs.empty() ? call.inputs[0].storage->device : 0;
        replayed = replayOp(call, signature);
      }
      if (!replayed) recording_ = std::make_shared<FusedRecording>();
    }
  }
  if (replayed) {
    if (logFusedOps()) opNames_.push_back(call.name);
    ++ops_;
    ++stats_.fusedOps;
    if (!observeSteps) return false;
    bool boundary = steps_.observe(opSignature(call));
    stats_.stepBoundaries += boundary;
    return boundary;
  }
  if (ops_ == 0) {
    firstOp_ = call.name;
    if (!call.outputs.empty()) device_ = call.outputs[0].storage->device;
    else if (!call.inputs.empty()) device_ = call.inputs[0].storage->device;
  }
  b_->setDotPrecision(call.dotPrecision);
  opOperands_ = 0;
  TraceResult traced = traceOp(*b_, *this, call, build);
  if (call.checksIndices) {
    // Index ops chain the device's out-of-range flag through the graph, as strict programs do.
    if (!indexFlag_) {
      indexFlag_ = b_->parameter(hlo::Type{hlo::DType::S32, {}});
      Param p;
      p.indexFlag = true;
      params_.push_back(p);
      if (recording_) recording_->params.push_back({RecordedParam::Kind::Flag, 0});
    }
    indexFlag_ = chainIndexFlag(*b_, *indexFlag_, *traced.indexFlag, Executor::get().flagCodeLocked(call));
  }
  if (recording_) {
    RecordedOp r;
    r.signature = signature;
    r.paramsEnd = static_cast<uint32_t>(recording_->params.size());
    r.writesEnd = static_cast<uint32_t>(recording_->writes.size());
    r.bodyEnd = b_->bodySize();
    r.nextId = b_->nextId();
    r.flag = indexFlag_;
    recording_->ops.push_back(std::move(r));
  }
  if (logFusedOps()) opNames_.push_back(call.name);
  ++ops_;
  ++stats_.fusedOps;
  if (!observeSteps) return false;
  bool boundary = steps_.observe(opSignature(call));
  stats_.stepBoundaries += boundary;
  return boundary;
}

Value FusedGraph::storageValue(hlo::Builder& b, DeviceStorage* s, hlo::DType as) {
  auto it = values_.find(s);
  if (it != values_.end()) return it->second;
  Value v;
  if (s->buffer) {
    v = b.parameter(hlo::Type{s->elem, {s->elemCount()}});
    params_.push_back(Param{s->buffer, s, v.type});
    if (recording_) recording_->params.push_back({RecordedParam::Kind::Storage, static_cast<int32_t>(order_.size())});
  } else {
    v = b.full(hlo::Type{as, {static_cast<int64_t>(s->nbytes / hlo::byteWidth(as))}}, 0);
    // Never-written memory read as zeros is baked into the module: right at every replay for a
    // storage the graph allocated itself (repeat's fresh output, written through views), wrong
    // for an argument written since; replay.build_plan refuses a graph that did this to an argument.
    if (capture_) capture_->zeroRead.push_back(s->address);
  }
  values_.emplace(s, v);
  touchSlot(s);
  if (recording_) recording_->writes.emplace_back(s->fusedSlot, v);
  return v;
}

void FusedGraph::setStorageValue(DeviceStorage* s, Value flat) {
  touchSlot(s);
  values_[s] = flat;
  s->written = true;
  if (recording_) recording_->writes.emplace_back(s->fusedSlot, flat);
}

namespace {

// `o` as a constant of the module, where its device encoding (ElementCodec) and the constant's agree
// exactly; none for random states, arrays and the integer types the builder prints differently.
std::optional<Value> bakedOperand(hlo::Builder& b, const HostOperand& o) {
  if (o.rngWords || o.count) return std::nullopt;
  if (hlo::isComplex(o.dtype)) {
    hlo::DType part = hlo::componentType(o.dtype);
    return b.complex(b.constant(part, o.f[0]), b.constant(part, o.f[1]));
  }
  if (hlo::isFloat(o.dtype)) return b.constant(o.dtype, o.f[0]);
  switch (o.dtype) {
    case hlo::DType::Pred: return b.constantInt(o.dtype, o.i[0] != 0);
    case hlo::DType::S32: return b.constantInt(o.dtype, static_cast<int32_t>(o.i[0]));
    case hlo::DType::S64: return b.constantInt(o.dtype, o.i[0]);
    default: return std::nullopt;
  }
}

}  // namespace

Value FusedGraph::operandValue(hlo::Builder& b, const HostOperand& o) {
  if (capture_ && capture_->constantOperands)
    if (std::optional<Value> v = bakedOperand(b, o)) return *v;
  hlo::Shape shape;
  if (o.count) shape.push_back(o.count);
  Param p;
  p.operand = o;
  params_.push_back(p);
  if (recording_) recording_->params.push_back({RecordedParam::Kind::Operand, static_cast<int32_t>(opOperands_)});
  ++opOperands_;
  return b.parameter(hlo::Type{o.dtype, shape});
}

std::optional<Value> FusedGraph::viewOffset(hlo::Builder& b, const TensorArg& a, size_t arg, bool write) {
  // A view offset that is not 0 is an operand: a cache written at a moving position (or any slice
  // whose start changes from step to step) keeps one module text.
  const ViewSpec& v = a.view;
  if (capture_ && capture_->constantOperands) return std::nullopt;
  if (!offsetCanBeOperand(v, static_cast<int64_t>(a.storage->nbytes / hlo::byteWidth(v.dtype)), write))
    return std::nullopt;
  Param p;
  p.operand = HostOperand::integer(hlo::DType::S64, v.offset);
  params_.push_back(p);
  if (recording_) recording_->params.push_back({RecordedParam::Kind::Offset, static_cast<int32_t>(arg)});
  return b.parameter(hlo::Type{hlo::DType::S64, {}});
}

void FusedGraph::releaseFinished() {
  auto retireFront = [this] {
    runningGraphs_ -= !running_.front().opGroup;
    BufferReaper::get().retire(running_.front().inputs);  // freed off this thread
    running_.pop_front();
  };
  while (!running_.empty() && running_.front().done.ready()) retireFront();
  // Bounded: a host that outruns the device waits here rather than piling up graphs (a fused or compiled
  // graph is a step or a large part of one). Op groups are Strict launches like any other Strict op, which
  // never waits, and a Strict step has dozens of them: counting them made the host wait for the device
  // every few groups (the small GPT's Strict backward: 19 -> 14 ms). Their own bound only caps the list.
  constexpr size_t kGraphsAhead = 4, kGroupsAhead = 1024;
  while (runningGraphs_ > kGraphsAhead || running_.size() > kGroupsAhead) {
    running_.front().done.await();
    retireFront();
  }
}

void FusedGraph::pushRunning(RunningGraph run) {
  run.opGroup = flushingOpGroup_;
  runningGraphs_ += !run.opGroup;
  running_.push_back(std::move(run));
}

void FusedGraph::flushOpGroup() {
  struct Unset {
    bool& flag;
    ~Unset() { flag = false; }
  } unset{flushingOpGroup_};
  flushingOpGroup_ = true;
  flush("op group");
}

void FusedGraph::dropRunningHolds(const pjrt::Buffer* buffer) {
  // A program launched earlier (the backward graph, when the optimizer step replays right
  // after it) may still read a buffer the next program donates. PJRT orders a donating
  // execution after every pending use of the buffer, so the running graph's own reference is
  // not needed to keep it alive: drop it, rather than wait for that program.
  for (RunningGraph& r : running_)
    for (std::shared_ptr<pjrt::Buffer>& in : r.inputs)
      if (in.get() == buffer) in.reset();
}

FusedStats FusedGraph::stats() const {
  FusedStats s = stats_;
  for (const RunningGraph& r : running_) s.runningGraphs += !r.done.ready();
  return s;
}

void FusedGraph::forget(DeviceStorage* s) {
  if (!s->inGraph) return;
  values_.erase(s);
  if (s->fusedSlot >= 0 && static_cast<size_t>(s->fusedSlot) < order_.size() && order_[s->fusedSlot] == s)
    order_[s->fusedSlot] = nullptr;
  s->inGraph = s->written = false;
  s->fusedSlot = -1;
}

size_t FusedGraph::donateOverwrittenBuffers(const std::vector<DeviceStorage*>& outputs,
                                            const std::vector<Value>& rets) {
  // A storage that the graph both read from its buffer and overwrites (parameters,
  // optimizer state, anything updated in place) hands its old buffer to XLA to
  // reuse for the new value: no new allocation, half the peak memory. Only when
  // nothing but the storage and this graph holds the buffer (a host read in
  // progress keeps its own reference) and the new value has the same type.
  std::unordered_map<DeviceStorage*, size_t> paramOf;
  for (size_t p = 0; p < params_.size(); ++p)
    if (params_[p].storage) paramOf.emplace(params_[p].storage, p);
  size_t donated = 0;
  for (size_t r = 0; r < outputs.size(); ++r) {
    auto it = paramOf.find(outputs[r]);
    if (it == paramOf.end()) continue;
    Param& p = params_[it->second];
    if (p.buffer != outputs[r]->buffer || !(p.type == rets[r].type)) continue;
    // Whether a buffer is donated is part of the module text: a hold that only says how far the
    // device has got (an earlier graph's inputs) must not decide it, or the same step compiles
    // again whenever the host is ahead of the device.
    if (p.buffer.use_count() != 2) dropRunningHolds(p.buffer.get());
    if (p.buffer.use_count() != 2) continue;
    b_->aliasParameter(it->second, static_cast<int32_t>(r));
    ++donated;
  }
  return donated;
}

std::shared_ptr<pjrt::Executable> FusedGraph::programFor(std::string text, bool& hit, double& seconds) {
  seconds = 0;
  if (std::shared_ptr<pjrt::Executable>* cached = cache_.find(text)) {
    hit = true;
    ++stats_.cacheHits;
    return *cached;
  }
  hit = false;
  if (logHlo()) std::cerr << "[torch_tpu] compiling fused graph of " << ops_ << " ops:\n" << text;
  std::shared_ptr<pjrt::Executable> exe;
  try {
    CompiledProgram program = compileWithCache(Runtime::get().client(), text, pjrt::CompileOptions{},
                                               "fused graph");
    exe = std::move(program.exe);
    seconds = program.seconds;
    Executor::get().noteFusedProgramLocked(program.compiled, seconds);
  } catch (const pjrt::PjrtError& e) {
    std::string first = firstOp_;
    size_t n = ops_;
    reset();
    std::string msg = e.what();
    if (msg.size() > 2000) msg = msg.substr(0, 2000) + "...";
    throw std::runtime_error("torch_tpu: XLA could not compile a fused graph of " + std::to_string(n) +
                             " ops starting at " + first + ": " + msg +
                             "\n(set TORCH_TPU_LOG=hlo to print the StableHLO module)");
  }
  cache_.insert(std::move(text), exe);
  ++stats_.compiles;
  Executor::get().relieveMappingsLocked();
  return exe;
}

void FusedGraph::flush(const char* reason) {
  if (replay_) {
    flushReplay(reason);
    return;
  }
  if (ops_ == 0) {
    if (capture_ && std::strcmp(reason, "compiled graph") == 0) capture_.reset();
    reset();
    return;
  }
  std::vector<DeviceStorage*> outputs;
  std::vector<Value> rets;
  for (DeviceStorage* s : order_) {
    if (!s || !s->written) continue;
    outputs.push_back(s);
    rets.push_back(values_.at(s));
  }
  size_t donated = donateOverwrittenBuffers(outputs, rets);
  if (indexFlag_) rets.push_back(*indexFlag_);  // last: the device's new flag
  auto tText = std::chrono::steady_clock::now();
  b_->ret(rets);
  bool hit = false;
  double seconds = 0;
  std::shared_ptr<pjrt::Executable> exe = programFor(b_->module(), hit, seconds);
  ++stats_.flushes;
  stats_.donatedBuffers += static_cast<int64_t>(donated);
  auto msSince = [](auto t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  double textMs = msSince(tText) - seconds * 1e3;
  std::vector<std::shared_ptr<pjrt::Buffer>> operandBuffers;
  std::vector<PJRT_Buffer*> args;
  for (const Param& p : params_) {
    if (p.indexFlag) {
      operandBuffers.push_back(Executor::get().flagBufferLocked(device_));
      args.push_back(operandBuffers.back()->raw());
    } else if (p.buffer) {
      args.push_back(p.buffer->raw());
    } else {
      operandBuffers.push_back(Executor::get().operandBufferLocked(p.operand, device_));
      args.push_back(operandBuffers.back()->raw());
    }
  }
  std::vector<std::unique_ptr<pjrt::Buffer>> results;
  RunningGraph run;
  try {
    results = exe->execute(args, Runtime::get().client().devices().at(device_), &run.done);
  } catch (const pjrt::PjrtError& e) {
    std::string graph = (capture_ ? "compiled graph of " : "fused graph of ") + std::to_string(ops_) +
                        " ops starting at " + firstOp_;
    reset();
    graphFailure(e, graph, outputs);
  } catch (...) {
    reset();
    throw;
  }
  if (trace::enabled() && !results.empty())
    trace::execution("fused graph (" + std::to_string(ops_) + " ops, " + reason + ")", static_cast<int>(device_),
                     results[0]->readyEvent());
  releaseFinished();
  run.inputs = std::move(operandBuffers);
  for (Param& p : params_)
    if (p.buffer) run.inputs.push_back(std::move(p.buffer));
  pushRunning(std::move(run));
  if (logFused()) {
    for (auto& r : results) r->awaitReady();
    std::cerr << "[torch_tpu] fused graph: " << ops_ << " ops from " << firstOp_ << ", " << outputs.size() << " outputs, cut by " << reason
              << ", " << (hit ? "cache hit" : "compiled in " + std::to_string(seconds * 1e3) + " ms")
              << ", module text " << textMs << " ms, run " << msSince(tText) - textMs - seconds * 1e3 << " ms\n";
    if (!opNames_.empty()) {
      std::cerr << "[torch_tpu]   ops:";
      for (const char* name : opNames_) std::cerr << ' ' << name;
      std::cerr << '\n';
    }
  }
  if (capture_ && std::strcmp(reason, "compiled graph") != 0) capture_.reset();  // cut early: not the whole graph
  if (capture_) {
    CapturedGraph& g = *capture_;
    g.exe = exe;
    g.device = device_;
    g.params.clear();
    for (size_t p = 0; p < params_.size(); ++p) {
      CapturedGraph::Param cp;
      const Param& q = params_[p];
      cp.indexFlag = q.indexFlag;
      cp.operand = q.operand;
      if (q.storage) {
        cp.storage = q.storage->address;
        cp.elem = q.type.dtype;
        cp.nbytes = q.storage->nbytes;
      }
      g.params.push_back(cp);
    }
    const std::vector<int32_t>& aliases = b_->aliases();
    for (size_t p = 0; p < aliases.size() && p < g.params.size(); ++p) g.params[p].donated = aliases[p] >= 0;
    g.results.clear();
    for (size_t r = 0; r < outputs.size(); ++r)
      g.results.push_back({outputs[r]->address, rets[r].dtype(), outputs[r]->nbytes});
    g.indexFlagResult = indexFlag_.has_value();
    g.complete = true;
    capture_.reset();
  }
  if (recording_ && recording_->ops.size() == ops_ && recording_->params.size() == params_.size()) {
    // Kept for fused replay: the next graph starting with the same op binds to this program.
    FusedRecording& rec = *recording_;
    CapturedGraph& g = rec.graph;
    g.exe = exe;
    g.device = device_;
    const std::vector<int32_t>& aliases = b_->aliases();
    for (size_t p = 0; p < params_.size(); ++p) {
      CapturedGraph::Param cp;
      cp.indexFlag = params_[p].indexFlag;
      cp.donated = p < aliases.size() && aliases[p] >= 0;
      g.params.push_back(cp);
    }
    for (size_t r = 0; r < outputs.size(); ++r) {
      g.results.push_back({0, rets[r].dtype(), outputs[r]->nbytes});
      rec.resultSlots.push_back(outputs[r]->fusedSlot);
    }
    g.indexFlagResult = indexFlag_.has_value();
    g.complete = true;
    rec.builder = std::move(b_);
    b_ = std::make_unique<hlo::Builder>();
    keepRecording(reason);
  }
  if (indexFlag_) Executor::get().setFlagLocked(device_, std::shared_ptr<pjrt::Buffer>(std::move(results.back())));
  for (size_t r = 0; r < outputs.size(); ++r) {
    outputs[r]->buffer = std::shared_ptr<pjrt::Buffer>(std::move(results[r]));
    outputs[r]->lost.reset();
    outputs[r]->elem = rets[r].dtype();
    Executor::get().trackInFlightLocked(outputs[r]->buffer, device_);
  }
  reset();
}

void FusedGraph::keepRecording(const char*) {
  // Streams that start alike are kept side by side (a step with a data-dependent branch); the same
  // stream recorded again replaces its older recording.
  const FusedRecording& rec = *recording_;
  std::erase_if(recordings_, [&rec](const auto& r) {
    if (r->ops.size() != rec.ops.size()) return false;
    for (size_t i = 0; i < rec.ops.size(); ++i)
      if (r->ops[i].signature != rec.ops[i].signature) return false;
    return true;
  });
  recordings_.insert(recordings_.begin(), std::move(recording_));
  if (recordings_.size() > kMaxRecordings) recordings_.pop_back();
}

}  // namespace tpu::runtime

namespace tpu::runtime {

void FusedGraph::launch(const CapturedGraph& g, std::vector<std::shared_ptr<pjrt::Buffer>> held,
                        const std::vector<HostOperand>& operands, const std::vector<DeviceStorage*>& outputs,
                        const char* label) {
  std::vector<PJRT_Buffer*> args;
  args.reserve(g.params.size());
  for (size_t p = 0; p < g.params.size(); ++p) {
    if (g.params[p].indexFlag) held[p] = Executor::get().flagBufferLocked(g.device);
    else if (!held[p]) held[p] = Executor::get().operandBufferLocked(operands.at(p), g.device);
    args.push_back(held[p]->raw());
  }
  RunningGraph run;
  std::vector<std::unique_ptr<pjrt::Buffer>> results;
  try {
    results = g.exe->execute(args, Runtime::get().client().devices().at(g.device), &run.done);
  } catch (const pjrt::PjrtError& e) {
    graphFailure(e, label, outputs);
  }
  if (trace::enabled() && !results.empty()) trace::execution(label, static_cast<int>(g.device), results[0]->readyEvent());
  releaseFinished();
  run.inputs = std::move(held);
  pushRunning(std::move(run));
  if (g.indexFlagResult) Executor::get().setFlagLocked(g.device, std::shared_ptr<pjrt::Buffer>(std::move(results.back())));
  for (size_t r = 0; r < g.results.size(); ++r) {
    DeviceStorage* s = outputs.at(r);
    if (!s) continue;  // died before the flush: never materialised for anyone
    s->buffer = std::shared_ptr<pjrt::Buffer>(std::move(results[r]));
    s->lost.reset();
    s->elem = g.results[r].elem;
    Executor::get().trackInFlightLocked(s->buffer, g.device);
  }
}

void FusedGraph::replay(const CapturedGraph& g, const std::vector<DeviceStorage*>& inputs,
                        const std::vector<HostOperand>& operands, const std::vector<DeviceStorage*>& outputs) {
  // The same launch as flush() without the trace: bind buffers, run, hand out results.
  std::vector<std::shared_ptr<pjrt::Buffer>> held(g.params.size());
  int64_t donated = 0;
  for (size_t p = 0; p < g.params.size(); ++p) {
    const CapturedGraph::Param& cp = g.params[p];
    if (cp.indexFlag || !cp.storage) continue;
    DeviceStorage* s = inputs.at(p);
    if (!s || !s->buffer || s->inGraph || s->elem != cp.elem || s->nbytes != cp.nbytes)
      throw std::runtime_error("torch_tpu: compiled graph replay: input storage does not match its capture");
    if (cp.donated && s->buffer.use_count() != 1) dropRunningHolds(s->buffer.get());
    if (cp.donated && s->buffer.use_count() != 1)
      throw std::runtime_error("torch_tpu: compiled graph replay: a donated input buffer is shared");
    donated += cp.donated;
    held[p] = s->buffer;
  }
  for (DeviceStorage* s : outputs)
    if (!s) throw std::logic_error("torch_tpu: compiled graph replay: no storage for a result");
  launch(g, std::move(held), operands, outputs, "compiled graph (replay)");
  ++stats_.replays;
  stats_.donatedBuffers += donated;
}

bool FusedGraph::replayOp(const OpCall& call, uint64_t signature) {
  // The op matches the recorded one when its signature does: everything the trace would depend
  // on is in it, so binding its storages and operands to the recorded parameters gives the
  // program the traced graph would have built.
  auto matches = [&](const std::shared_ptr<FusedRecording>& r) {
    return replayPos_ < r->ops.size() && r->ops[replayPos_].signature == signature;
  };
  std::erase_if(candidates_, [&](const auto& r) { return !matches(r); });
  if (candidates_.empty()) return false;
  if (!matches(replay_)) replay_ = candidates_.front();  // same ops so far: same bindings
  const FusedRecording& rec = *replay_;
  if (boundBuffers_.size() < rec.params.size()) {
    boundBuffers_.resize(rec.params.size());
    boundOperands_.resize(rec.params.size(), HostOperand{hlo::DType::F32});
  }
  const RecordedOp& op = rec.ops[replayPos_];
  size_t begin = replayPos_ ? rec.ops[replayPos_ - 1].paramsEnd : 0;
  // Slots in the trace's first-touch order: inputs, then outputs.
  for (const TensorArg& a : call.inputs) touchSlot(a.storage);
  for (const TensorArg& a : call.outputs) {
    touchSlot(a.storage);
    a.storage->written = true;
  }
  for (size_t p = begin; p < op.paramsEnd; ++p) {
    const RecordedParam& rp = rec.params[p];
    switch (rp.kind) {
      case RecordedParam::Kind::Storage: boundBuffers_[p] = order_[rp.index]->buffer; break;
      case RecordedParam::Kind::Operand: boundOperands_[p] = call.operands[rp.index]; break;
      case RecordedParam::Kind::Offset: {
        size_t arg = static_cast<size_t>(rp.index), nIn = call.inputs.size();
        const TensorArg& a = arg < nIn ? call.inputs[arg] : call.outputs[arg - nIn];
        boundOperands_[p] = HostOperand::integer(hlo::DType::S64, a.view.offset);
        break;
      }
      case RecordedParam::Kind::Flag: break;
    }
  }
  ++replayPos_;
  return true;
}

void FusedGraph::flushReplay(const char* reason) {
  size_t n = replayPos_;
  // A candidate that ends here, if any (another may go on longer).
  for (const auto& c : candidates_)
    if (c->ops.size() == n) replay_ = c;
  std::shared_ptr<FusedRecording> rec = replay_;
  bool ok = n == rec->ops.size();
  // Every storage the graph wrote that is still alive must be a result of the recorded program.
  for (size_t slot = 0; ok && slot < order_.size(); ++slot)
    if (order_[slot] && order_[slot]->written)
      ok = std::binary_search(rec->resultSlots.begin(), rec->resultSlots.end(), static_cast<int32_t>(slot));
  for (size_t p = 0; ok && p < rec->graph.params.size(); ++p) {
    if (!rec->graph.params[p].donated) continue;
    // Donated: nobody but the graph and (at most) its own storage may hold the buffer.
    const std::shared_ptr<pjrt::Buffer>& buf = boundBuffers_[p];
    DeviceStorage* s = order_[rec->params[p].index];
    auto others = [&] { return buf.use_count() - 1 - (s && s->buffer == buf ? 1 : 0); };
    if (others() != 0) dropRunningHolds(buf.get());
    ok = others() == 0;
  }
  if (!ok) {
    // Cut earlier or later than the recording, other tensors alive, or a buffer shared: the
    // graph as traced (its module text finds the program when it was compiled before).
    ++stats_.replayFallbacks;
    resumeTrace();
    flush(reason);
    return;
  }
  std::vector<DeviceStorage*> outputs;
  outputs.reserve(rec->resultSlots.size());
  for (int32_t slot : rec->resultSlots) {
    DeviceStorage* s = order_[slot];
    outputs.push_back(s && s->written ? s : nullptr);
  }
  ++stats_.flushes;
  ++stats_.eagerReplays;
  ++stats_.cacheHits;
  for (const CapturedGraph::Param& p : rec->graph.params) stats_.donatedBuffers += p.donated;
  rec->graph.device = device_;
  try {
    launch(rec->graph, std::move(boundBuffers_), boundOperands_, outputs, "fused graph (replay)");
  } catch (...) {
    reset();
    throw;
  }
  if (logFused())
    std::cerr << "[torch_tpu] fused graph: " << ops_ << " ops from " << firstOp_ << " replayed (no trace), cut by "
              << reason << "\n";
  reset();
}

void FusedGraph::resumeTrace() {
  // The state a trace of the ops bound so far would have left: the recorded module's prefix,
  // each live storage's value, the parameters with the buffers and operands bound to them.
  std::shared_ptr<FusedRecording> rec = replay_;
  size_t n = replayPos_;
  const RecordedOp& last = rec->ops[n - 1];
  b_ = rec->builder->prefix(last.bodyEnd, last.paramsEnd, last.nextId);
  params_.clear();
  for (size_t p = 0; p < last.paramsEnd; ++p) {
    const RecordedParam& rp = rec->params[p];
    Param q;
    q.type = b_->params()[p].type;
    switch (rp.kind) {
      case RecordedParam::Kind::Storage:
        q.buffer = std::move(boundBuffers_[p]);
        q.storage = order_[rp.index];
        break;
      case RecordedParam::Kind::Operand:
      case RecordedParam::Kind::Offset: q.operand = boundOperands_[p]; break;
      case RecordedParam::Kind::Flag: q.indexFlag = true; break;
    }
    params_.push_back(std::move(q));
  }
  values_.clear();
  for (size_t w = 0; w < last.writesEnd; ++w) {
    DeviceStorage* s = order_[rec->writes[w].first];
    if (s) values_[s] = rec->writes[w].second;
  }
  indexFlag_ = last.flag;
  recording_ = std::make_shared<FusedRecording>();
  recording_->ops.assign(rec->ops.begin(), rec->ops.begin() + static_cast<ptrdiff_t>(n));
  recording_->params.assign(rec->params.begin(), rec->params.begin() + last.paramsEnd);
  recording_->writes.assign(rec->writes.begin(), rec->writes.begin() + last.writesEnd);
  replay_.reset();
  candidates_.clear();
  boundBuffers_.clear();
  boundOperands_.clear();
  replayPos_ = 0;
}

}  // namespace tpu::runtime
