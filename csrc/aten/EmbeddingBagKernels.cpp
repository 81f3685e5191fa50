// nn.EmbeddingBag (_embedding_bag, its dense and per-sample-weight backwards), Embedding(max_norm=...)'s
// embedding_renorm_ and torch.renorm, composed of tpu ops. The bag of each index comes from the offsets by
// an upper-bound search (empty bags fall out naturally); rows are summed with index_add, max bags with an
// amax scatter_reduce. Our own auxiliary outputs (offset2bag, bag_size = non-padding indices per bag,
// max_indices = the weight row chosen per bag and column) are what our backward reads.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "OpGroup.h"
#include "OpRunner.h"

namespace tpu::aten {
namespace {

using OptTensor = std::optional<at::Tensor>;
bool has(const OptTensor& t) { return t.has_value() && t->defined(); }
constexpr int64_t kSum = 0, kMean = 1, kMax = 2;

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embeddingBag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool, int64_t mode, bool,
    const OptTensor& psw, bool includeLastOffset, int64_t paddingIdx) {
  IndexErrorScope scope("aten::_embedding_bag", runtime::ErrorKind::Runtime);  // as CPU's "not in the valid range"
  TORCH_CHECK(indices.dim() == 1 && offsets.dim() == 1, "embedding_bag: input has to be 1D (with offsets) here, got ",
              indices.dim(), "-D indices and ", offsets.dim(), "-D offsets");
  TORCH_CHECK(weight.dim() == 2, "embedding_bag: weight has to be a 2D Tensor, but got Tensor of dimension ",
              weight.dim());
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_bag: expected indices to be int32 or int64, got ", indices.scalar_type());
  TORCH_CHECK(mode >= kSum && mode <= kMax, "embedding_bag: mode has to be 0 (sum), 1 (mean) or 2 (max), got ", mode);
  if (has(psw)) {
    TORCH_CHECK(mode == kSum, "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported "
                "for mode='sum' (got mode='", mode == kMean ? "mean" : "max", "'). Please open a feature request on "
                "GitHub.");
    TORCH_CHECK(psw->dim() == 1 && psw->numel() == indices.numel(), "embedding_bag: expected per_sample_weights to "
                "be 1D with the same number of elements as indices, got ", psw->sizes());
  }
  int64_t n = indices.numel(), d = weight.size(1);
  int64_t bags = offsets.size(0) - (includeLastOffset ? 1 : 0);
  TORCH_CHECK(bags >= 0, "embedding_bag: include_last_offset needs at least one offset");
  // One program in Strict mode (an op group): the bag search, gathers, masks and sums were ~7 launches per bag.
  return asOneProgram([&]() -> std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> {
    at::TensorOptions lopt = indices.options().dtype(at::kLong);
    at::Tensor idx = indices.to(at::kLong);
    at::Tensor starts = offsets.to(at::kLong).narrow(0, 0, bags).contiguous();
    at::Tensor bag = n == 0 || bags == 0
                         ? at::zeros({n}, lopt)
                         : (at::searchsorted(starts, at::arange(n, lopt), false, true) - 1).clamp_min(0);
    at::Tensor keep = paddingIdx >= 0 ? idx != paddingIdx : at::ones({n}, lopt.dtype(at::kBool));
    at::Tensor bagSize = at::zeros({bags}, lopt).index_put_({bag}, keep.to(at::kLong), true);
    at::Tensor rows = weight.index_select(0, idx);
    if (has(psw)) rows = rows * psw->unsqueeze(1).to(rows.scalar_type());
    at::Tensor zero = at::zeros({}, weight.options());
    at::Tensor k2 = keep.unsqueeze(1);
    at::Tensor out, maxIdx = at::zeros({0}, lopt);
    if (mode == kMax) {
      at::Tensor b2 = bag.unsqueeze(1).expand({n, d});
      at::Tensor masked = at::where(k2, rows, at::scalar_tensor(-INFINITY, weight.options()));
      out = at::zeros({bags, d}, weight.options()).scatter_reduce(0, b2, masked, "amax", false);
      at::Tensor empty = (bagSize == 0).unsqueeze(1);
      out = at::where(empty, zero, out);
      // The first position in each bag that holds the maximum, then its weight row.
      at::Tensor pos = at::arange(n, lopt).unsqueeze(1).expand({n, d});
      at::Tensor hit = k2 & (masked == out.index_select(0, bag));
      at::Tensor first = at::full({bags, d}, n, lopt).scatter_reduce(0, b2, at::where(hit, pos, n), "amin", true);
      maxIdx = at::where(empty, -1, idx.index_select(0, first.clamp_max(std::max<int64_t>(n - 1, 0)).reshape({-1}))
                                       .reshape({bags, d}));
    } else {
      out = at::zeros({bags, d}, weight.options()).index_add(0, bag, at::where(k2, rows, zero));
      if (mode == kMean) out = out / bagSize.clamp_min(1).unsqueeze(1).to(out.scalar_type());
    }
    return {out, bag, bagSize, maxIdx};
  });
}

at::Tensor embeddingBagDenseBackward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offset2bag,
                                     const at::Tensor& bagSize, const at::Tensor& maxIdx, c10::SymInt numWeights,
                                     bool scaleByFreq, int64_t mode, const OptTensor& psw, int64_t paddingIdx) {
  int64_t nw = numWeights.expect_int(), d = grad.size(1);
  return asOneProgram([&]() -> at::Tensor {
    at::Tensor idx = indices.to(at::kLong), bag = offset2bag.to(at::kLong);
    at::Tensor gw = at::zeros({nw, d}, grad.options());
    if (mode == kMax) {
      at::Tensor valid = (maxIdx >= 0);
      return gw.scatter_add(0, at::where(valid, maxIdx, 0), at::where(valid, grad, at::zeros({}, grad.options())));
    }
    if (idx.numel() == 0) return gw;
    at::Tensor g = grad.index_select(0, bag);
    if (mode == kMean) g = g / bagSize.index_select(0, bag).clamp_min(1).unsqueeze(1).to(g.scalar_type());
    if (has(psw)) g = g * psw->unsqueeze(1).to(g.scalar_type());
    if (scaleByFreq) {
      at::Tensor counts =
          at::zeros({nw}, grad.options()).index_put_({idx}, at::ones({idx.numel()}, grad.options()), true);
      g = g / counts.index_select(0, idx).unsqueeze(1);
    }
    if (paddingIdx >= 0) g = at::where((idx != paddingIdx).unsqueeze(1), g, at::zeros({}, g.options()));
    return gw.index_add(0, idx, g);
  });
}

