#include "csrc/distributed/TpuBackend.h"

#include <c10/util/Exception.h>

#include "csrc/distributed/HostStaging.h"

namespace tpu::distributed {
namespace {

// Collectives run to completion before they return (staging in, host transport, write back), so
// their Work is already complete; receives are the exception (DeferredWork below).
class DeferredWork : public c10d::Work {
 public:
  DeferredWork(c10::intrusive_ptr<TpuBackend> backend, c10::intrusive_ptr<c10d::Work> host,
               std::vector<at::Tensor> device, std::vector<at::Tensor> staged)
      : backend_(std::move(backend)),
        host_(std::move(host)),
        device_(std::move(device)),
        staged_(std::move(staged)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  bool wait(std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_) {
      try {
        host_->wait(timeout);
        for (size_t i = 0; i < device_.size(); ++i) backend_->staging().writeBack(device_[i], staged_[i]);
      } catch (...) {
        future_->setErrorIfNeeded(std::current_exception());
        throw;
      }
      done_ = true;
      future_->markCompleted(c10::IValue(device_));
    }
    return true;
  }
  bool isCompleted() override { return done_; }
  bool isSuccess() const override { return done_; }
  int sourceRank() const override { return host_->sourceRank(); }
  std::vector<at::Tensor> result() override { return device_; }
  // The copy back runs in wait(): a future on a receive completes when someone waits for the work.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  void abort() override { host_->abort(); }

 private:
  std::mutex mutex_;
  c10::intrusive_ptr<TpuBackend> backend_;  // its staging pool owns the receive buffers
  c10::intrusive_ptr<c10d::Work> host_;
  std::vector<at::Tensor> device_, staged_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool done_ = false;
};

int64_t reduceOpWord(const c10d::ReduceOp& op) { return static_cast<int64_t>(op.op_); }

}  // namespace

c10::intrusive_ptr<c10d::Work> completedWork(std::vector<at::Tensor> outputs) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  future->markCompleted(c10::IValue(std::move(outputs)));
  return c10d::Work::create_from_future(future);
}

TpuBackend::TpuBackend(int rank, int size, c10::intrusive_ptr<c10d::Backend> host, Config config)
    : Backend(rank, size), host_(std::move(host)), config_(std::move(config)) {
  TORCH_CHECK(host_, "tpu_dist: a host transport backend is required");
}

c10::intrusive_ptr<c10d::Backend::Options> TpuBackend::getBackendOptions() {
  auto opts = c10::make_intrusive<Options>("tpu_dist", config_.timeout);
  opts->group_name = config_.groupName;
  return opts;
}

void TpuBackend::startCoalescing() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> TpuBackend::endCoalescing() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  coalescing_ = false;
  // Every send was issued without waiting and every receive is deferred, so waiting for all of
  // them here cannot deadlock whatever order the ranks listed them in.
  auto pending = std::move(coalesced_);
  coalesced_.clear();
  for (auto& w : pending) w->wait(config_.timeout);
  return completedWork({});
}

void TpuBackend::setTimeout(std::chrono::milliseconds timeout) {
  config_.timeout = timeout;
  host_->setTimeout(timeout);
}

void TpuBackend::ensureUsable(const char* what) const {
  TORCH_CHECK(!aborted_, "tpu_dist: ", what, " called on process group '", config_.groupName,
              "' after abort(); create a new process group");
}

void TpuBackend::await(const c10::intrusive_ptr<c10d::Work>& work, CollectiveOp op) {
  try {
    work->wait(config_.timeout);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    const bool timedOut = msg.find("imed out") != std::string::npos || msg.find("imeout") != std::string::npos;
    TORCH_CHECK(false, "tpu_dist: ", collectiveName(op), " #", seq_, " on rank ", getRank(), " of process group '",
                config_.groupName, "' failed",
                timedOut ? " (timed out: another rank did not issue this collective, or exited)" : "", ": ", msg);
  }
}

