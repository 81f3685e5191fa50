// Sampling and counting kernels composed of tpu ops: multinomial (Gumbel top-k without replacement as
// ATen's generic code, an inverse-CDF search with replacement), histc, histogram (bin count or edges),
// histogramdd, bincount, repeat_interleave. Bins are counted with an accumulating index_put; the bin of
// each element follows CPU's kernels (histc: linear interpolation; histogram: upper bound in the edges).
// Where CPU reads values back (validity checks, a range taken from the data, bincount's length) we read
// them back too.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>

namespace tpu::aten {
namespace {

using OptTensor = std::optional<at::Tensor>;
bool has(const OptTensor& t) { return t.has_value() && t->defined(); }

// ---- multinomial ------------------------------------------------------------------------------

at::Tensor& multinomialOut(const at::Tensor& self, int64_t n, bool replacement,
                           std::optional<at::Generator> gen, at::Tensor& result) {
  TORCH_CHECK(result.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(result.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ", result.scalar_type());
  TORCH_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
  int64_t k = self.size(-1);
  TORCH_CHECK(replacement || n <= k, "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(k > 0, "number of categories cannot be zero");
  std::vector<int64_t> shape = self.sizes().vec();
  shape.back() = n;
  result.resize_(shape);
  if (result.numel() == 0) return result;
  at::Tensor p = self.dim() == 1 ? self.unsqueeze(0) : self;
  // One host read for CPU's two checks.
  at::Tensor bad = at::stack({(~(p.amax() < INFINITY) | (p.amin() < 0)), (p.sum(1) <= 0).any()}).cpu();
  TORCH_CHECK(!bad[0].item<bool>(), "probability tensor contains either `inf`, `nan` or element < 0");
  TORCH_CHECK(!bad[1].item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
  at::Tensor idx;
  if (!replacement) {
    // argmax / top-n of p / q with q ~ Exp(1): Gumbel-max in exponential form, as ATen's generic path.
    at::Tensor q = at::empty_like(p).exponential_(1, gen);
    at::Tensor keys = p / q;
    idx = n == 1 ? keys.argmax(-1, true) : std::get<1>(keys.topk(n, -1));
  } else {
    // Inverse CDF: the first category whose normalised cumulative sum exceeds u ~ U[0, 1). Dividing by
    // the last entry makes it exactly 1; zero-probability categories repeat the previous value and are
    // never the first to exceed u.
    at::Tensor c = p.to(at::kDouble).cumsum(1);
    c = c / c.narrow(1, k - 1, 1);
    at::Tensor u = at::rand({p.size(0), n}, gen, p.options().dtype(at::kDouble));
    idx = at::searchsorted(c, u, false, true).clamp_max(k - 1);
  }
  result.copy_(self.dim() == 1 ? idx.squeeze(0) : idx);
  return result;
}
at::Tensor multinomial(const at::Tensor& self, int64_t n, bool replacement, std::optional<at::Generator> gen) {
  at::Tensor result = at::empty({0}, self.options().dtype(at::kLong));
  return multinomialOut(self, n, replacement, std::move(gen), result);
}

// ---- histc / histogram --------------------------------------------------------------------------

// Sums `w` (or ones) into `bins` bins at `pos`, keeping only elements where `in` holds.
at::Tensor countBins(const at::Tensor& pos, const at::Tensor& in, const OptTensor& w, int64_t bins,
                     const at::TensorOptions& opt) {
  at::Tensor idx = at::where(in, pos, at::zeros({}, pos.options())).clamp(0, bins - 1).reshape({-1});
  at::Tensor val = has(w) ? at::where(in, w->to(opt.dtype()), at::zeros({}, opt)) : in.to(opt.dtype());
  return at::zeros({bins}, opt).index_put_({idx}, val.reshape({-1}), true);
}

void checkFloatInput(const char* op, const at::Tensor& self) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, ": input tensor must be a floating-point tensor, got ",
              self.scalar_type());
}

at::Tensor& histcOut(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max,
                     at::Tensor& out) {
  // Integer inputs as CUDA (CPU has no integer kernel): transformers' MoE layers count tokens per expert
  // with histc on int32 expert ids on every device but cpu/mps.
  bool integral = at::isIntegralType(self.scalar_type(), /*includeBool=*/false);
  if (!integral) checkFloatInput("torch.histc", self);
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for dimension 0");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "torch.histc: input tensor and hist tensor should have the "
              "same dtype, but got input ", self.scalar_type(), " and hist ", out.scalar_type());
  double lo = min.toDouble(), hi = max.toDouble();
  if (lo == hi && self.numel() > 0) {
    auto mm = at::aminmax(self);
    at::Tensor both = at::stack({std::get<0>(mm), std::get<1>(mm)}).to(at::kDouble).cpu();
    lo = both[0].item<double>(), hi = both[1].item<double>();
  }
  if (lo == hi) lo -= 1, hi += 1;
  TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histc: range of [", lo, ", ", hi, "] is not finite");
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  out.resize_({bins});
  if (self.numel() == 0) return out.zero_();
  at::Tensor x = self.reshape({-1});
  if (integral) {
    // CUDA: bin = (x - min) * bins / (max - min) in int64 arithmetic, the right edge in the last bin.
    int64_t ilo = static_cast<int64_t>(lo), ihi = static_cast<int64_t>(hi);
    at::Tensor xl = x.to(at::kLong);
    at::Tensor pos = at::div((xl - ilo) * bins, ihi - ilo, "trunc");
    pos = at::where(pos == bins, pos - 1, pos);
    out.copy_(countBins(pos, (xl >= ilo) & (xl <= ihi), std::nullopt, bins, self.options()));
    return out;
  }
  // CPU: bin = (int64)((x - left) * bins / (right - left)) in the input dtype, the right edge in the last bin.
  at::Tensor left = at::scalar_tensor(lo, self.options()), right = at::scalar_tensor(hi, self.options());
  at::Tensor pos = ((x - left) * static_cast<double>(bins) / (right - left)).to(at::kLong);
  pos = at::where(pos == bins, pos - 1, pos);
  at::Tensor in = (x >= left) & (x <= right);
  out.copy_(countBins(pos, in, std::nullopt, bins, self.options()));
  return out;
}
at::Tensor histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  at::Tensor out = at::empty({0}, self.options());
  return histcOut(self, bins, min, max, out);
}

// Bins by upper bound in `edges` (1-d, increasing): CPU's binary search, and its local search after a linear
// guess gives the same bin.
std::tuple<at::Tensor, at::Tensor> histogramWithEdges(const at::Tensor& self, const at::Tensor& edges,
                                                      const OptTensor& weight, bool density) {
  int64_t bins = edges.numel() - 1;
  if (has(weight)) {
    TORCH_CHECK(weight->sizes() == self.sizes(), "torch.histogram: if weight tensor is provided it should have the "
                "same shape as the input tensor excluding its innermost dimension, but got input with shape ",
                self.sizes(), " and weight with shape ", weight->sizes());
    TORCH_CHECK(weight->scalar_type() == self.scalar_type(), "torch.histogram: if weight tensor is provided, input "
                "tensor and weight tensor should have the same dtype, but got input(", self.scalar_type(),
                "), and weight(", weight->scalar_type(), ")");
  }
  at::Tensor hist;
  if (self.numel() == 0 || bins == 0) {
    hist = at::zeros({std::max<int64_t>(bins, 0)}, self.options());
  } else {
    at::Tensor x = self.reshape({-1}).contiguous();
    at::Tensor e = edges.contiguous();
    at::Tensor pos = at::searchsorted(e, x, false, true) - 1;
    pos = at::where(pos == bins, pos - 1, pos);
    at::Tensor in = (x >= e.narrow(0, 0, 1)) & (x <= e.narrow(0, bins, 1));
    OptTensor w = has(weight) ? OptTensor(weight->reshape({-1})) : std::nullopt;
    hist = countBins(pos, in, w, bins, self.options());
  }
  if (density && bins > 0) {
    at::Tensor widths = edges.narrow(0, 1, bins) - edges.narrow(0, 0, bins);
    hist = hist / hist.sum() / widths;
  }
  return {hist, edges};
}

std::tuple<at::Tensor, at::Tensor> histogramBinCt(const at::Tensor& self, int64_t bins,
                                                  std::optional<at::ArrayRef<double>> range, const OptTensor& weight,
                                                  bool density) {
  checkFloatInput("torch.histogram", self);
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  double lo = 0, hi = 1;
  if (range.has_value()) {
    TORCH_CHECK(range->size() == 2, "torch.histogram: range should have 2 elements, but got ", range->size());
    lo = (*range)[0], hi = (*range)[1];
  } else if (self.numel() > 0) {
    auto mm = at::aminmax(self);
    at::Tensor both = at::stack({std::get<0>(mm), std::get<1>(mm)}).to(at::kDouble).cpu();
    lo = both[0].item<double>(), hi = both[1].item<double>();
  }
  TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histogram: range of [", lo, ", ", hi,
              "] is not finite");
  TORCH_CHECK(lo <= hi, "torch.histogram: min should not exceed max, but got min ", lo, " max ", hi);
  if (lo == hi) lo -= 0.5, hi += 0.5;
  at::Tensor edges = at::linspace(lo, hi, bins + 1, self.options());
  return histogramWithEdges(self, edges, weight, density);
}

std::tuple<at::Tensor, at::Tensor> histogramBins(const at::Tensor& self, const at::Tensor& bins,
                                                 const OptTensor& weight, bool density) {
  checkFloatInput("torch.histogram", self);
  TORCH_CHECK(bins.dim() == 1, "torch.histogram: bins tensor should have one dimension, but got ", bins.dim(),
              " dimensions in the bins tensor");
  TORCH_CHECK(bins.numel() > 0, "torch.histogram: bins tensor should have at least 1 element, but got ",
              bins.numel(), " elements");
  TORCH_CHECK(bins.scalar_type() == self.scalar_type(), "torch.histogram: input tensor and bins tensors should "
              "have the same dtype, but got input ", self.scalar_type(), " and bins ", bins.scalar_type());
  return histogramWithEdges(self, bins.clone(), weight, density);
}

// ---- histogramdd: points (..., D) into a D-dimensional grid of bins ------------------------------------

std::vector<at::Tensor> histogramddEdges(const at::Tensor& self, at::IntArrayRef bins,
                                         std::optional<at::ArrayRef<double>> range) {
  checkFloatInput("torch.histogramdd", self);
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions, but got ",
              self.dim());
  int64_t d = self.size(-1);
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == d, "torch.histogramdd: expected ", d, " sequences of bin edges "
              "for each of the ", d, " dimensions of the input, but got ", bins.size());
  if (range.has_value()) {
    TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * d, "torch.histogramdd: for a ", d, "-dimensional "
                "histogram range should have ", 2 * d, " elements, but got ", range->size());
  }
  std::vector<double> lo(d, 0.0), hi(d, 1.0);
  at::Tensor x = self.reshape({-1, d});
  if (range.has_value()) {
    for (int64_t i = 0; i < d; ++i) lo[i] = (*range)[2 * i], hi[i] = (*range)[2 * i + 1];
  } else if (x.size(0) > 0) {
    at::Tensor both = at::stack({std::get<0>(x.min(0)), std::get<0>(x.max(0))}).to(at::kDouble).cpu();
    for (int64_t i = 0; i < d; ++i) lo[i] = both[0][i].item<double>(), hi[i] = both[1][i].item<double>();
  }
  std::vector<at::Tensor> edges;
  for (int64_t i = 0; i < d; ++i) {
    TORCH_CHECK(bins[i] > 0, "torch.histogramdd(): bins must be > 0, but got ", bins[i], " for dimension ", i);
    TORCH_CHECK(std::isfinite(lo[i]) && std::isfinite(hi[i]), "torch.histogramdd: dimension ", i, "'s range [",
                lo[i], ", ", hi[i], "] is not finite");
    TORCH_CHECK(lo[i] <= hi[i], "torch.histogramdd: min should not exceed max, but got min ", lo[i], " max ", hi[i],
                " for dimension ", i);
    if (lo[i] == hi[i]) lo[i] -= 0.5, hi[i] += 0.5;
    edges.push_back(at::linspace(lo[i], hi[i], bins[i] + 1, self.options()));
  }
  return edges;
}

