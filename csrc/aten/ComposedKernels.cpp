// Kernels composed of other tpu ops (each part compiled and cached on its own):
// index_reduce (as scatter_reduce), linalg_cross, smooth_l1/huber/binary
// cross-entropy losses (+ backward), prelu (+ backward), channel_shuffle,
// unfold_backward, logspace. float16/bfloat16 losses compute in float32.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "Elementwise.h"

namespace tpu::aten {
namespace {

void writeOut(at::Tensor& out, const at::Tensor& r) {
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
}

// ---- index_reduce: scatter_reduce with the 1-d index spread over source's shape ------------

at::Tensor& indexReduceOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                           c10::string_view reduce, bool includeSelf, at::Tensor& out) {
  IndexErrorScope scope("aten::index_reduce", runtime::ErrorKind::Index);
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
              "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ", reduce, ".");
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_reduce_(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_reduce_(): Expected dtype int32/int64 for index");
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_reduce_(): self (", self.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  at::Tensor src = source.dim() == 0 ? source.reshape({1}) : source;
  at::Tensor base = self.dim() == 0 ? self.reshape({1}) : self;
  std::vector<int64_t> shape(src.dim(), 1);
  shape[dim] = index.numel();
  at::Tensor idx = index.to(at::kLong).reshape(shape).expand(src.sizes());
  at::Tensor r = base.scatter_reduce(dim, idx, src, reduce, includeSelf);
  if (!out.is_same(self)) at::native::resize_output(out, self.sizes());
  out.copy_(r.view(self.sizes()));
  return out;
}
at::Tensor indexReduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                       c10::string_view reduce, bool includeSelf) {
  at::Tensor out = at::empty_like(self);
  return indexReduceOut(self, dim, index, source, reduce, includeSelf, out);
}
at::Tensor& indexReduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                         c10::string_view reduce, bool includeSelf) {
  return indexReduceOut(self, dim, index, source, reduce, includeSelf, self);
}

// ---- linalg_cross ---------------------------------------------------------------------------

at::Tensor& crossOut(const at::Tensor& self, const at::Tensor& other, int64_t dim, at::Tensor& out) {
  TORCH_CHECK(self.dim() == other.dim(), "linalg.cross: inputs must have the same number of dimensions.");
  auto shape = at::infer_size(self.sizes(), other.sizes());
  dim = at::maybe_wrap_dim(dim, static_cast<int64_t>(shape.size()));
  TORCH_CHECK(shape[dim] == 3, "linalg.cross: inputs dimension ", dim, " must have length 3. Got ", self.size(dim),
              " and ", other.size(dim));
  at::Tensor a = self.expand(shape), b = other.expand(shape);
  auto c = [&](const at::Tensor& t, int64_t i) { return t.narrow(dim, i, 1); };
  at::Tensor r = at::cat({c(a, 1) * c(b, 2) - c(a, 2) * c(b, 1), c(a, 2) * c(b, 0) - c(a, 0) * c(b, 2),
                          c(a, 0) * c(b, 1) - c(a, 1) * c(b, 0)},
                         dim);
  writeOut(out, r);
  return out;
}
at::Tensor cross(const at::Tensor& self, const at::Tensor& other, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::result_type(self, other)));
  return crossOut(self, other, dim, out);
}

// ---- losses ------------------------------------------------------------------------------------

at::Tensor reduceLoss(const at::Tensor& l, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return l.mean();
  if (reduction == at::Reduction::Sum) return l.sum();
  return l;
}
at::Tensor upcast(const at::Tensor& t) { return t.to(opmathType(t.scalar_type())); }

