// What every rank says about a collective before running it: op, sequence number, dtype and shapes.
// Exchanged with one small all-gather so that ranks issuing different collectives get the same clear
// error instead of a hang or silently mixed data (issue 12, MPMD).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tpu::distributed {

enum class CollectiveOp : int64_t {
  AllReduce = 1,
  AllReduceCoalesced,
  Broadcast,
  Reduce,
  AllGather,
  AllGatherIntoTensor,
  AllGatherCoalesced,
  Gather,
  Scatter,
  ReduceScatter,
  ReduceScatterTensor,
  ReduceScatterCoalesced,
  AllToAll,
  AllToAllSingle,
  Barrier,
};

const char* collectiveName(CollectiveOp op);

// A fixed-size row of int64 words (one row per rank after the exchange).
struct Fingerprint {
  static constexpr int kWords = 16;
  std::array<int64_t, kWords> words{};

  // `shapes` false: only dtype and tensor count must agree (all_to_all with uneven splits).
  // `extra`: the reduce op or the root rank, -1 when the collective has neither.
  static Fingerprint make(CollectiveOp op, uint64_t seq, const std::vector<at::Tensor>& tensors,
                          bool shapes, int64_t extra, const char* extraName);

  bool operator==(const Fingerprint& o) const { return words == o.words; }
  // e.g. "all_reduce #5 (float32[4, 8], op=0)".
  std::string describe() const;
};

// The message raised on every rank when the rows differ; empty when they all agree.
std::string mismatchMessage(const std::vector<Fingerprint>& rows, const std::string& group);

}  // namespace tpu::distributed