at::Tensor histogramddCount(const at::Tensor& self, at::TensorList edges, const OptTensor& weight, bool density) {
  checkFloatInput("torch.histogramdd", self);
  int64_t d = self.size(-1);
  TORCH_CHECK(static_cast<int64_t>(edges.size()) == d, "torch.histogramdd: expected ", d, " sequences of bin edges "
              "for each of the ", d, " dimensions of the input, but got ", edges.size());
  at::Tensor x = self.reshape({-1, d});
  if (has(weight)) {
    TORCH_CHECK(weight->numel() == x.size(0), "torch.histogramdd: if weight tensor is provided it should have the "
                "same shape as the input tensor excluding its innermost dimension, but got input with shape ",
                self.sizes(), " and weight with shape ", weight->sizes());
  }
  std::vector<int64_t> shape;
  for (const at::Tensor& e : edges) {
    TORCH_CHECK(e.dim() == 1 && e.numel() >= 1, "torch.histogramdd: bins tensors should be 1-d with at least one "
                "element, got ", e.sizes());
    shape.push_back(e.numel() - 1);
  }
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  at::Tensor hist;
  if (x.size(0) == 0 || total == 0) {
    hist = at::zeros(shape, self.options());
  } else {
    at::Tensor flat = at::zeros({x.size(0)}, x.options().dtype(at::kLong));
    at::Tensor in = at::ones({x.size(0)}, x.options().dtype(at::kBool));
    for (int64_t i = 0; i < d; ++i) {
      at::Tensor e = edges[i].contiguous(), xi = x.select(1, i).contiguous();
      int64_t nb = shape[i];
      at::Tensor pos = at::searchsorted(e, xi, false, true) - 1;
      pos = at::where(pos == nb, pos - 1, pos).clamp(0, std::max<int64_t>(nb - 1, 0));
      in = in & (xi >= e.narrow(0, 0, 1)) & (xi <= e.narrow(0, nb, 1));
      flat = flat * nb + pos;
    }
    OptTensor w = has(weight) ? OptTensor(weight->reshape({-1})) : std::nullopt;
    hist = countBins(flat, in, w, total, self.options()).reshape(shape);
  }
  if (density && total > 0) {
    hist = hist / hist.sum();
    for (int64_t i = 0; i < d; ++i) {
      std::vector<int64_t> v(d, 1);
      v[i] = shape[i];
      hist = hist / (edges[i].narrow(0, 1, shape[i]) - edges[i].narrow(0, 0, shape[i])).view(v);
    }
  }
  return hist;
}