TpuBackend::PendingCheck TpuBackend::beginCheck(CollectiveOp op, const std::vector<at::Tensor>& tensors, bool shapes,
                                                int64_t extra, const char* extraName) {
  ensureUsable(collectiveName(op));
  PendingCheck pending;
  pending.op = op;
  ++seq_;
  if (!config_.checkCollectives || getSize() == 1) return pending;
  // Issued before the inputs are staged, so the exchange overlaps the download.
  auto mine = Fingerprint::make(op, seq_, tensors, shapes, extra, extraName);
  pending.local = at::from_blob(mine.words.data(), {Fingerprint::kWords}, at::kLong).clone();
  pending.all = at::full({getSize() * Fingerprint::kWords}, -1, at::kLong);  // never uninitialised words
  pending.work = host_->_allgather_base(pending.all, pending.local, c10d::AllgatherOptions());
  return pending;
}

void TpuBackend::endCheck(PendingCheck& pending) {
  if (!pending.work) return;
  await(pending.work, pending.op);
  pending.work.reset();
  std::vector<Fingerprint> rows(getSize());
  const int64_t* p = pending.all.data_ptr<int64_t>();
  for (int r = 0; r < getSize(); ++r)
    std::copy(p + r * Fingerprint::kWords, p + (r + 1) * Fingerprint::kWords, rows[r].words.begin());
  auto msg = mismatchMessage(rows, config_.groupName);
  TORCH_CHECK(msg.empty(), msg);
}

void TpuBackend::checkSplits(CollectiveOp op, const std::vector<int64_t>& sends,
                             const std::vector<int64_t>& receives) {
  const int n = getSize();
  if (!config_.checkCollectives || n == 1) return;
  auto local = at::empty({2 * n}, at::kLong);
  std::copy(sends.begin(), sends.end(), local.data_ptr<int64_t>());
  std::copy(receives.begin(), receives.end(), local.data_ptr<int64_t>() + n);
  auto all = at::full({n * 2 * n}, -1, at::kLong);
  await(host_->_allgather_base(all, local, c10d::AllgatherOptions()), op);
  const int64_t* row = all.data_ptr<int64_t>();  // rank r: sends[n], then receives[n]
  for (int from = 0; from < n; ++from)
    for (int to = 0; to < n; ++to) {
      int64_t sent = row[from * 2 * n + to], expected = row[to * 2 * n + n + from];
      TORCH_CHECK(sent == expected, "tpu_dist: ", collectiveName(op), " #", seq_, " of process group '",
                  config_.groupName, "': rank ", from, " sends ", sent, " elements to rank ", to,
                  ", which expects ", expected, " from it; input and output split sizes must match across ranks");
    }
}

namespace {
// Elements per destination (or source) rank of all_to_all_single: `splits` are rows of dim 0,
// none means equal parts.
std::vector<int64_t> splitElements(const at::Tensor& t, const std::vector<int64_t>& splits, int ranks) {
  int64_t rowElems = 1;
  for (int64_t d = 1; d < t.dim(); ++d) rowElems *= t.size(d);
  int64_t rows = t.dim() ? t.size(0) : 1;
  std::vector<int64_t> out(ranks, rows / ranks * rowElems);
  for (size_t r = 0; r < splits.size() && r < out.size(); ++r) out[r] = splits[r] * rowElems;
  return out;
}
}  // namespace

