#include "Executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <stdexcept>

#include "BufferReaper.h"
#include "CompileCache.h"
#include "DeviceTrace.h"
#include "ElementCodec.h"
#include "ExecutionMode.h"
#include "OpTrace.h"
#include "Runtime.h"
#include "Streams.h"
#include "csrc/pjrt/Error.h"

namespace tpu::runtime {

using hlo::DType;
using hlo::Value;

struct Executor::Entry {
  std::shared_ptr<pjrt::Executable> exe;
  // Each parameter in order: a storage index (>= 0), operand k as -(k + 1), or
  // kFlagParam (the device's out-of-range flag).
  std::vector<int32_t> params;
  std::vector<int32_t> resultStorages;  // storage index each result replaces
  std::vector<char> resultDonated;       // per result: it reuses the buffer it replaces
  std::vector<DType> resultElems;
  int32_t flagResult = -1;       // result holding the device's new out-of-range flag
  int32_t nonFiniteResult = -1;  // debug: pred "finite inputs gave a non-finite output"
  int32_t donations = 0;         // parameters aliased to their storage's result (donated buffers)
};

namespace {

constexpr int32_t kFlagParam = std::numeric_limits<int32_t>::min();
// Parameter kOffsetParam - a: the view offset of argument a (inputs, then outputs) as an S64 operand.
constexpr int32_t kOffsetParam = -(1 << 20);

// A nonzero view offset that the program takes as an operand (ViewSpec.h): one program for every
// position of a slice that moves (a KV cache written at step i), in strict programs as in fused graphs.
bool dynamicOffset(const TensorArg& a, bool write) {
  return a.view.offset != 0 &&
         offsetCanBeOperand(a.view, static_cast<int64_t>(a.storage->nbytes / hlo::byteWidth(a.view.dtype)), write);
}

std::atomic<int64_t> gNextOpId{1};

bool logEnabled(const char* what) {
  static const char* env = std::getenv("TORCH_TPU_LOG");
  return env && (std::strstr(env, what) || std::strstr(env, "all"));
}

void appendView(std::vector<int64_t>& key, int32_t storageIndex, const ViewSpec& v, bool dynamic) {
  key.push_back(storageIndex);
  key.push_back(static_cast<int64_t>(v.dtype));
  key.push_back(dynamic ? -1 : v.offset);
  key.push_back(static_cast<int64_t>(v.sizes.size()));
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    key.push_back(v.sizes[d]);
    key.push_back(v.strides[d]);
  }
}

// Debug mode checks the float outputs of an op unless a host operand is
// already non-finite (x.masked_fill(m, -inf) is not an error).
bool wantsNonFiniteCheck(const OpCall& call) {
  bool floatOut = false;
  for (const TensorArg& a : call.outputs) floatOut |= hlo::isFloat(a.view.dtype);
  if (!floatOut) return false;
  for (const HostOperand& o : call.operands) {
    if (!hlo::isFloat(o.dtype)) continue;
    for (int64_t k = 0; k < std::max<int64_t>(o.count, 1); ++k)
      if (!std::isfinite(o.f[k])) return false;
  }
  return nonFinitePolicy() != NonFinitePolicy::Off;
}

// A failed launch or program names the op and what its outputs needed.
[[noreturn]] void deviceFailure(const OpCall& call, const pjrt::PjrtError& e, size_t bytes) {
  bool oom = e.outOfMemory();
  std::string msg = "torch_tpu: " + currentOpName(call.name) + " failed on the device" +
                    (oom ? " allocating its outputs (" : " (its outputs: ") + std::to_string(bytes) +
                    " bytes requested)" + calledAt() + ": " + e.what();
  raiseError(oom ? ErrorKind::OutOfMemory : ErrorKind::Runtime, msg);
}

// Only the storage holds the buffer (no pending download, fused graph or other reference; programs
// still reading it are ordered before a donating one by PJRT), and it is not host memory on loan.
bool onlyStorageHolds(const DeviceStorage& s) {
  if (!s.buffer || s.buffer.use_count() != 1) return false;
  return s.lent.owner_before(s.buffer) || s.buffer.owner_before(s.lent);
}

int32_t storageIndex(std::vector<DeviceStorage*>& storages, DeviceStorage* s) {
  for (size_t i = 0; i < storages.size(); ++i)
    if (storages[i] == s) return static_cast<int32_t>(i);
  storages.push_back(s);
  return static_cast<int32_t>(storages.size() - 1);
}

}  // namespace