at::Tensor embeddingBagBackward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                const at::Tensor& offset2bag, const at::Tensor& bagSize, const at::Tensor& maxIdx,
                                c10::SymInt numWeights, bool scaleByFreq, int64_t mode, bool sparse,
                                const OptTensor& psw, int64_t paddingIdx) {
  TORCH_CHECK(!sparse, "embedding_bag(sparse=True) is not supported on tpu (sparse gradients): use sparse=False");
  return embeddingBagDenseBackward(grad, indices, offset2bag, bagSize, maxIdx, std::move(numWeights), scaleByFreq,
                                   mode, psw, paddingIdx);
}

at::Tensor embeddingBagPswBackward(const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& indices,
                                   const at::Tensor&, const at::Tensor& offset2bag, int64_t mode, int64_t paddingIdx) {
  TORCH_CHECK(mode == kSum, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  at::Tensor idx = indices.to(at::kLong);
  at::Tensor r = (grad.index_select(0, offset2bag.to(at::kLong)) * weight.index_select(0, idx)).sum(1);
  if (paddingIdx >= 0) r = at::where(idx != paddingIdx, r, at::zeros({}, r.options()));
  return r;
}

// Rows named by `indices` whose norm exceeds max_norm are scaled to max_norm / (norm + 1e-7), in place.
at::Tensor& embeddingRenorm(at::Tensor& self, const at::Tensor& indices, double maxNorm, double normType) {
  TORCH_CHECK(self.dim() == 2, "embedding_renorm_(): input must be 2-D, got ", self.dim(), "-D");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_renorm_(): Expected indices to be int32 or int64, got ", indices.scalar_type());
  if (indices.numel() == 0) return self;
  at::Tensor idx = indices.reshape({-1}).to(at::kLong);
  at::Tensor rows = self.index_select(0, idx);
  at::Tensor norm = at::linalg_vector_norm(rows, normType, {1}, true);
  at::Tensor scale = at::where(norm > maxNorm, maxNorm / (norm + 1e-7), at::ones({}, norm.options()));
  // Duplicate indices write the same row twice: the same value.
  self.index_put_({idx}, rows * scale);
  return self;
}

// torch.renorm: each slice along `dim` whose p-norm exceeds maxnorm is scaled by maxnorm / (norm + 1e-7);
// norms of float16/bfloat16 in float32, as CPU/CUDA.
at::Tensor& renormOut(const at::Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm,
                      at::Tensor& out) {
  TORCH_CHECK(!p.isComplex(), "renorm: p must be real-valued");
  TORCH_CHECK(p.toDouble() > 0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(!maxnorm.isComplex(), "renorm: maxnorm must be real-valued");
  TORCH_CHECK(maxnorm.toDouble() >= 0, "renorm: expected maxnorm to be >= 0 but got ", maxnorm.toDouble());
  TORCH_CHECK(self.dim() > 1, "renorm: input needs at least 2 dimensions, got ", self.dim(), " dimensions");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "renorm: expected a floating-point input, got ",
              self.scalar_type());
  dim = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (i != dim) dims.push_back(i);
  at::ScalarType acc = self.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor norm = at::linalg_vector_norm(self.to(acc), p.toDouble(), dims, true);
  double mx = maxnorm.toDouble();
  at::Tensor factor = at::where(norm > mx, mx / (norm + 1e-7), at::ones({}, norm.options()));
  at::Tensor r = self * factor.to(self.scalar_type());
  if (!out.is_same(self)) out.resize_(self.sizes());
  return out.copy_(r);
}
at::Tensor renorm(const at::Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm) {
  at::Tensor out = at::empty_like(self);
  return renormOut(self, p, dim, maxnorm, out);
}
at::Tensor& renorm_(at::Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm) {
  return renormOut(self, p, dim, maxnorm, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_embedding_bag", embeddingBag);
  m.impl("_embedding_bag_forward_only", embeddingBag);
  m.impl("_embedding_bag_backward", embeddingBagBackward);
  m.impl("_embedding_bag_dense_backward", embeddingBagDenseBackward);
  m.impl("_embedding_bag_per_sample_weights_backward", embeddingBagPswBackward);
  m.impl("embedding_renorm_", embeddingRenorm);
  m.impl("renorm", renorm);
  m.impl("renorm_", renorm_);
  m.impl("renorm.out", renormOut);
}

}  // namespace tpu::aten
