#include "csrc/distributed/Fingerprint.h"

#include <sstream>

namespace tpu::distributed {
namespace {

// Word layout of a fingerprint row.
enum Word : int {
  kOp = 0,
  kSeq,
  kDtype,
  kCount,      // number of tensors
  kNumel,      // total elements (-1 when shapes may differ)
  kNdim,       // dims of the first tensor (-1 when shapes may differ)
  kDim0,       // kDim0..kDim0+5: the first tensor's first six sizes
  kShapeHash = kDim0 + 6,
  kExtra,
  kExtraKind,  // 0 none, 1 reduce op, 2 root
  kValid,      // constant marker: a row of zeros never matches a real one
};
static_assert(kValid < Fingerprint::kWords);
constexpr int64_t kMarker = 0x74707564;  // "tpud"

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

const char* reduceOpName(int64_t op) {
  static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  return op >= 0 && op < 9 ? names[op] : "?";
}

}  // namespace

const char* collectiveName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::AllReduce: return "all_reduce";
    case CollectiveOp::AllReduceCoalesced: return "all_reduce_coalesced";
    case CollectiveOp::Broadcast: return "broadcast";
    case CollectiveOp::Reduce: return "reduce";
    case CollectiveOp::AllGather: return "all_gather";
    case CollectiveOp::AllGatherIntoTensor: return "all_gather_into_tensor";
    case CollectiveOp::AllGatherCoalesced: return "all_gather_coalesced";
    case CollectiveOp::Gather: return "gather";
    case CollectiveOp::Scatter: return "scatter";
    case CollectiveOp::ReduceScatter: return "reduce_scatter";
    case CollectiveOp::ReduceScatterTensor: return "reduce_scatter_tensor";
    case CollectiveOp::ReduceScatterCoalesced: return "reduce_scatter_tensor_coalesced";
    case CollectiveOp::AllToAll: return "all_to_all";
    case CollectiveOp::AllToAllSingle: return "all_to_all_single";
    case CollectiveOp::Barrier: return "barrier";
  }
  return "unknown collective";
}

Fingerprint Fingerprint::make(CollectiveOp op, uint64_t seq, const std::vector<at::Tensor>& tensors,
                              bool shapes, int64_t extra, const char* extraName) {
  Fingerprint f;
  auto& w = f.words;
  w[kOp] = static_cast<int64_t>(op);
  w[kSeq] = static_cast<int64_t>(seq);
  w[kDtype] = tensors.empty() ? -1 : static_cast<int64_t>(tensors[0].scalar_type());
  w[kCount] = static_cast<int64_t>(tensors.size());
  w[kNumel] = -1;
  w[kNdim] = -1;
  for (int i = 0; i < 6; ++i) w[kDim0 + i] = -1;
  if (shapes && !tensors.empty()) {
    int64_t numel = 0;
    uint64_t h = 0;
    for (const auto& t : tensors) {
      numel += t.numel();
      h = mix(h, static_cast<uint64_t>(t.scalar_type()));
      h = mix(h, static_cast<uint64_t>(t.dim()));
      for (auto s : t.sizes()) h = mix(h, static_cast<uint64_t>(s));
    }
    w[kNumel] = numel;
    w[kNdim] = tensors[0].dim();
    for (int i = 0; i < 6 && i < tensors[0].dim(); ++i) w[kDim0 + i] = tensors[0].size(i);
    w[kShapeHash] = static_cast<int64_t>(h >> 1);
  }
  w[kExtra] = extra;
  const std::string kind = extraName == nullptr ? "" : extraName;
  w[kExtraKind] = kind.empty() ? 0 : kind == "op" ? 1 : kind == "root" ? 2 : 3;  // 3: "op+root" = root*16+op
  w[kValid] = kMarker;
  return f;
}

std::string Fingerprint::describe() const {
  const auto& w = words;
  std::ostringstream os;
  if (w[kValid] != kMarker) return "<no collective>";
  os << collectiveName(static_cast<CollectiveOp>(w[kOp])) << " #" << w[kSeq] << " (";
  if (w[kDtype] >= 0) {
    os << c10::toString(static_cast<c10::ScalarType>(w[kDtype]));
    if (w[kNdim] >= 0) {
      os << "[";
      for (int i = 0; i < w[kNdim] && i < 6; ++i) os << (i ? ", " : "") << w[kDim0 + i];
      if (w[kNdim] > 6) os << ", ...";
      os << "]";
    }
    if (w[kCount] > 1) os << " x" << w[kCount] << " tensors, " << w[kNumel] << " elements";
  } else {
    os << "no tensors";
  }
  if (w[kExtraKind] == 1) os << ", op=" << reduceOpName(w[kExtra]);
  if (w[kExtraKind] == 2) os << ", root=" << w[kExtra];
  if (w[kExtraKind] == 3) os << ", op=" << reduceOpName(w[kExtra] % 16) << ", root=" << w[kExtra] / 16;
  os << ")";
  return os.str();
}

std::string mismatchMessage(const std::vector<Fingerprint>& rows, const std::string& group) {
  bool same = true;
  for (const auto& r : rows) same = same && r == rows[0];
  if (same) return "";
  std::ostringstream os;
  os << "tpu_dist: ranks of process group '" << group
     << "' issued different collectives (every rank must issue the same collectives, in the same order, "
        "with matching shapes and dtypes):";
  for (size_t r = 0; r < rows.size(); ++r) os << "\n  rank " << r << ": " << rows[r].describe();
  return os.str();
}

}  // namespace tpu::distributed
