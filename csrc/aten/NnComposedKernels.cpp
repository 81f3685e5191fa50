// nn kernels composed of tpu ops with CUDA's / CPU's formulas: weight norm (_weight_norm_interface and its
// backward, what nn.utils.weight_norm and parametrizations.weight_norm call for dim 0 / last),
// multi_margin_loss and multilabel_margin_loss (+ backwards), _cdist_forward / _cdist_backward (torch.cdist
// for p != 2 or without the matmul path; the pairwise differences are materialised, (..., P, R, M)) and
// _pdist_forward / _pdist_backward (the same on the pairs i < j), rrelu_with_noise (nn.RReLU / F.rrelu).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>

#include "Elementwise.h"

namespace tpu::aten {
namespace {

using OptTensor = std::optional<at::Tensor>;
bool has(const OptTensor& t) { return t.has_value() && t->defined(); }

// ---- weight norm ----------------------------------------------------------------------------------

std::vector<int64_t> allDimsBut(int64_t rank, int64_t dim) {
  std::vector<int64_t> r;
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim) r.push_back(i);
  return r;
}

int64_t weightNormDim(const at::Tensor& v, int64_t dim) {
  TORCH_CHECK(dim == 0 || dim == v.dim() - 1 || dim == -1, "_weight_norm_interface: dim must be 0 or the last "
              "dimension of v (", v.dim() - 1, "), got ", dim);
  return dim == -1 ? v.dim() - 1 : dim;
}

std::tuple<at::Tensor, at::Tensor> weightNorm(const at::Tensor& v, const at::Tensor& g, int64_t dim) {
  TORCH_CHECK(v.device() == g.device(), "weight_norm: v and g must be on the same device");
  dim = weightNormDim(v, dim);
  c10::ScalarType ct = opmathType(v.scalar_type());
  at::Tensor vc = v.to(ct);
  // As CUDA: norms in float32 for reduced-precision v, w = v * (g / norm).
  at::Tensor norms = at::linalg_vector_norm(vc, 2, allDimsBut(v.dim(), dim), true);
  at::Tensor w = (vc * (g.to(ct) / norms)).to(v.scalar_type());
  return {w, norms.to(g.scalar_type() == at::kDouble ? at::kDouble : ct)};
}

std::tuple<at::Tensor, at::Tensor> weightNormBackward(const at::Tensor& gw, const at::Tensor& v, const at::Tensor& g,
                                                      const at::Tensor& norms, int64_t dim) {
  TORCH_CHECK(v.is_contiguous() && g.is_contiguous() && norms.is_contiguous(),
              "_weight_norm_interface_backward: saved tensors must be contiguous");
  dim = weightNormDim(v, dim);
  c10::ScalarType ct = opmathType(v.scalar_type());
  at::Tensor vc = v.to(ct), n = norms.to(ct), gc = g.to(ct);
  at::Tensor rowSum = (gw.to(ct) * vc).sum(allDimsBut(v.dim(), dim), true);
  at::Tensor gg = rowSum / n;
  at::Tensor gv = (gc / n) * (gw.to(ct) - vc * (rowSum / (n * n)));
  return {gv.to(v.scalar_type()), gg.to(g.scalar_type())};
}

// ---- multi_margin_loss -------------------------------------------------------------------------------

struct Margin {
  at::Tensor x, y, onehot;  // (N, C), (N,), (N, C)
  int64_t n, c;
};
Margin marginArgs(const at::Tensor& self, const at::Tensor& target, const c10::Scalar& p, const OptTensor& weight) {
  TORCH_CHECK(p.toLong() == 1 || p.toLong() == 2, "multi_margin_loss: only p == 1 and p == 2 supported");
  TORCH_CHECK((self.dim() == 2 && self.size(1) != 0) || (self.dim() == 1 && self.size(0) != 0) || self.dim() == 0,
              "multi_margin_loss: Expected non-empty vector or matrix with optional 0-dim batch size, but got: ",
              self.sizes());
  at::Tensor x = self.dim() == 2 ? self : self.reshape({1, -1});  // 0-d: one frame of one class, as CPU
  int64_t n = x.size(0), c = x.size(1);
  TORCH_CHECK(target.numel() == n && target.dim() <= 1, "inconsistent target size, expected ", n, " but got ",
              target.sizes());
  if (has(weight)) {
    TORCH_CHECK(weight->dim() <= 1 && weight->numel() == c, "inconsistent weight size, expected ", c, " but got ",
                weight->sizes());
  }
  at::Tensor y = target.reshape({n}).to(at::kLong);
  at::Tensor onehot = at::arange(c, y.options()).unsqueeze(0) == y.unsqueeze(1);
  return {x, y, onehot, n, c};
}

at::Tensor multiMargin(const at::Tensor& self, const at::Tensor& target, const c10::Scalar& p,
                       const c10::Scalar& margin, const OptTensor& weight, int64_t reduction) {
  Margin m = marginArgs(self, target, p, weight);
  at::Tensor xy = m.x.gather(1, m.y.unsqueeze(1));
  at::Tensor z = (margin.toDouble() - xy + m.x).clamp_min(0);
  if (p.toLong() == 2) z = z * z;
  z = at::where(m.onehot, at::zeros({}, z.options()), z);
  if (has(weight)) z = z * weight->reshape({-1}).index_select(0, m.y).unsqueeze(1);
  at::Tensor l = z.sum(1) / static_cast<double>(m.c);
  if (reduction == at::Reduction::Mean) return l.mean();
  if (reduction == at::Reduction::Sum) return l.sum();
  return self.dim() < 2 ? l.reshape(target.sizes()) : l;
}
at::Tensor& multiMarginOut(const at::Tensor& self, const at::Tensor& target, const c10::Scalar& p,
                           const c10::Scalar& margin, const OptTensor& weight, int64_t reduction, at::Tensor& out) {
  at::Tensor r = multiMargin(self, target, p, margin, weight, reduction);
  out.resize_(r.sizes());
  return out.copy_(r);
}

at::Tensor multiMarginBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                               const c10::Scalar& p, const c10::Scalar& margin, const OptTensor& weight,
                               int64_t reduction) {
  Margin m = marginArgs(self, target, p, weight);
  at::Tensor xy = m.x.gather(1, m.y.unsqueeze(1));
  at::Tensor z = margin.toDouble() - xy + m.x;
  at::Tensor active = (z > 0) & ~m.onehot;
  at::Tensor h = p.toLong() == 2 ? 2 * z : at::ones_like(z);
  h = at::where(active, h, at::zeros({}, h.options())) / static_cast<double>(m.c);
  if (has(weight)) h = h * weight->reshape({-1}).index_select(0, m.y).unsqueeze(1);
  // Each active j != y adds h to x[j] and takes it from x[y].
  at::Tensor gi = h - m.onehot.to(h.scalar_type()) * h.sum(1, true);
  at::Tensor go = grad;
  if (reduction == at::Reduction::None && grad.dim() > 0) go = grad.reshape({m.n, 1});
  gi = gi * go;
  if (reduction == at::Reduction::Mean) gi = gi / static_cast<double>(m.n);
  return gi.reshape(self.sizes()).to(self.scalar_type());
}
at::Tensor& multiMarginBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                   const c10::Scalar& p, const c10::Scalar& margin, const OptTensor& weight,
                                   int64_t reduction, at::Tensor& gi) {
  at::Tensor r = multiMarginBackward(grad, self, target, p, margin, weight, reduction);
  gi.resize_(r.sizes());
  return gi.copy_(r);
}