int64_t newOpId() { return gNextOpId++; }

bool Executor::donatable(const DeviceStorage& s) {
  if (onlyStorageHolds(s)) return true;
  if (!s.buffer) return false;
  // Whether a buffer is donated is part of the program's signature: an earlier graph's hold, which
  // only says how far the device has got, must not decide it (the same step would compile again
  // whenever the host is ahead of the device).
  std::lock_guard<std::mutex> lock(mutex_);
  fusedGraph_.dropRunningHolds(s.buffer.get());
  return onlyStorageHolds(s);
}

static size_t memoryCacheBound() {
  // Programs kept loaded (TORCH_TPU_MEMORY_CACHE_MAX): ~3-10 memory mappings each on
  // XLA:CPU, well inside Linux's default 65530 at the default of 4096.
  const char* env = std::getenv("TORCH_TPU_MEMORY_CACHE_MAX");
  return env ? static_cast<size_t>(std::max(2L, std::atol(env))) : 4096;
}

Executor::Executor() : cache_(memoryCacheBound()) {
  // The mode itself is set from Python (torch_tpu.set_eager_mode / the environment).
  if (const char* maxOps = std::getenv("TORCH_TPU_FUSED_MAX_OPS")) fusedMaxOps_ = std::max(1, std::atoi(maxOps));
}

void Executor::setFused(bool fused) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (captureDepth_ > 0) {  // a compiled graph is being traced: the new mode applies after it
    fusedBeforeCapture_ = fused;
    return;
  }
  fusedGraph_.flush("mode change");
  fusedMode_ = fused;
}

void Executor::beginCompiledGraph() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (captureDepth_++ > 0) return;
  fusedGraph_.flush("compiled graph start");
  fusedBeforeCapture_ = fusedMode_;
  fusedMode_ = true;
}

void Executor::captureCompiledGraph(std::shared_ptr<CapturedGraph> into) {
  std::lock_guard<std::mutex> lock(mutex_);
  fusedGraph_.captureNextFlush(captureDepth_ > 0 ? std::move(into) : nullptr);
}

void Executor::replayCompiledGraph(const CapturedGraph& g, const std::vector<DeviceStorage*>& inputs,
                                   const std::vector<HostOperand>& operands,
                                   const std::vector<DeviceStorage*>& outputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  fusedGraph_.flush("compiled graph start");  // pending eager work first, as beginCompiledGraph does
  fusedGraph_.replay(g, inputs, operands, outputs);
  ++stats_.compiledGraphs;
}

bool Executor::beginOpGroup(bool waitForOtherThread) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (waitForOtherThread && grouping_ && groupThread_ != std::this_thread::get_id()) {
    // Bounded: a step that itself waits for this thread (a barrier inside it) must not hang both.
    groupEnded_.wait_for(lock, std::chrono::seconds(10), [this] { return !grouping_; });
  }
  if (fusedMode_ || grouping_) return false;
  grouping_ = true;
  groupThread_ = std::this_thread::get_id();
  fusedMode_ = true;
  return true;
}

bool Executor::fusesHereLocked(const OpCall& call) {
  if (!grouping_) return fusedMode_;  // under the lock: a group may have ended since the caller looked
  if (groupThread_ == std::this_thread::get_id()) return true;
  // Another thread's op while a group is open runs strict, as its thread's mode says; its ops never join the
  // group (their programs stay as they are). One that touches a storage the group holds runs after the group so
  // far (it may read what the group wrote, or overwrite what it read); any other leaves the group whole, so that
  // where threads' ops interleave never changes how a group is cut (nor its rounding).
  auto held = [](const TensorArg& a) { return a.storage->inGraph; };
  if (std::any_of(call.inputs.begin(), call.inputs.end(), held) ||
      std::any_of(call.outputs.begin(), call.outputs.end(), held))
    fusedGraph_.flush("op group: another thread");
  return false;
}