std::vector<at::Tensor> histogramddBinEdges(const at::Tensor& self, at::IntArrayRef bins,
                                            std::optional<at::ArrayRef<double>> range, const OptTensor&, bool) {
  return histogramddEdges(self, bins, range);
}
at::Tensor histogramddFromBinCts(const at::Tensor& self, at::IntArrayRef bins,
                                 std::optional<at::ArrayRef<double>> range, const OptTensor& weight, bool density) {
  std::vector<at::Tensor> edges = histogramddEdges(self, bins, range);
  return histogramddCount(self, edges, weight, density);
}
at::Tensor histogramddFromBinTensors(const at::Tensor& self, at::TensorList bins, const OptTensor& weight,
                                     bool density) {
  return histogramddCount(self, bins, weight, density);
}

// ---- bincount ------------------------------------------------------------------------------------

at::Tensor bincount(const at::Tensor& self, const OptTensor& weights, int64_t minlength) {
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1 && !at::isFloatingType(self.scalar_type()) && self.scalar_type() != at::kBool,
              "bincount only supports 1-d non-negative integral inputs.");
  if (has(weights)) {
    TORCH_CHECK(weights->dim() == 1 && weights->size(0) == self.size(0),
                "weights should be 1-d and have the same length as input");
  }
  // As CPU: float weights count in float, any other weights in double, no weights in int64.
  at::ScalarType out = !has(weights) ? at::kLong : weights->scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  at::TensorOptions opt = self.options().dtype(out);
  if (self.numel() == 0) return at::zeros({minlength}, opt);
  auto mm = at::aminmax(self);
  at::Tensor both = at::stack({std::get<0>(mm), std::get<1>(mm)}).to(at::kLong).cpu();
  TORCH_CHECK(both[0].item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
  int64_t n = std::max(both[1].item<int64_t>() + 1, minlength);
  at::Tensor val = has(weights) ? weights->to(out) : at::ones({self.size(0)}, opt);
  return at::zeros({n}, opt).index_put_({self.to(at::kLong)}, val, true);
}

