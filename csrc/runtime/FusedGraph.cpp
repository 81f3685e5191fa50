#include "FusedGraph.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "CompileCache.h"
#include "DeviceTrace.h"
#include "Executor.h"
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
}  // namespace

FusedGraph::FusedGraph() : b_(std::make_unique<hlo::Builder>()) {}

void FusedGraph::reset() {
  for (DeviceStorage* s : order_)
    if (s) s->inGraph = s->written = false;
  b_ = std::make_unique<hlo::Builder>();
  values_.clear();
  order_.clear();
  params_.clear();
  ops_ = 0;
  firstOp_.clear();
  opNames_.clear();
  indexFlag_.reset();
}

bool FusedGraph::record(const OpCall& call, FunctionRef<BuildFn> build, bool observeSteps) {
  if (ops_ == 0) {
    firstOp_ = call.name;
    if (!call.outputs.empty()) device_ = call.outputs[0].storage->device;
    else if (!call.inputs.empty()) device_ = call.inputs[0].storage->device;
  }
  b_->setDotPrecision(call.dotPrecision);
  TraceResult traced = traceOp(*b_, *this, call, build);
  if (call.checksIndices) {
    // Index ops chain the device's out-of-range flag through the graph, as strict programs do.
    if (!indexFlag_) {
      indexFlag_ = b_->parameter(hlo::Type{hlo::DType::S32, {}});
      Param p;
      p.indexFlag = true;
      params_.push_back(p);
    }
    indexFlag_ = chainIndexFlag(*b_, *indexFlag_, *traced.indexFlag, Executor::get().flagCodeLocked(call.name));
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
  } else {
    v = b.full(hlo::Type{as, {static_cast<int64_t>(s->nbytes / hlo::byteWidth(as))}}, 0);
    // Never-written memory read as zeros is baked into the module: a replay with a written
    // storage there would be wrong, so such a graph is not captured.
    capture_.reset();
  }
  values_.emplace(s, v);
  order_.push_back(s);
  s->inGraph = true;
  return v;
}

void FusedGraph::setStorageValue(DeviceStorage* s, Value flat) {
  if (!s->inGraph) {
    order_.push_back(s);
    s->inGraph = true;
  }
  values_[s] = flat;
  s->written = true;
}

Value FusedGraph::operandValue(hlo::Builder& b, const HostOperand& o) {
  hlo::Shape shape;
  if (o.count) shape.push_back(o.count);
  Param p;
  p.operand = o;
  params_.push_back(p);
  return b.parameter(hlo::Type{o.dtype, shape});
}

void FusedGraph::releaseFinished() {
  while (!running_.empty() && running_.front().done.ready()) running_.pop_front();
  // Bounded: a host that outruns the device waits here rather than piling up graphs.
  while (running_.size() > 4) {
    running_.front().done.await();
    running_.pop_front();
  }
}

void FusedGraph::releaseHolders(const pjrt::Buffer* buffer) {
  // A program launched earlier (the backward graph, when the optimizer step replays right
  // after it) may still read a buffer the next program overwrites in place: wait for the
  // programs that hold it, oldest first, so the buffer can be donated.
  auto holds = [buffer](const RunningGraph& r) {
    for (const auto& in : r.inputs)
      if (in.get() == buffer) return true;
    return false;
  };
  while (std::any_of(running_.begin(), running_.end(), holds)) {
    running_.front().done.await();
    running_.pop_front();
  }
}

FusedStats FusedGraph::stats() const {
  FusedStats s = stats_;
  for (const RunningGraph& r : running_) s.runningGraphs += !r.done.ready();
  return s;
}

void FusedGraph::forget(DeviceStorage* s) {
  if (!s->inGraph) return;
  values_.erase(s);
  for (DeviceStorage*& o : order_)
    if (o == s) o = nullptr;
  s->inGraph = s->written = false;
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
    if (p.buffer != outputs[r]->buffer || p.buffer.use_count() != 2 || !(p.type == rets[r].type)) continue;
    b_->aliasParameter(it->second, static_cast<int32_t>(r));
    ++donated;
  }
  return donated;
}