void Executor::endOpGroup() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!grouping_ || groupThread_ != std::this_thread::get_id()) return;  // never another thread's group
  grouping_ = false;
  fusedMode_ = false;
  struct Notify {  // also when the flush raises
    std::condition_variable& ended;
    ~Notify() { ended.notify_all(); }
  } notify{groupEnded_};
  fusedGraph_.flushOpGroup();
}

void Executor::endCompiledGraph() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (captureDepth_ == 0 || --captureDepth_ > 0) return;
  fusedMode_ = fusedBeforeCapture_;
  ++stats_.compiledGraphs;
  fusedGraph_.flush("compiled graph");
}

void Executor::flush(const char* reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  fusedGraph_.flush(reason);
}

FusedStats Executor::fusedStats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fusedGraph_.stats();
}

void Executor::setFusedMaxOps(size_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  fusedMaxOps_ = std::max<size_t>(n, 1);
  fusedGraph_.steps().reset();  // periods were fitted to the old bound
}

void Executor::forget(DeviceStorage* storage) {
  std::lock_guard<std::mutex> lock(mutex_);
  fusedGraph_.forget(storage);
}

Executor& Executor::get() {
  static Executor* executor = new Executor();  // outlives static destruction order
  return *executor;
}

size_t Executor::KeyHash::operator()(const std::vector<int64_t>& k) const noexcept {
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : k) {
    h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return static_cast<size_t>(h);
}

int Executor::deviceOf(const OpCall& call) {
  // One program runs on one device: every tensor of an op must live there (as CUDA requires).
  const DeviceStorage* first = nullptr;
  auto check = [&](const TensorArg& a) {
    if (!first) first = a.storage;
    else if (a.storage->device != first->device)
      raiseError(ErrorKind::Runtime, "Expected all tensors to be on the same device, but found at least two "
                                     "devices, tpu:" + std::to_string(first->device) + " and tpu:" +
                                     std::to_string(a.storage->device) + "! (in " + currentOpName(call.name) +
                                     ")");
  };
  for (const TensorArg& a : call.inputs) check(a);
  for (const TensorArg& a : call.outputs) check(a);
  return first ? first->device : 0;
}

void Executor::recordFusedLocked(const OpCall& call, FunctionRef<BuildFn> build, int device) {
  // One graph per device: an op on another device runs what is pending first.
  if (fusedGraph_.ops() > 0 && fusedGraph_.device() != device) fusedGraph_.flush("device change");
  // A compiled graph: never cut by periods, never replayed as an eager graph; an op group: replayed, not cut.
  bool boundary = fusedGraph_.record(call, build, /*observeSteps=*/captureDepth_ == 0 && !grouping_,
                                     /*replayable=*/captureDepth_ == 0);
  ++stats_.ops;
  if (captureDepth_ > 0) return;
  if (boundary) {
    fusedGraph_.flush("step boundary");
  } else if (fusedGraph_.ops() >= fusedMaxOps_) {
    fusedGraph_.flush("size bound");
    fusedGraph_.steps().learn(fusedMaxOps_);
  }
}