at::Tensor TpuBackend::scaledForPremulSum(const at::Tensor& host, const c10d::ReduceOp& op) const {
  // Gloo has no PREMUL_SUM: scale the staged copy, then sum.
  auto* supp = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(supp, "tpu_dist: PREMUL_SUM without a factor");
  if (supp->tensor_factor.defined()) host.mul_(supp->tensor_factor.to(at::kCPU));
  else host.mul_(supp->double_factor);
  return host;
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::AllReduce, tensors, true, reduceOpWord(opts.reduceOp), "op");
  std::vector<at::Tensor> host = staging_.toHost(tensors);
  c10d::AllreduceOptions hostOpts = opts;
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) {
    for (auto& h : host) {
      if (h.is_same(tensors[&h - host.data()])) h = h.clone();
      scaledForPremulSum(h, opts.reduceOp);
    }
    hostOpts.reduceOp = c10d::ReduceOp::SUM;
  }
  endCheck(fingerprint);
  await(host_->allreduce(host, hostOpts), CollectiveOp::AllReduce);
  staging_.writeBack(tensors, host);
  return completedWork(tensors);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceCoalescedOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  // Checked before the fingerprint exchange, so a bad call fails alone, before the peers are involved.
  TORCH_CHECK_TYPE(sameDtype(tensors), "tpu_dist: all_reduce_coalesced needs tensors of one dtype; "
                   "issue one coalesced call per dtype");
  auto fingerprint = beginCheck(CollectiveOp::AllReduceCoalesced, tensors, true, reduceOpWord(opts.reduceOp), "op");
  if (tensors.empty()) {
    endCheck(fingerprint);
    return completedWork({});
  }
  // One flat host buffer per dtype run keeps it to one transport call for the common case.
  std::vector<at::Tensor> flat{staging_.flattenToHost(tensors)};
  c10d::AllreduceOptions hostOpts;
  hostOpts.reduceOp = opts.reduceOp;
  hostOpts.timeout = opts.timeout;
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) {
    scaledForPremulSum(flat[0], opts.reduceOp);
    hostOpts.reduceOp = c10d::ReduceOp::SUM;
  }
  endCheck(fingerprint);
  await(host_->allreduce(flat, hostOpts), CollectiveOp::AllReduceCoalesced);
  staging_.unflattenInto(tensors, flat[0]);
  return completedWork(tensors);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                     const c10d::BroadcastOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::Broadcast, tensors, true, opts.rootRank, "root");
  std::vector<at::Tensor> host;
  for (const auto& t : tensors) host.push_back(getRank() == opts.rootRank ? staging_.toHost(t) : staging_.hostLike(t));
  endCheck(fingerprint);
  await(host_->broadcast(host, opts), CollectiveOp::Broadcast);
  if (getRank() != opts.rootRank)
    staging_.writeBack(tensors, host);
  return completedWork(tensors);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::Reduce, tensors, true, opts.rootRank * 16 + reduceOpWord(opts.reduceOp), "op+root");
  std::vector<at::Tensor> host = staging_.toHost(tensors);
  c10d::ReduceOptions hostOpts = opts;
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) {
    for (size_t i = 0; i < host.size(); ++i) {
      if (host[i].is_same(tensors[i])) host[i] = host[i].clone();
      scaledForPremulSum(host[i], opts.reduceOp);
    }
    hostOpts.reduceOp = c10d::ReduceOp::SUM;
  }
  endCheck(fingerprint);
  await(host_->reduce(host, hostOpts), CollectiveOp::Reduce);
  if (getRank() == opts.rootRank)
    staging_.writeBack(tensors, host);
  return completedWork(tensors);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::AllGather, inputs);
  std::vector<at::Tensor> hostIn = staging_.toHost(inputs);
  std::vector<std::vector<at::Tensor>> hostOut;
  for (const auto& list : outputs) hostOut.push_back(staging_.hostLike(list));
  endCheck(fingerprint);
  await(host_->allgather(hostOut, hostIn, opts), CollectiveOp::AllGather);
  std::vector<at::Tensor> flat;
  for (size_t i = 0; i < outputs.size(); ++i) {
    staging_.writeBack(outputs[i], hostOut[i]);
    flat.insert(flat.end(), outputs[i].begin(), outputs[i].end());
  }
  return completedWork(flat);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                           const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::AllGatherIntoTensor, {input, output});
  auto hostIn = staging_.toHost(input);
  auto hostOut = staging_.hostLike(output);
  endCheck(fingerprint);
  await(host_->_allgather_base(hostOut, hostIn, opts), CollectiveOp::AllGatherIntoTensor);
  staging_.writeBack(output, hostOut);
  return completedWork({output});
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  TORCH_CHECK_TYPE(sameDtype(inputs), "tpu_dist: all_gather_coalesced needs inputs of one dtype");
  auto fingerprint = beginCheck(CollectiveOp::AllGatherCoalesced, inputs);
  // outputs[r][i] is input i of rank r. One flat all-gather of the concatenated inputs.
  if (inputs.empty()) {
    endCheck(fingerprint);
    return completedWork({});
  }
  auto flatIn = staging_.flattenToHost(inputs);
  auto flatOut = at::empty({flatIn.numel() * getSize()}, flatIn.options());
  endCheck(fingerprint);
  await(host_->_allgather_base(flatOut, flatIn, opts), CollectiveOp::AllGatherCoalesced);
  std::vector<at::Tensor> all;
  for (size_t r = 0; r < outputs.size(); ++r) {
    staging_.unflattenInto(outputs[r], flatOut.narrow(0, r * flatIn.numel(), flatIn.numel()));
    all.insert(all.end(), outputs[r].begin(), outputs[r].end());
  }
  return completedWork(all);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                           std::vector<at::Tensor>& inputs,
                                                                           const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::AllGatherCoalesced, inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto hostIn = staging_.toHost(inputs[i]);
    auto hostOut = staging_.hostLike(outputs[i]);
    endCheck(fingerprint);
  await(host_->_allgather_base(hostOut, hostIn, opts), CollectiveOp::AllGatherCoalesced);
    staging_.writeBack(outputs[i], hostOut);
  }
  return completedWork(outputs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                  std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::Gather, inputs, true, opts.rootRank, "root");
  std::vector<at::Tensor> hostIn = staging_.toHost(inputs);
  std::vector<std::vector<at::Tensor>> hostOut;
  for (const auto& list : outputs) hostOut.push_back(staging_.hostLike(list));
  endCheck(fingerprint);
  await(host_->gather(hostOut, hostIn, opts), CollectiveOp::Gather);
  std::vector<at::Tensor> flat;
  for (size_t i = 0; i < outputs.size(); ++i) {
    staging_.writeBack(outputs[i], hostOut[i]);
    flat.insert(flat.end(), outputs[i].begin(), outputs[i].end());
  }
  return completedWork(flat);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::scatter(std::vector<at::Tensor>& outputs,
                                                   std::vector<std::vector<at::Tensor>>& inputs,
                                                   const c10d::ScatterOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::Scatter, outputs, true, opts.rootRank, "root");
  std::vector<std::vector<at::Tensor>> hostIn;
  for (const auto& list : inputs) hostIn.push_back(staging_.toHost(list));
  std::vector<at::Tensor> hostOut = staging_.hostLike(outputs);
  endCheck(fingerprint);
  await(host_->scatter(hostOut, hostIn, opts), CollectiveOp::Scatter);
  staging_.writeBack(outputs, hostOut);
  return completedWork(outputs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::ReduceScatter, outputs, true, reduceOpWord(opts.reduceOp), "op");
  std::vector<std::vector<at::Tensor>> hostIn(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    for (const auto& t : inputs[i]) {
      auto h = staging_.toHost(t);
      if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) {
        if (h.is_same(t)) h = h.clone();
        scaledForPremulSum(h, opts.reduceOp);
      }
      hostIn[i].push_back(h);
    }
  std::vector<at::Tensor> hostOut = staging_.hostLike(outputs);
  c10d::ReduceScatterOptions hostOpts = opts;
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) hostOpts.reduceOp = c10d::ReduceOp::SUM;
  endCheck(fingerprint);
  await(host_->reduce_scatter(hostOut, hostIn, hostOpts), CollectiveOp::ReduceScatter);
  staging_.writeBack(outputs, hostOut);
  return completedWork(outputs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                const c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::ReduceScatterTensor, {output, input}, true, reduceOpWord(opts.reduceOp), "op");
  auto hostIn = staging_.toHost(input);
  c10d::ReduceScatterOptions hostOpts = opts;
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) {
    if (hostIn.is_same(input)) hostIn = hostIn.clone();
    scaledForPremulSum(hostIn, opts.reduceOp);
    hostOpts.reduceOp = c10d::ReduceOp::SUM;
  }
  auto hostOut = staging_.hostLike(output);
  endCheck(fingerprint);
  await(host_->_reduce_scatter_base(hostOut, hostIn, hostOpts), CollectiveOp::ReduceScatterTensor);
  staging_.writeBack(output, hostOut);
  return completedWork({output});
}

