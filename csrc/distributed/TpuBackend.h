// tpu_dist: the c10d Backend for device "tpu" (issue 12).
//
// One backend class, two transports behind it:
//  - host (built): tpu tensors are staged to CPU memory, a host Backend (ProcessGroupGloo, made
//    in Python on this group's store) runs the collective, results are written back. Used on the
//    XLA CPU plugin, whose client has no cross-process collectives.
//  - device (not built): StableHLO collectives in programs compiled for the process group, on
//    plugins whose client supports multi-process collectives (TPU, GPU).
// Every collective first exchanges a fingerprint (op, sequence number, dtype, shapes) so that ranks
// issuing different collectives raise the same RuntimeError instead of hanging or mixing data.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "csrc/distributed/Fingerprint.h"
#include "csrc/distributed/HostStaging.h"

namespace tpu::distributed {

class TpuBackend : public c10d::Backend {
 public:
  struct Config {
    std::string groupName;
    std::chrono::milliseconds timeout{kBackendDefaultTimeout};
    bool checkCollectives = true;  // the fingerprint exchange
  };

  TpuBackend(int rank, int size, c10::intrusive_ptr<c10d::Backend> host, Config config);

  const std::string getBackendName() const override { return "tpu_dist"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }
  void abort() override;
  void shutdown() override;

  std::string transportName() const { return "host (gloo)"; }
  bool checksCollectives() const { return config_.checkCollectives; }
  void setCheckCollectives(bool on) { config_.checkCollectives = on; }
  // Statistics for tests and benchmarks: collectives run, fingerprint exchanges.
  uint64_t collectiveCount() const { return seq_; }
  size_t pooledHostBytes() { return staging_.pooledBytes(); }
  HostStaging& staging() { return staging_; }

 private:
  c10::intrusive_ptr<TpuBackend> self() { return c10::intrusive_ptr<TpuBackend>::unsafe_reclaim_from_nonowning(this); }
  // The fingerprint exchange: begin issues it (asynchronously), end waits and raises on every
  // rank when the ranks disagree. Every collective calls both before its data moves.
  struct PendingCheck {
    CollectiveOp op{};
    c10::intrusive_ptr<c10d::Work> work;
    at::Tensor local, all;
  };
  PendingCheck beginCheck(CollectiveOp op, const std::vector<at::Tensor>& tensors, bool shapes = true,
                          int64_t extra = -1, const char* extraName = nullptr);
  void endCheck(PendingCheck& pending);
  // all_to_all: what each rank sends each other rank (elements) must be what that rank expects from
  // it. Checked on the host before the exchange: gloo aborts the process on a size mismatch.
  void checkSplits(CollectiveOp op, const std::vector<int64_t>& sends, const std::vector<int64_t>& receives);
  // Waits for a host transport work item; a failure (timeout, peer gone) names the collective.
  void await(const c10::intrusive_ptr<c10d::Work>& work, CollectiveOp op);
  void ensureUsable(const char* what) const;
  at::Tensor scaledForPremulSum(const at::Tensor& host, const c10d::ReduceOp& op) const;

  c10::intrusive_ptr<c10d::Backend> host_;
  HostStaging staging_;
  Config config_;
  std::recursive_mutex mutex_;  // one collective at a time: sequence numbers must agree
  uint64_t seq_ = 0;
  bool aborted_ = false;
  // Point-to-point work started inside startCoalescing()/endCoalescing() (batch_isend_irecv): c10d
  // keeps only endCoalescing's Work, which therefore waits for these.
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;
};

// A completed Work whose future holds `outputs`.
c10::intrusive_ptr<c10d::Work> completedWork(std::vector<at::Tensor> outputs);

}  // namespace tpu::distributed