void Executor::run(const OpCall& call, FunctionRef<BuildFn> build) {
  int device = deviceOf(call);
  if (fusedMode_) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fusesHereLocked(call)) {
      recordFusedLocked(call, build, device);
      return;
    }
  }
  bool debug = eagerMode() == EagerMode::Debug;
  bool checkNonFinite = debug && wantsNonFiniteCheck(call);
  // Debug checks the storages the op wrote after its Strict program ran (FiniteCheck), which is exact when
  // every float storage it read is finite. Where one is not (rare: a NaN or Inf is already around), the
  // check is traced into the op's own program instead, which sees whether the op's input views were finite.
  bool traceCheck = false;
  size_t checksLoaded = checkNonFinite ? finiteCheck_.loaded() : 0;
  // The signature: every fact the program depends on, as integers.
  thread_local std::vector<int64_t> key;
  thread_local std::vector<DeviceStorage*> storages;
  key.clear();
  storages.clear();
  key.push_back(call.opId);
  key.push_back(static_cast<int64_t>(call.attrs.size()));
  key.insert(key.end(), call.attrs.begin(), call.attrs.end());
  for (const TensorArg& a : call.inputs) appendView(key, storageIndex(storages, a.storage), a.view, dynamicOffset(a, false));
  for (const TensorArg& a : call.outputs) appendView(key, storageIndex(storages, a.storage), a.view, dynamicOffset(a, true));
  // A storage's current buffer matters only if the program reads it: an output
  // that covers its whole storage is written without looking at the old bytes.
  // An in-place write (a storage read and written) whose old buffer nothing else holds donates it:
  // XLA updates it where it is instead of writing a whole new copy (a KV cache, a parameter).
  thread_local std::vector<char> donate;
  donate.assign(storages.size(), 0);
  for (size_t i = 0; i < storages.size(); ++i) {
    DeviceStorage* s = storages[i];
    bool read = false, written = false;
    for (const TensorArg& a : call.inputs) read |= a.storage == s;
    for (const TensorArg& a : call.outputs) {
      written |= a.storage == s;
      read |= a.storage == s && !a.view.coversStorage(s->nbytes);
    }
    if (read) requireComputed(*s);
    if (read && checkNonFinite && !traceCheck && hlo::isFloat(s->elem)) traceCheck = !finiteCheck_.knownFinite(*s);
    key.push_back(static_cast<int64_t>(s->nbytes));
    key.push_back(!read ? -2 : s->buffer ? static_cast<int64_t>(s->elem) : -1);
    donate[i] = read && written && donatable(*s);
    key.push_back(donate[i]);
  }
  for (const HostOperand& o : call.operands) key.push_back(static_cast<int64_t>(o.dtype) * 8 + o.count);
  key.push_back((call.checksIndices ? 1 : 0) | (traceCheck ? 2 : 0) | static_cast<int64_t>(call.dotPrecision) << 2);

  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::shared_ptr<Entry>* hit = cache_.find(key)) {
      entry = *hit;
      ++stats_.cacheHits;
    }
  }
  if (!entry) {
    entry = compile(call, build, storages, donate, traceCheck);
    std::lock_guard<std::mutex> lock(mutex_);
    cache_.insert(key, entry);
    ++stats_.cacheMisses;
    relieveMappingsLocked();
  }

  std::vector<PJRT_Buffer*> args;
  args.reserve(entry->params.size());
  thread_local std::vector<std::shared_ptr<pjrt::Buffer>> operandBuffers;
  operandBuffers.clear();
  // Index ops chain the device's flag: hold it from read to swap so that
  // concurrent index ops (autograd's device thread) never drop a flag.
  std::unique_lock<std::mutex> flagLock;
  std::shared_ptr<pjrt::Buffer> flagIn;
  if (entry->flagResult >= 0) {
    flagLock = std::unique_lock<std::mutex>(flagMutex_);
    flagIn = flagBuffer(device);
  }
  for (int32_t p : entry->params) {
    if (p == kFlagParam) {
      args.push_back(flagIn->raw());
    } else if (p >= 0) {
      args.push_back(storages[p]->buffer->raw());
    } else if (p <= kOffsetParam) {
      size_t arg = static_cast<size_t>(kOffsetParam - p), nIn = call.inputs.size();
      const TensorArg& a = arg < nIn ? call.inputs[arg] : call.outputs[arg - nIn];
      std::lock_guard<std::mutex> lock(mutex_);
      operandBuffers.push_back(operandBufferLocked(HostOperand::integer(DType::S64, a.view.offset), device));
      args.push_back(operandBuffers.back()->raw());
    } else {
      std::lock_guard<std::mutex> lock(mutex_);
      operandBuffers.push_back(operandBufferLocked(call.operands[-(p + 1)], device));
      args.push_back(operandBuffers.back()->raw());
    }
  }
  size_t bytes = 0;  // what the outputs need, for error messages
  for (int32_t s : entry->resultStorages) bytes += storages[s]->nbytes;
  Runtime& rt = Runtime::get();
  std::vector<std::unique_ptr<pjrt::Buffer>> results;
  try {
    results = entry->exe->execute(args, rt.client().devices().at(device));
  } catch (const pjrt::PjrtError& e) {
    deviceFailure(call, e, bytes);
  }
  if (trace::enabled() && !results.empty()) trace::execution(call.name, static_cast<int>(device), results[0]->readyEvent());
  std::shared_ptr<pjrt::Buffer> nonFinite;
  // The handles of donated buffers. Destroying one waits until the program that took it has started (the
  // plugin's PJRT_Buffer_Destroy blocks): on this thread, every in-place op would wait for the device to
  // catch up. The reaper drops them.
  thread_local std::vector<std::unique_ptr<pjrt::Buffer>> donatedHandles;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.ops;
    stats_.donatedBuffers += entry->donations;
    for (size_t r = 0; r < entry->resultStorages.size(); ++r) {
      DeviceStorage* s = storages[entry->resultStorages[r]];
      // Only the handle outlives the storage's reference: weak references to it (in-flight lists, streams)
      // expire now, as they would without the reaper, and never see a donated buffer.
      if (entry->resultDonated[r] && s->buffer.use_count() == 1) donatedHandles.push_back(s->buffer->takeHandle());
      s->buffer = std::shared_ptr<pjrt::Buffer>(std::move(results[r]));
      s->lost.reset();
      s->elem = entry->resultElems[r];
      trackInFlightLocked(s->buffer, device);
    }
    if (entry->flagResult >= 0) {
      setFlagLocked(device, std::shared_ptr<pjrt::Buffer>(std::move(results[entry->flagResult])));
    }
    if (entry->nonFiniteResult >= 0) nonFinite = std::shared_ptr<pjrt::Buffer>(std::move(results[entry->nonFiniteResult]));
  }
  if (flagLock.owns_lock()) flagLock.unlock();
  if (!donatedHandles.empty()) BufferReaper::get().retireDonated(donatedHandles);
  if (debug) debugCheck(call, *entry, storages, nonFinite, bytes);
  if (checkNonFinite && !traceCheck) {
    for (int32_t r : entry->resultStorages) {
      DeviceStorage& s = *storages[r];
      if (!hlo::isFloat(s.elem)) continue;
      if (finiteCheck_.allFinite(s)) FiniteCheck::markFinite(s);
      else reportNonFinite(call);
    }
  }
  if (checkNonFinite && finiteCheck_.loaded() != checksLoaded) {
    std::lock_guard<std::mutex> lock(mutex_);
    relieveMappingsLocked();
  }
}