// ---- cdist --------------------------------------------------------------------------------------------

std::pair<at::Tensor, at::Tensor> cdistExpand(const at::Tensor& x1, const at::Tensor& x2) {
  TORCH_CHECK(x1.dim() >= 2 && x2.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(),
              "D, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  TORCH_CHECK(at::isFloatingType(x1.scalar_type()) && at::isFloatingType(x2.scalar_type()),
              "cdist only supports floating-point dtypes, X1 got: ", x1.scalar_type(), ", X2 got: ", x2.scalar_type());
  auto b1 = x1.sizes().slice(0, x1.dim() - 2), b2 = x2.sizes().slice(0, x2.dim() - 2);
  std::vector<int64_t> batch = at::infer_size(b1, b2);
  std::vector<int64_t> s1 = batch, s2 = batch;
  s1.insert(s1.end(), {x1.size(-2), x1.size(-1)});
  s2.insert(s2.end(), {x2.size(-2), x2.size(-1)});
  return {x1.expand(s1), x2.expand(s2)};
}

at::Tensor cdistForward(const at::Tensor& a, const at::Tensor& b, double p, std::optional<int64_t>) {
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  auto [x1, x2] = cdistExpand(a, b);
  at::Tensor diff = x1.unsqueeze(-2) - x2.unsqueeze(-3);  // (..., P, R, M)
  if (diff.size(-1) == 0) return at::zeros(diff.sizes().slice(0, diff.dim() - 1), diff.options());
  return at::linalg_vector_norm(diff, p, {-1}, false);
}