// smooth_l1 (beta) and huber (delta): |d| < k ? 0.5 d^2 / beta (or 0.5 d^2) : |d| - 0.5 beta (delta (|d| - 0.5 delta)).
at::Tensor smoothLoss(const at::Tensor& self, const at::Tensor& target, double k, bool huber) {
  at::Tensor d = upcast(self) - upcast(target), ad = d.abs();
  if (!huber && k == 0) return ad;
  at::Tensor small = huber ? d * d * 0.5 : d * d * (0.5 / k);
  at::Tensor large = huber ? (ad - 0.5 * k) * k : ad - 0.5 * k;
  return at::where(ad < k, small, large);
}
at::Tensor smoothGrad(const at::Tensor& g, const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                      double k, bool huber) {
  at::Tensor d = upcast(self) - upcast(target);
  double norm = reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(std::max<int64_t>(self.numel(), 1)) : 1.0;
  at::Tensor gx;
  if (!huber && k == 0) gx = d.sign();
  else if (huber) gx = at::where(d < -k, -k, at::where(d > k, at::scalar_tensor(k, d.options()), d));
  else gx = at::where(d < -k, -1.0, at::where(d > k, at::scalar_tensor(1.0, d.options()), d / k));
  return gx * upcast(g) * norm;
}

template <bool Huber>
at::Tensor& smoothOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double k, at::Tensor& out) {
  if (Huber) {
    TORCH_CHECK(k > 0, "huber_loss does not support non-positive values for delta.");
  } else {
    TORCH_CHECK(k >= 0, "smooth_l1_loss does not support negative values for beta.");
  }
  writeOut(out, reduceLoss(smoothLoss(self, target, k, Huber), reduction).to(out.scalar_type()));
  return out;
}
template <bool Huber>
at::Tensor smooth(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double k) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::result_type(self, target)));
  return smoothOut<Huber>(self, target, reduction, k, out);
}
template <bool Huber>
at::Tensor& smoothBackwardOut(const at::Tensor& g, const at::Tensor& self, const at::Tensor& target,
                              int64_t reduction, double k, at::Tensor& gi) {
  writeOut(gi, smoothGrad(g, self, target, reduction, k, Huber).expand(self.sizes()).to(self.scalar_type()));
  return gi;
}

at::Tensor bceLoss(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight) {
  at::Tensor x = upcast(self), t = upcast(target);
  // As CPU: each log is clamped at -100.
  at::Tensor l = -(t * at::clamp_min(at::log(x), -100) + (1 - t) * at::clamp_min(at::log1p(-x), -100));
  if (weight && weight->defined()) l = l * upcast(*weight);
  return l;
}
at::Tensor& bceOut(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                   int64_t reduction, at::Tensor& out) {
  TORCH_CHECK(self.sizes().equals(target.sizes()), "Using a target size (", target.sizes(), ") that is different to "
              "the input size (", self.sizes(), ") is deprecated. Please ensure they have the same size.");
  writeOut(out, reduceLoss(bceLoss(self, target, weight), reduction).to(self.scalar_type()));
  return out;
}
at::Tensor bce(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
               int64_t reduction) {
  at::Tensor out = at::empty({0}, self.options());
  return bceOut(self, target, weight, reduction, out);
}
at::Tensor& bceBackwardOut(const at::Tensor& g, const at::Tensor& self, const at::Tensor& target,
                           const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& gi) {
  at::Tensor x = upcast(self), t = upcast(target);
  // As CPU: (x - t) / max((1 - x) x, 1e-12).
  at::Tensor r = (x - t) / at::clamp_min((1 - x) * x, 1e-12) * upcast(g);
  if (weight && weight->defined()) r = r * upcast(*weight);
  if (reduction == at::Reduction::Mean) r = r / static_cast<double>(std::max<int64_t>(self.numel(), 1));
  writeOut(gi, r.expand(self.sizes()).to(self.scalar_type()));
  return gi;
}
at::Tensor bceBackward(const at::Tensor& g, const at::Tensor& self, const at::Tensor& target,
                       const std::optional<at::Tensor>& weight, int64_t reduction) {
  at::Tensor gi = at::empty({0}, self.options());
  return bceBackwardOut(g, self, target, weight, reduction, gi);
}

// ---- prelu, channel_shuffle, unfold_backward, logspace ---------------------------------------------

at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight) {
  return at::where(self > 0, self, weight * self).to(self.scalar_type());
}
std::tuple<at::Tensor, at::Tensor> preluBackward(const at::Tensor& g, const at::Tensor& self,
                                                 const at::Tensor& weight) {
  at::Tensor pos = self > 0;
  at::Tensor gi = at::where(pos, g, weight * g).to(self.scalar_type());
  at::Tensor gw = at::where(pos, at::zeros({}, g.options()), self * g).sum_to_size(weight.sizes()).to(weight.scalar_type());
  return {gi, gw};
}