void Executor::debugCheck(const OpCall& call, const Entry& entry, const std::vector<DeviceStorage*>& storages,
                          const std::shared_ptr<pjrt::Buffer>& nonFinite, size_t bytes) {
  // Wait for the op: a failure on the device surfaces here, naming the op.
  try {
    for (int32_t s : entry.resultStorages) storages[s]->buffer->awaitReady();
  } catch (const pjrt::PjrtError& e) {
    deviceFailure(call, e, bytes);
  }
  if (entry.flagResult >= 0) checkFlags(/*atOp=*/true);
  if (!nonFinite) return;
  uint8_t bad = 0;
  nonFinite->toHost(&bad, 1).await();
  if (bad) reportNonFinite(call);
}

void Executor::reportNonFinite(const OpCall& call) {
  std::string msg = "torch_tpu debug mode: " + currentOpName(call.name) +
                    " produced a non-finite value (NaN or Inf) from finite inputs" + calledAt() +
                    ". Set TORCH_TPU_DEBUG_NONFINITE=warn to warn instead, or =off to disable this check.";
  if (nonFinitePolicy() == NonFinitePolicy::Warn) warnUser(msg);
  else raiseError(ErrorKind::Runtime, msg);
}

std::shared_ptr<pjrt::Buffer> Executor::flagBuffer(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return flagBufferLocked(device);
}

int32_t Executor::flagCodeLocked(const OpCall& call) {
  // Only when a program is built: codes are constants of the programs.
  FlagCause cause = call.assertMessage
                        ? FlagCause{ErrorKind::Runtime, call.assertMessage}
                        : FlagCause{call.indexError, std::string("index out of range in ") +
                                                         (call.indexErrorOp ? call.indexErrorOp : call.name)};
  auto it = std::find(flagCauses_.begin(), flagCauses_.end(), cause);
  if (it == flagCauses_.end()) it = flagCauses_.insert(flagCauses_.end(), std::move(cause));
  return static_cast<int32_t>(it - flagCauses_.begin()) + 1;
}