// d||diff||_p / d(diff) times g, with CPU's rules where the distance (or, for p < 1, a difference) is zero.
at::Tensor pairGrad(const at::Tensor& diff, const at::Tensor& d, const at::Tensor& g, double p) {
  at::Tensor zero = at::zeros({}, diff.options());
  if (p == 1) return g * diff.sign();
  if (std::isinf(p)) return g * diff.sign() * (diff.abs() == d).to(diff.scalar_type());
  // The masked-out cases (zero distance, and zero differences for p < 1) see 1 instead of 0 in the powers,
  // so no intermediate is infinite (debug mode checks them); their result is 0 as on CPU.
  at::Tensor one = at::ones({}, diff.options());
  at::Tensor z = (d == 0);
  at::Tensor sd = at::where(z, one, d);
  if (p == 2) return at::where(z, zero, g * diff / sd);
  if (p < 2) {
    if (p < 1) z = z | (diff == 0);
    at::Tensor ad = at::where(diff == 0, one, diff.abs());
    return at::where(z, zero, diff.sign() * ad.pow(p - 1) * g / sd.pow(p - 1));
  }
  return at::where(z, zero, diff * diff.abs().pow(p - 2) * g / sd.pow(p - 1));
}

at::Tensor cdistBackward(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, double p,
                         const at::Tensor& dist) {
  auto [x1, x2] = cdistExpand(a, b);
  at::Tensor diff = x1.unsqueeze(-2) - x2.unsqueeze(-3);
  if (p == 0 || diff.numel() == 0) return at::zeros(a.sizes(), a.options());
  at::Tensor r = pairGrad(diff, dist.unsqueeze(-1), grad.unsqueeze(-1), p);
  return r.sum(-2).sum_to_size(a.sizes()).contiguous();
}

// ---- pdist: the cdist of the rows with themselves, pairs i < j in row-major order ---------------------