// ---- repeat_interleave ----------------------------------------------------------------------------

// Output j holds the index i with cumsum(repeats)[i - 1] <= j < cumsum(repeats)[i]: an upper-bound search.
// Without output_size the total (and CPU's non-negativity check) is read back, as on CPU.
at::Tensor repeatInterleave(const at::Tensor& repeats, std::optional<c10::SymInt> outputSize) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  at::Tensor r = repeats.to(at::kLong);
  int64_t total;
  if (outputSize.has_value()) {
    total = outputSize->expect_int();
  } else if (r.numel() == 0) {
    total = 0;
  } else {
    at::Tensor both = at::stack({r.sum(), r.min()}).cpu();
    TORCH_CHECK(both[1].item<int64_t>() >= 0, "repeats can not be negative");
    total = both[0].item<int64_t>();
  }
  if (total == 0 || r.numel() == 0) return at::empty({total}, repeats.options());
  at::Tensor cum = r.cumsum(0);
  return at::searchsorted(cum, at::arange(total, cum.options()), false, true).to(repeats.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multinomial", multinomial);
  m.impl("multinomial.out", multinomialOut);
  m.impl("histc", histc);
  m.impl("histc.out", histcOut);
  m.impl("histogram.bin_ct", histogramBinCt);
  m.impl("histogram.bins_tensor", histogramBins);
  m.impl("bincount", bincount);
  m.impl("_histogramdd_bin_edges", histogramddBinEdges);
  m.impl("_histogramdd_from_bin_cts", histogramddFromBinCts);
  m.impl("_histogramdd_from_bin_tensors", histogramddFromBinTensors);
  m.impl("repeat_interleave.Tensor", repeatInterleave);
}

}  // namespace tpu::aten