void Executor::setFlagLocked(int device, std::shared_ptr<pjrt::Buffer> flag) {
  DeviceFlag& f = flags_[device];
  f.value = std::move(flag);
  f.dirty = true;
  flagsDirty_ = true;
}

std::shared_ptr<pjrt::Buffer> Executor::flagBufferLocked(int device) {
  if (flags_.size() <= static_cast<size_t>(device)) flags_.resize(device + 1);
  DeviceFlag& f = flags_[device];
  if (!f.zero) {
    int32_t zero = 0;
    f.zero = Runtime::get().client().bufferFromHost(&zero, pjrt::ElementType::S32, {}, device);
    f.value = f.zero;
  }
  return f.value;
}

void Executor::checkDeviceFlags() { checkFlags(/*atOp=*/false); }

void Executor::checkFlags(bool atOp) {
  if (!flagsDirty_.load()) return;
  std::vector<std::pair<size_t, std::shared_ptr<pjrt::Buffer>>> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    flagsDirty_ = false;
    for (size_t d = 0; d < flags_.size(); ++d) {
      if (!flags_[d].dirty) continue;
      flags_[d].dirty = false;
      pending.emplace_back(d, flags_[d].value);
    }
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    int32_t code = 0;
    pending[i].second->toHost(&code, sizeof code).await();
    if (code == 0) continue;
    FlagCause cause;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Later index ops chained on this value carry the same (first) code.
      flags_[pending[i].first].value = flags_[pending[i].first].zero;
      for (size_t j = i + 1; j < pending.size(); ++j) flags_[pending[j].first].dirty = true;
      if (i + 1 < pending.size()) flagsDirty_ = true;
      cause = flagCauses_.at(static_cast<size_t>(code - 1));
    }
    std::string msg = cause.message;
    if (atOp) msg += " (detected on device)" + calledAt();
    else
      msg += " (detected on device, reported at the next synchronization; TORCH_TPU_EAGER_MODE=debug raises "
             "at the op with its Python line)";
    raiseError(cause.kind, msg);
  }
}