std::pair<at::Tensor, at::Tensor> pdistPairs(int64_t n, const at::Tensor& like) {
  at::Tensor ij = at::triu_indices(n, n, 1, at::TensorOptions().dtype(at::kLong)).to(like.device());
  return {ij[0], ij[1]};
}
at::Tensor pdistForward(const at::Tensor& self, double p) {
  TORCH_CHECK(self.dim() == 2, "pdist only supports 2D tensors, got: ", self.dim(), "D");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "pdist only supports floating-point dtypes");
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
  int64_t n = self.size(0);
  if (n <= 1) return at::empty({0}, self.options());
  auto [i, j] = pdistPairs(n, self);
  at::Tensor diff = self.index_select(0, i) - self.index_select(0, j);
  if (self.size(1) == 0) return at::zeros({diff.size(0)}, self.options());
  return at::linalg_vector_norm(diff, p, {1}, false);
}
at::Tensor pdistBackward(const at::Tensor& grad, const at::Tensor& self, double p, const at::Tensor& dist) {
  int64_t n = self.size(0);
  if (n <= 1 || p == 0 || self.numel() == 0) return at::zeros_like(self);
  auto [i, j] = pdistPairs(n, self);
  at::Tensor diff = self.index_select(0, i) - self.index_select(0, j);
  at::Tensor r = pairGrad(diff, dist.unsqueeze(1), grad.unsqueeze(1), p);
  return at::zeros_like(self).index_add(0, i, r).index_add(0, j, -r);
}

// ---- multilabel_margin_loss: targets are class lists ended by -1 ------------------------------------

// is_target (N, C): the classes listed before the first -1 of each row.
at::Tensor isTargetOf(const at::Tensor& target, int64_t c) {
  at::Tensor t = target.to(at::kLong);
  at::Tensor listed = (t < 0).to(at::kLong).cumsum(1) == 0;  // before the first -1
  at::Tensor onehot = at::zeros({t.size(0), c}, t.options()).scatter_add(1, at::where(listed, t, 0).clamp(0, c - 1),
                                                                        listed.to(at::kLong));
  return onehot > 0;
}

std::tuple<at::Tensor, at::Tensor> multilabelMarginForward(const at::Tensor& self, const at::Tensor& target,
                                                           int64_t reduction) {
  TORCH_CHECK(self.dim() <= 2 && target.sizes() == self.sizes(), "multilabel_margin_loss: inconsistent target "
              "size: ", target.sizes(), " for input of size: ", self.sizes());
  TORCH_CHECK(self.dim() == 0 || self.size(-1) > 0, "multilabel_margin_loss: Expected non-empty vector or matrix "
              "with optional 0-dim batch size, but got: ", self.sizes());
  at::Tensor x = self.dim() == 2 ? self : self.reshape({1, -1});
  at::Tensor t = target.reshape(x.sizes());
  int64_t n = x.size(0), c = x.size(1);
  at::Tensor isT = isTargetOf(t, c);
  at::Tensor tl = t.to(at::kLong);
  at::Tensor listed = (tl < 0).to(at::kLong).cumsum(1) == 0;
  // loss_n = sum over listed targets j and non-target classes i of max(0, 1 - (x[j] - x[i])) / C.
  at::Tensor xj = x.gather(1, at::where(listed, tl, 0).clamp(0, c - 1));     // (N, C): x at each listed target
  at::Tensor z = (1 - (xj.unsqueeze(2) - x.unsqueeze(1))).clamp_min(0);       // (N, Cj, Ci)
  at::Tensor use = listed.unsqueeze(2) & (~isT).unsqueeze(1);
  at::Tensor l = at::where(use, z, at::zeros({}, z.options())).sum({1, 2}) / static_cast<double>(c);
  // As CPU: 0-d and 1-d inputs give a 0-d loss also without reduction.
  at::Tensor out = reduction == at::Reduction::Mean ? l.mean() : reduction == at::Reduction::Sum ? l.sum()
                                                    : (self.dim() < 2 ? l.reshape({}) : l);
  return {out, isT.to(self.scalar_type()).reshape(self.sizes())};
}