c10::intrusive_ptr<c10d::Work> TpuBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                           std::vector<at::Tensor>& inputs,
                                                                           const c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::ReduceScatterCoalesced, inputs, true, reduceOpWord(opts.reduceOp), "op");
  c10d::ReduceScatterOptions hostOpts = opts;
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) hostOpts.reduceOp = c10d::ReduceOp::SUM;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto hostIn = staging_.toHost(inputs[i]);
    if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) {
      if (hostIn.is_same(inputs[i])) hostIn = hostIn.clone();
      scaledForPremulSum(hostIn, opts.reduceOp);
    }
    auto hostOut = staging_.hostLike(outputs[i]);
    endCheck(fingerprint);
  await(host_->_reduce_scatter_base(hostOut, hostIn, hostOpts), CollectiveOp::ReduceScatterCoalesced);
    staging_.writeBack(outputs[i], hostOut);
  }
  return completedWork(outputs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                         std::vector<int64_t>& outputSplits,
                                                         std::vector<int64_t>& inputSplits,
                                                         const c10d::AllToAllOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  // Uneven splits make shapes differ between ranks legitimately: only the dtype must agree.
  auto fingerprint = beginCheck(CollectiveOp::AllToAllSingle, {input}, /*shapes=*/false);
  auto hostIn = staging_.toHost(input);
  auto hostOut = staging_.hostLike(output);
  endCheck(fingerprint);
  checkSplits(CollectiveOp::AllToAllSingle, splitElements(input, inputSplits, getSize()),
              splitElements(output, outputSplits, getSize()));
  await(host_->alltoall_base(hostOut, hostIn, outputSplits, inputSplits, opts), CollectiveOp::AllToAllSingle);
  staging_.writeBack(output, hostOut);
  return completedWork({output});
}