std::shared_ptr<Executor::Entry> Executor::compile(const OpCall& call, FunctionRef<BuildFn> build,
                                                   const std::vector<DeviceStorage*>& storages,
                                                   const std::vector<char>& donate, bool checkNonFinite) {
  auto entry = std::make_shared<Entry>();
  hlo::Builder b;
  b.setDotPrecision(call.dotPrecision);
  // One module for one op: each storage read becomes a parameter (numbered
  // like the cache key), each written storage a result.
  struct StrictContext final : TraceContext {
    Entry& entry;
    const std::vector<DeviceStorage*>& storages;
    std::vector<Value> flat;
    std::vector<bool> present, written;
    size_t operands = 0;
    StrictContext(Entry& e, const std::vector<DeviceStorage*>& s)
        : entry(e), storages(s), flat(s.size()), present(s.size(), false), written(s.size(), false) {}
    int32_t index(DeviceStorage* s) const {
      return static_cast<int32_t>(std::find(storages.begin(), storages.end(), s) - storages.begin());
    }
    Value storageValue(hlo::Builder& b, DeviceStorage* st, DType as) override {
      int32_t s = index(st);
      if (!present[s]) {
        if (st->buffer) {
          flat[s] = b.parameter(hlo::Type{st->elem, {st->elemCount()}});
          entry.params.push_back(s);
        } else {
          flat[s] = b.full(hlo::Type{as, {static_cast<int64_t>(st->nbytes / hlo::byteWidth(as))}}, 0);
        }
        present[s] = true;
      }
      return flat[s];
    }
    void setStorageValue(DeviceStorage* st, Value v) override {
      int32_t s = index(st);
      flat[s] = v;
      present[s] = written[s] = true;
    }
    Value operandValue(hlo::Builder& b, const HostOperand& o) override {
      hlo::Shape shape;
      if (o.count) shape.push_back(o.count);
      entry.params.push_back(-static_cast<int32_t>(operands++) - 1);
      return b.parameter(hlo::Type{o.dtype, shape});
    }
    std::optional<Value> viewOffset(hlo::Builder& b, const TensorArg& a, size_t arg, bool write) override {
      if (!dynamicOffset(a, write)) return std::nullopt;
      entry.params.push_back(kOffsetParam - static_cast<int32_t>(arg));
      return b.parameter(hlo::Type{DType::S64, {}});
    }
  } ctx(*entry, storages);
  TraceResult traced = traceOp(b, ctx, call, build);
  std::vector<Value> floatInputs, floatOutputs;
  if (checkNonFinite) {
    for (const Value& v : traced.inputs)
      if (hlo::isFloat(v.dtype())) floatInputs.push_back(v);
    for (const Value& v : traced.outputs)
      if (hlo::isFloat(v.dtype())) floatOutputs.push_back(v);
  }
  std::vector<Value> rets;
  for (size_t s = 0; s < storages.size(); ++s) {
    if (!ctx.written[s]) continue;
    rets.push_back(ctx.flat[s]);
    entry->resultStorages.push_back(static_cast<int32_t>(s));
    entry->resultElems.push_back(ctx.flat[s].dtype());
    // The result may reuse the buffer it replaces where both have one type (parameters are
    // numbered in creation order, as entry->params lists them).
    auto param = std::find(entry->params.begin(), entry->params.end(), static_cast<int32_t>(s));
    bool donated = donate[s] && param != entry->params.end() && storages[s]->elem == ctx.flat[s].dtype();
    entry->resultDonated.push_back(donated);
    if (donated) {
      b.aliasParameter(static_cast<size_t>(param - entry->params.begin()), static_cast<int32_t>(rets.size() - 1));
      ++entry->donations;
    }
  }
  if (call.checksIndices) {
    // Sticky: the device's flag keeps the code of the first op out of range.
    int32_t code;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      code = flagCodeLocked(call);
    }
    Value old = b.parameter(hlo::Type{DType::S32, {}});
    entry->params.push_back(kFlagParam);
    entry->flagResult = static_cast<int32_t>(rets.size());
    rets.push_back(chainIndexFlag(b, old, *traced.indexFlag, code));
  }
  if (checkNonFinite) {
    Value bad = b.binary("and", allFinite(b, floatInputs), b.unary("not", allFinite(b, floatOutputs)));
    entry->nonFiniteResult = static_cast<int32_t>(rets.size());
    rets.push_back(bad);
  }
  b.ret(rets);
  std::string text = b.module();
  if (logEnabled("hlo")) std::cerr << "[torch_tpu] compiling " << call.name << ":\n" << text;
  CompiledProgram program;
  try {
    // The persistent tier (CompileCache.h): loads the executable or compiles it.
    program = compileWithCache(Runtime::get().client(), text, pjrt::CompileOptions{}, call.name);
    entry->exe = std::move(program.exe);
  } catch (const pjrt::PjrtError& e) {
    std::string msg = e.what();
    if (msg.size() > 2000) msg = msg.substr(0, 2000) + "...";
    throw std::runtime_error(std::string("torch_tpu: XLA could not compile ") + call.name + ": " + msg +
                             "\n(set TORCH_TPU_LOG=hlo to print the StableHLO module)");
  }
  double secs = program.seconds;
  if (program.compiled) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.compileSeconds += secs;
    ++stats_.compiles;
  }
  if (logEnabled("compile"))
    std::cerr << "[torch_tpu] " << (program.compiled ? "compiled " : "loaded ") << call.name << " in " << secs * 1e3
              << " ms\n";
  return entry;
}