at::Tensor multilabelMarginBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                    int64_t reduction, const at::Tensor&) {
  at::Tensor x = self.dim() == 2 ? self : self.reshape({1, -1});
  at::Tensor t = target.reshape(x.sizes());
  int64_t n = x.size(0), c = x.size(1);
  at::Tensor isT = isTargetOf(t, c);
  at::Tensor tl = t.to(at::kLong);
  at::Tensor listed = (tl < 0).to(at::kLong).cumsum(1) == 0;
  at::Tensor jIdx = at::where(listed, tl, 0).clamp(0, c - 1);
  at::Tensor xj = x.gather(1, jIdx);
  at::Tensor active = ((1 - (xj.unsqueeze(2) - x.unsqueeze(1))) > 0) & listed.unsqueeze(2) & (~isT).unsqueeze(1);
  at::Tensor h = active.to(x.scalar_type()) / static_cast<double>(c);  // (N, Cj, Ci)
  // +h to x[i], -h to x[j].
  at::Tensor gi = h.sum(1) - at::zeros_like(x).scatter_add(1, jIdx, h.sum(2));
  at::Tensor go = grad;
  if (reduction == at::Reduction::None && grad.dim() > 0) go = grad.reshape({n, 1});
  gi = gi * go;
  if (reduction == at::Reduction::Mean) gi = gi / static_cast<double>(n);
  return gi.reshape(self.sizes());
}

// rrelu as CPU computes it: training draws a slope uniform in [lower, upper] for every element <= 0 (kept in
// `noise`, which the backward reads; 1 elsewhere); evaluation is leaky_relu with the mean slope, noise untouched.
at::Tensor& rreluWithNoiseOut(const at::Tensor& self, at::Tensor& noise, const c10::Scalar& lower,
                              const c10::Scalar& upper, bool training, std::optional<at::Generator> gen,
                              at::Tensor& out) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "\"rrelu_with_noise_out_cpu\" not implemented for '",
              self.scalar_type(), "'");
  if (!training) {
    double slope = (lower.toDouble() + upper.toDouble()) / 2;
    return at::leaky_relu_out(out, self, slope);
  }
  TORCH_CHECK(noise.numel() == self.numel(), "rrelu_with_noise: noise must have as many elements as the input (",
              self.numel(), "), got ", noise.numel());
  at::Tensor slopes = at::empty(self.sizes(), self.options()).uniform_(lower.toDouble(), upper.toDouble(), gen);
  at::Tensor n = at::where(self <= 0, slopes, at::ones({}, self.options()));
  at::Tensor r = self * n;
  noise.copy_(n.reshape(noise.sizes()));
  at::native::resize_output(out, self.sizes());
  return out.copy_(r);
}
at::Tensor rreluWithNoise(const at::Tensor& self, at::Tensor& noise, const c10::Scalar& lower,
                          const c10::Scalar& upper, bool training, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return rreluWithNoiseOut(self, noise, lower, upper, training, std::move(gen), out);
}
at::Tensor& rreluWithNoise_(at::Tensor& self, at::Tensor& noise, const c10::Scalar& lower, const c10::Scalar& upper,
                            bool training, std::optional<at::Generator> gen) {
  return rreluWithNoiseOut(self, noise, lower, upper, training, std::move(gen), self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("rrelu_with_noise", rreluWithNoise);
  m.impl("rrelu_with_noise_", rreluWithNoise_);
  m.impl("rrelu_with_noise.out", rreluWithNoiseOut);
  m.impl("_weight_norm_interface", weightNorm);
  m.impl("_weight_norm_interface_backward", weightNormBackward);
  m.impl("multi_margin_loss", multiMargin);
  m.impl("multi_margin_loss.out", multiMarginOut);
  m.impl("multi_margin_loss_backward", multiMarginBackward);
  m.impl("multi_margin_loss_backward.grad_input", multiMarginBackwardOut);
  m.impl("_cdist_forward", cdistForward);
  m.impl("_cdist_backward", cdistBackward);
  m.impl("_pdist_forward", pdistForward);
  m.impl("_pdist_backward", pdistBackward);
  m.impl("multilabel_margin_loss_forward", multilabelMarginForward);
  m.impl("multilabel_margin_loss_backward", multilabelMarginBackward);
}

}  // namespace tpu::aten