at::Tensor channelShuffle(const at::Tensor& self, c10::SymInt symGroups) {
  int64_t groups = symGroups.expect_int();
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive. Value of groups:", groups);
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but got input with sizes ",
              self.sizes());
  int64_t c = self.size(1);
  TORCH_CHECK(c % groups == 0, "Number of channels must be divisible by groups. Got ", c, " channels and ", groups,
              " groups.");
  std::vector<int64_t> shape = self.sizes().vec();
  shape[1] = c / groups;
  shape.insert(shape.begin() + 1, groups);
  return self.reshape(shape).transpose(1, 2).reshape(self.sizes()).clone(at::MemoryFormat::Contiguous);
}

at::Tensor unfoldBackward(const at::Tensor& gradIn, c10::SymIntArrayRef inputSizes, int64_t dim, int64_t size,
                          int64_t step) {
  auto sizes = C10_AS_INTARRAYREF_SLOW(inputSizes);
  dim = at::maybe_wrap_dim(dim, static_cast<int64_t>(std::max<size_t>(sizes.size(), 1)));
  at::Tensor result = at::zeros(sizes, gradIn.options());
  int64_t nwin = gradIn.dim() > dim ? gradIn.size(dim) : 1;
  if (gradIn.numel() == 0 || nwin == 0) return result;
  if (sizes.empty()) return result + gradIn.reshape({});
  // Window i, element k lands at i * step + k along dim: one index_add over the (window, element) pairs.
  at::Tensor g = gradIn.movedim(-1, dim + 1);
  std::vector<int64_t> merged = g.sizes().vec();
  merged[dim] = nwin * size;
  merged.erase(merged.begin() + dim + 1);
  g = g.reshape(merged);
  at::Tensor idx = (at::arange(nwin, gradIn.options().dtype(at::kLong)) * step).unsqueeze(1) +
                   at::arange(size, gradIn.options().dtype(at::kLong)).unsqueeze(0);
  return result.index_add(dim, idx.reshape({-1}), g);
}

at::Tensor& logspaceOut(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, double base,
                        at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  // Exponents and powers in float64 where the plugin has it, as CPU's scalar loop computes in double for
  // integral outputs; floating outputs use their own dtype.
  bool fl = c10::isFloatingType(out.scalar_type()) || c10::isComplexType(out.scalar_type());
  c10::ScalarType t = fl ? out.scalar_type() : at::kDouble;
  // Integral outputs: CPU truncates start/end to integers and takes a float base.
  c10::Scalar s0 = fl ? start : c10::Scalar(start.toLong()), s1 = fl ? end : c10::Scalar(end.toLong());
  double bs = fl ? base : static_cast<double>(static_cast<float>(base));
  at::Tensor e = at::linspace(s0, s1, steps, out.options().dtype(t));
  at::Tensor r = at::pow(at::scalar_tensor(bs, out.options().dtype(t)), e);
  out.copy_(fl ? r : r.trunc());
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_reduce", indexReduce);
  m.impl("index_reduce_", indexReduce_);
  m.impl("index_reduce.out", indexReduceOut);
  m.impl("linalg_cross", cross);
  m.impl("linalg_cross.out", crossOut);
  m.impl("smooth_l1_loss", smooth<false>);
  m.impl("smooth_l1_loss.out", smoothOut<false>);
  m.impl("smooth_l1_loss_backward.grad_input", smoothBackwardOut<false>);
  m.impl("huber_loss", smooth<true>);
  m.impl("huber_loss.out", smoothOut<true>);
  m.impl("huber_loss_backward.out", smoothBackwardOut<true>);
  m.impl("binary_cross_entropy", bce);
  m.impl("binary_cross_entropy.out", bceOut);
  m.impl("binary_cross_entropy_backward", bceBackward);
  m.impl("binary_cross_entropy_backward.grad_input", bceBackwardOut);
  m.impl("_prelu_kernel", prelu);
  m.impl("_prelu_kernel_backward", preluBackward);
  m.impl("channel_shuffle", channelShuffle);
  m.impl("unfold_backward", unfoldBackward);
  m.impl("logspace.out", logspaceOut);
}

}  // namespace tpu::aten