void FusedGraph::flush(const char* reason) {
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
  std::string text = b_->module();
  std::shared_ptr<pjrt::Executable>* cached = cache_.find(text);
  bool hit = cached != nullptr;
  double seconds = 0;
  std::shared_ptr<pjrt::Executable> exe;
  if (hit) {
    exe = *cached;
    ++stats_.cacheHits;
  } else {
    if (logHlo()) std::cerr << "[torch_tpu] compiling fused graph of " << ops_ << " ops:\n" << text;
    try {
      CompiledProgram program = compileWithCache(Runtime::get().client(), text, pjrt::CompileOptions{},
                                                 "fused graph");
      exe = std::move(program.exe);
      seconds = program.seconds;
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
  }
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
  running_.push_back(std::move(run));
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
  if (indexFlag_) Executor::get().setFlagLocked(device_, std::shared_ptr<pjrt::Buffer>(std::move(results.back())));
  for (size_t r = 0; r < outputs.size(); ++r) {
    outputs[r]->buffer = std::shared_ptr<pjrt::Buffer>(std::move(results[r]));
    outputs[r]->elem = rets[r].dtype();
    Executor::get().trackInFlightLocked(outputs[r]->buffer, device_);
  }
  reset();
}

}  // namespace tpu::runtime

namespace tpu::runtime {

void FusedGraph::replay(const CapturedGraph& g, const std::vector<DeviceStorage*>& inputs,
                        const std::vector<HostOperand>& operands, const std::vector<DeviceStorage*>& outputs) {
  // The same launch as flush() without the trace: bind buffers, run, hand out results.
  std::vector<std::shared_ptr<pjrt::Buffer>> held;
  std::vector<PJRT_Buffer*> args;
  for (size_t p = 0; p < g.params.size(); ++p) {
    const CapturedGraph::Param& cp = g.params[p];
    if (cp.indexFlag) {
      held.push_back(Executor::get().flagBufferLocked(g.device));
    } else if (cp.storage) {
      DeviceStorage* s = inputs.at(p);
      if (!s || !s->buffer || s->inGraph || s->elem != cp.elem || s->nbytes != cp.nbytes)
        throw std::runtime_error("torch_tpu: compiled graph replay: input storage does not match its capture");
      if (cp.donated && s->buffer.use_count() != 1) releaseHolders(s->buffer.get());
      if (cp.donated && s->buffer.use_count() != 1)
        throw std::runtime_error("torch_tpu: compiled graph replay: a donated input buffer is shared");
      held.push_back(s->buffer);
    } else {
      held.push_back(Executor::get().operandBufferLocked(operands.at(p), g.device));
    }
    args.push_back(held.back()->raw());
  }
  RunningGraph run;
  std::vector<std::unique_ptr<pjrt::Buffer>> results =
      g.exe->execute(args, Runtime::get().client().devices().at(g.device), &run.done);
  if (trace::enabled() && !results.empty())
    trace::execution("compiled graph (replay)", static_cast<int>(g.device), results[0]->readyEvent());
  releaseFinished();
  run.inputs = std::move(held);
  running_.push_back(std::move(run));
  ++stats_.replays;
  if (g.indexFlagResult) Executor::get().setFlagLocked(g.device, std::shared_ptr<pjrt::Buffer>(std::move(results.back())));
  for (size_t r = 0; r < g.results.size(); ++r) {
    DeviceStorage* s = outputs.at(r);
    s->buffer = std::shared_ptr<pjrt::Buffer>(std::move(results[r]));
    s->elem = g.results[r].elem;
    Executor::get().trackInFlightLocked(s->buffer, g.device);
  }
}

}  // namespace tpu::runtime