c10::intrusive_ptr<c10d::Work> TpuBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                    const c10d::AllToAllOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  TORCH_CHECK_TYPE(sameDtype(inputs) && sameDtype(outputs) && !inputs.empty() && !outputs.empty() &&
                  inputs[0].scalar_type() == outputs[0].scalar_type(),
              "tpu_dist: all_to_all needs input and output tensors of one dtype");
  auto fingerprint = beginCheck(CollectiveOp::AllToAll, inputs, /*shapes=*/false);
  // One flat exchange with per-rank splits: pieces may differ in size (gloo's list form requires
  // equal sizes; NCCL's does not).
  std::vector<int64_t> inSplits, outSplits;
  for (const auto& t : inputs) inSplits.push_back(t.numel());
  for (const auto& t : outputs) outSplits.push_back(t.numel());
  auto flatIn = staging_.flattenToHost(inputs);
  int64_t outNumel = 0;
  for (auto n : outSplits) outNumel += n;
  auto flatOut = at::empty({outNumel}, flatIn.options());
  endCheck(fingerprint);
  checkSplits(CollectiveOp::AllToAll, inSplits, outSplits);
  await(host_->alltoall_base(flatOut, flatIn, outSplits, inSplits, opts), CollectiveOp::AllToAll);
  staging_.unflattenInto(outputs, flatOut);
  return completedWork(outputs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  ensureUsable("send");
  // Not waited for: a send must not block until the peer posts its receive (batch_isend_irecv).
  // The host work keeps the staged copy alive.
  std::vector<at::Tensor> host = staging_.toHost(tensors);
  auto work = host_->send(host, dstRank, tag);
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> TpuBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  ensureUsable("recv");
  std::vector<at::Tensor> host = staging_.hostLike(tensors);
  c10::intrusive_ptr<c10d::Work> work = c10::make_intrusive<DeferredWork>(self(), host_->recv(host, srcRank, tag), tensors, host);
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> TpuBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  ensureUsable("recv");
  std::vector<at::Tensor> host = staging_.hostLike(tensors);
  return c10::make_intrusive<DeferredWork>(self(), host_->recvAnysource(host, tag), tensors, host);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::barrier(const c10d::BarrierOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto fingerprint = beginCheck(CollectiveOp::Barrier, {});
  endCheck(fingerprint);
  await(host_->barrier(opts), CollectiveOp::Barrier);
  return completedWork({});
}

void TpuBackend::abort() {
  aborted_ = true;
  host_->abort();
}

void TpuBackend::shutdown() { host_->shutdown(); }

}  // namespace tpu::distributed