std::shared_ptr<pjrt::Buffer> Executor::operandBufferLocked(const HostOperand& o, int device) {
  // Operands repeat (alpha=1, eps, the same learning rate): keep their buffers.
  thread_local std::vector<int64_t> key;
  unsigned char bytes[16] = {};
  int64_t n = o.count ? o.count : 1;
  size_t w = hlo::byteWidth(o.dtype);
  if (hlo::isComplex(o.dtype)) {  // a complex scalar: f = {real, imaginary}
    DType part = hlo::componentType(o.dtype);
    encodeElement(part, o.f[0], 0, bytes);
    encodeElement(part, o.f[1], 0, bytes + w / 2);
  } else {
    for (int64_t k = 0; k < n; ++k) encodeElement(o.dtype, o.f[k], o.i[k], bytes + k * w);
  }
  int64_t raw[2] = {0, 0};
  std::memcpy(raw, bytes, 16);
  key.assign({static_cast<int64_t>(o.dtype), o.count, raw[0], raw[1], device});
  std::vector<int64_t> dims;
  if (o.count) dims.push_back(o.count);
  if (o.count == 0) {
    auto it = operandCache_.find(key);
    if (it != operandCache_.end()) return it->second;
  }
  if (operandCache_.size() > 4096) operandCache_.clear();
  std::shared_ptr<pjrt::Buffer> buf =
      Runtime::get().client().bufferFromHost(bytes, toElementType(o.dtype), dims, device);
  // Scalars repeat (alpha, eps, a learning rate) and stay cached; arrays (RNG
  // seed and offset) change every call and live only as long as the call.
  if (o.count == 0) operandCache_.emplace(key, buf);
  return buf;
}

void Executor::relieveMappingsLocked() {
  if (!mappings_.nearLimit()) return;
  size_t before = cache_.size() + fusedGraph_.cachedPrograms() + finiteCheck_.size();
  cache_.shed();
  fusedGraph_.shedPrograms();
  finiteCheck_.shed();
  ++stats_.mappingSheds;
  if (logEnabled("cache"))
    std::cerr << "[torch_tpu] " << MappingBudget::mappings() << " of " << MappingBudget::cap()
              << " memory mappings in use: dropped " << before - cache_.size() - fusedGraph_.cachedPrograms()
              << " least recently used programs from memory\n";
}

void Executor::noteFusedProgramLocked(bool compiled, double seconds) {
  ++stats_.cacheMisses;
  if (!compiled) return;
  ++stats_.compiles;
  ++stats_.fusedCompiles;
  stats_.compileSeconds += seconds;
}

void Executor::trackInFlightLocked(const std::shared_ptr<pjrt::Buffer>& buffer, int device) {
  // Dead buffers are dropped when the list doubles: amortised O(1) per result, however many
  // buffers stay alive (a model's parameters and optimizer state).
  if (inFlight_.size() >= std::max<size_t>(256, 2 * inFlightPruned_)) {
    std::erase_if(inFlight_, [](auto& w) { return w.expired(); });
    inFlightPruned_ = inFlight_.size();
  }
  inFlight_.push_back(buffer);
  Streams::get().noteLaunch(device, buffer);  // what events recorded on the current stream wait for
}

void Executor::synchronize() {
  std::deque<RunningGraph> graphs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fusedGraph_.flush("synchronize");
    graphs = fusedGraph_.takeRunning();
  }
  // Graphs first: dropping their inputs releases the buffers they were donated, which
  // must not be awaited below.
  for (RunningGraph& g : graphs) g.done.await();
  graphs.clear();
  BufferReaper::get().drain();  // and the inputs of graphs retired before (donated ones too)
  std::vector<std::shared_ptr<pjrt::Buffer>> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& w : inFlight_)
      if (auto p = w.lock()) pending.push_back(std::move(p));
    inFlight_.clear();
    inFlightPruned_ = 0;
  }
  for (auto& p : pending) p->awaitReady();
  std::vector<HostTransfer> transfers;
  {
    std::lock_guard<std::mutex> lock(hostMutex_);
    transfers.swap(hostTransfers_);
    hostPending_ = 0;
  }
  for (HostTransfer& t : transfers) t.done->wait();
  transfers.clear();
  Streams::get().clearFinished();
  checkFlags(/*atOp=*/false);
}

ExecutorStats Executor::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ExecutorStats s = stats_;
  s.evictions = cache_.evictions();
  return s;
}

void Executor::resetStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = ExecutorStats{};
}

void Executor::clearCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.clear();
}

size_t Executor::cacheSize() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.size();
}

}  // namespace tpu::runtime
