// _grouped_mm (torch.nn.functional.grouped_mm): the Mixture-of-Experts matmul whose groups (experts) own
// consecutive slices of a jagged dimension, delimited by the int32 end offsets `offs`. transformers' default
// experts implementation ("grouped_mm") calls it for tpu in every dtype, and its autograd formula calls it
// again (weight gradients are the 2-D x 2-D form). Composed of tpu ops: every group's product is computed
// densely over the whole jagged dimension and each element keeps the one group it belongs to (`where`, so the
// sum over groups adds exact zeros and the values equal one matmul per group). Elements past the last offset
// belong to no group and are zero (CPU and CUDA leave them uninitialized). G x the FLOPs of the grouped
// product: meant for the few experts of small/medium models; a segment-sorted kernel is the way to larger
// expert counts.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tpu::aten {
namespace {

// (len,) group index of each position along the jagged dimension: the number of offsets <= position;
// G for positions past the last offset.
at::Tensor groupOf(const at::Tensor& offs, int64_t len) {
  at::Tensor pos = at::arange(len, offs.options().dtype(at::kLong));
  return pos.unsqueeze(1).ge(offs.to(at::kLong).unsqueeze(0)).sum(1);
}

// (G, len) bool: position p belongs to group g.
at::Tensor groupMask(const at::Tensor& offs, int64_t len) {
  int64_t groups = offs.size(0);
  at::Tensor g = at::arange(groups, offs.options().dtype(at::kLong));
  return groupOf(offs, len).unsqueeze(0).eq(g.unsqueeze(1));
}

at::Tensor groupedMm(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& offsArg,
                     const std::optional<at::Tensor>& bias, std::optional<at::ScalarType> outDtype) {
  TORCH_CHECK(a.dim() == 2 || a.dim() == 3, "grouped_mm: mat_a must be 2-D or 3-D, got ", a.dim(), "-D");
  TORCH_CHECK(b.dim() == 2 || b.dim() == 3, "grouped_mm: mat_b must be 2-D or 3-D, got ", b.dim(), "-D");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "grouped_mm: mat_a and mat_b must have one dtype, got ",
              a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(at::isFloatingType(a.scalar_type()), "grouped_mm: expected floating-point inputs, got ",
              a.scalar_type());
  // As CPU and CUDA in this torch: no bias.
  TORCH_CHECK(!(bias.has_value() && bias->defined()), "grouped_mm: bias is not supported yet");
  bool hasOffs = offsArg.has_value() && offsArg->defined();
  bool jagged = a.dim() == 2 || b.dim() == 2;
  TORCH_CHECK(hasOffs == jagged, "grouped_mm: offs ", hasOffs ? "must not be given" : "is required",
              " when mat_a is ", a.dim(), "-D and mat_b is ", b.dim(), "-D");
  TORCH_CHECK(a.size(-1) == b.size(-2), "grouped_mm: contraction sizes differ: mat_a ", a.sizes(), ", mat_b ",
              b.sizes());
  at::Tensor out;
  if (!jagged) {  // (G, M, K) x (G, K, N): one product per group.
    TORCH_CHECK(a.size(0) == b.size(0), "grouped_mm: group counts differ: ", a.size(0), " and ", b.size(0));
    out = at::bmm(a, b);
  } else {
    const at::Tensor& offs = *offsArg;
    TORCH_CHECK(offs.dim() == 1 && offs.scalar_type() == at::kInt, "grouped_mm: offs must be a 1-D int32 tensor");
    TORCH_CHECK(offs.device() == a.device(), "grouped_mm: offs must be on ", a.device(), ", got ", offs.device());
    int64_t groups = offs.size(0);
    at::Tensor zero = at::zeros({}, a.options());
    if (a.dim() == 2 && b.dim() == 3) {  // (M, K) x (G, K, N) -> (M, N); rows of a are jagged.
      TORCH_CHECK(b.size(0) == groups, "grouped_mm: mat_b has ", b.size(0), " groups, offs ", groups);
      at::Tensor full = at::matmul(a.unsqueeze(0), b);  // (G, M, N)
      out = at::where(groupMask(offs, a.size(0)).unsqueeze(-1), full, zero).sum(0);
    } else if (a.dim() == 3 && b.dim() == 2) {  // (G, M, K) x (K, N) -> (M, N); columns of b are jagged.
      TORCH_CHECK(a.size(0) == groups, "grouped_mm: mat_a has ", a.size(0), " groups, offs ", groups);
      at::Tensor full = at::matmul(a, b);  // (G, M, N)
      out = at::where(groupMask(offs, b.size(1)).unsqueeze(1), full, zero).sum(0);
    } else {  // (M, K) x (K, N) -> (G, M, N); the contraction dimension is jagged.
      at::Tensor mask = groupMask(offs, a.size(1));  // (G, K)
      out = at::matmul(at::where(mask.unsqueeze(1), a.unsqueeze(0), zero), b);
    }
  }
  if (outDtype.has_value() && *outDtype != out.scalar_type()) out = out.to(*outDtype);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_grouped_mm", groupedMm); }

}  // namespace
}  // namespace tpu::aten
