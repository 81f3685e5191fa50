// fractional_max_pool2d / 3d (+ backwards), composed of tpu ops with CPU's rules: per (batch, plane) and per
// spatial dim, the window starts are CPU's pseudo-random intervals from the sample u in [0, 1):
// start_i = int((i + u) alpha) - int(u alpha) with alpha = (in - pool) / (out - 1), the last window ending at
// the input's edge. Each output is the maximum of its window (the first on ties), its index the flat
// position in the input plane; the backward adds the gradient at those indices.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

namespace tpu::aten {
namespace {

// Window starts [N, C, out] (int64) for spatial dim `d` of `rank` from samples [N, C, rank].
at::Tensor intervals(const at::Tensor& samples, int64_t which, int64_t in, int64_t out, int64_t pool) {
  at::Tensor u = samples.select(-1, which).unsqueeze(-1);  // [N, C, 1], the input's dtype as on CPU
  auto opts = samples.options().dtype(at::kLong);
  if (out == 1) return at::full({samples.size(0), samples.size(1), 1}, in - pool, opts);
  double alpha = static_cast<double>(in - pool) / static_cast<double>(out - 1);
  at::Tensor a = at::scalar_tensor(alpha, samples.options());
  at::Tensor i = at::arange(out - 1, samples.options());
  at::Tensor seq = ((i + u) * a).trunc().to(at::kLong) - (u * a).trunc().to(at::kLong);
  return at::cat({seq, at::full({samples.size(0), samples.size(1), 1}, in - pool, opts)}, -1);
}

std::tuple<at::Tensor&, at::Tensor&> fractionalMaxPool(const char* op, int64_t rank, const at::Tensor& self,
                                                       at::IntArrayRef kernel, at::IntArrayRef outSize,
                                                       const at::Tensor& samples, at::Tensor& output,
                                                       at::Tensor& indices) {
  TORCH_CHECK(kernel.size() == static_cast<size_t>(rank) && outSize.size() == static_cast<size_t>(rank), op,
              ": kernel_size and output_size must have ", rank, " elements");
  TORCH_CHECK(self.dim() == rank + 1 || self.dim() == rank + 2, op, ": Expected ", rank + 1, "D or ", rank + 2,
              "D tensor, but got: ", self.sizes());
  bool batched = self.dim() == rank + 2;
  at::Tensor x = batched ? self : self.unsqueeze(0);
  int64_t N = x.size(0), C = x.size(1);
  static const char* names[] = {"time", "height", "width"};
  for (int64_t d = 0; d < rank; ++d) {
    int64_t in = x.size(2 + d);
    TORCH_CHECK(outSize[d] + kernel[d] - 1 <= in, op, ": pool ", names[3 - rank + d], " ", kernel[d],
                " too large relative to input ", names[3 - rank + d], " ", in);
  }
  TORCH_CHECK(samples.dim() == 3 && samples.size(0) >= N && samples.size(1) == C && samples.size(2) == rank, op,
              ": random_samples must be [N, C, ", rank, "], got ", samples.sizes());
  std::vector<int64_t> outShape{N, C};
  outShape.insert(outShape.end(), outSize.begin(), outSize.end());
  if (x.numel() == 0 || N == 0) {
    at::native::resize_output(output, batched ? outShape : at::IntArrayRef(outShape).slice(1));
    at::native::resize_output(indices, batched ? outShape : at::IntArrayRef(outShape).slice(1));
    return {output, indices};
  }
  at::Tensor smp = samples.narrow(0, 0, N);
  // CPU's sample order: 2-d (w, h), 3-d (t, h, w).
  std::vector<int64_t> which = rank == 2 ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0, 1, 2};
  // flat [N, C, out..., pool...]: the input-plane position of every window element.
  std::vector<int64_t> ones(2 + 2 * rank, 1);
  ones[0] = N;
  ones[1] = C;
  at::Tensor flat = at::zeros(ones, x.options().dtype(at::kLong));
  int64_t stride = 1;
  std::vector<int64_t> strides(rank);
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= x.size(2 + d);
  }
  for (int64_t d = 0; d < rank; ++d) {
    at::Tensor pos = intervals(smp, which[d], x.size(2 + d), outSize[d], kernel[d]).unsqueeze(-1) +
                     at::arange(kernel[d], flat.options());  // [N, C, out_d, pool_d]
    // Place out_d at dim 2 + d and pool_d at dim 2 + rank + d of [N, C, out..., pool...].
    std::vector<int64_t> shape(2 + 2 * rank, 1);
    shape[0] = N;
    shape[1] = C;
    shape[2 + d] = outSize[d];
    shape[2 + rank + d] = kernel[d];
    flat = flat + (pos * strides[d]).reshape(shape);
  }
  int64_t windows = 1, poolN = 1;
  for (int64_t d = 0; d < rank; ++d) {
    windows *= outSize[d];
    poolN *= kernel[d];
  }
  // [N, C, out..., pool...] -> [N, C, windows, pool elements]: already in that order.
  at::Tensor idx = flat.reshape({N, C, windows * poolN});
  at::Tensor vals = at::gather(x.reshape({N, C, stride}), 2, idx).reshape({N, C, windows, poolN});
  auto [mx, arg] = at::max(vals, -1);
  at::Tensor pick = at::gather(idx.reshape({N, C, windows, poolN}), 3, arg.unsqueeze(-1)).squeeze(-1);
  at::Tensor o = mx.reshape(outShape), ix = pick.reshape(outShape);
  if (!batched) {
    o = o.squeeze(0);
    ix = ix.squeeze(0);
  }
  at::native::resize_output(output, o.sizes());
  at::native::resize_output(indices, ix.sizes());
  output.copy_(o);
  indices.copy_(ix);
  return {output, indices};
}

at::Tensor& fractionalMaxPoolBackward(int64_t rank, const at::Tensor& grad, const at::Tensor& self,
                                      const at::Tensor& indices, at::Tensor& gradInput) {
  bool batched = self.dim() == rank + 2;
  at::Tensor x = batched ? self : self.unsqueeze(0);
  at::Tensor g = batched ? grad : grad.unsqueeze(0), ix = batched ? indices : indices.unsqueeze(0);
  int64_t N = x.size(0), C = x.size(1), plane = 1;
  for (int64_t d = 0; d < rank; ++d) plane *= x.size(2 + d);
  at::Tensor gi = at::zeros({N, C, plane}, grad.options())
                      .scatter_add(2, ix.reshape({N, C, -1}), g.reshape({N, C, -1}))
                      .reshape(x.sizes());
  if (!batched) gi = gi.squeeze(0);
  at::native::resize_output(gradInput, self.sizes());
  return gradInput.copy_(gi);
}

std::tuple<at::Tensor&, at::Tensor&> fmp2Out(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef outSize,
                                             const at::Tensor& samples, at::Tensor& output, at::Tensor& indices) {
  return fractionalMaxPool("fractional_max_pool2d()", 2, self, kernel, outSize, samples, output, indices);
}
std::tuple<at::Tensor, at::Tensor> fmp2(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef outSize,
                                        const at::Tensor& samples) {
  at::Tensor o = at::empty({0}, self.options()), i = at::empty({0}, self.options().dtype(at::kLong));
  fmp2Out(self, kernel, outSize, samples, o, i);
  return {o, i};
}
std::tuple<at::Tensor&, at::Tensor&> fmp3Out(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef outSize,
                                             const at::Tensor& samples, at::Tensor& output, at::Tensor& indices) {
  return fractionalMaxPool("fractional_max_pool3d()", 3, self, kernel, outSize, samples, output, indices);
}
std::tuple<at::Tensor, at::Tensor> fmp3(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef outSize,
                                        const at::Tensor& samples) {
  at::Tensor o = at::empty({0}, self.options()), i = at::empty({0}, self.options().dtype(at::kLong));
  fmp3Out(self, kernel, outSize, samples, o, i);
  return {o, i};
}
at::Tensor& fmp2BackOut(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef, at::IntArrayRef,
                        const at::Tensor& indices, at::Tensor& gradInput) {
  return fractionalMaxPoolBackward(2, grad, self, indices, gradInput);
}
at::Tensor fmp2Back(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef o,
                    const at::Tensor& indices) {
  at::Tensor gi = at::empty({0}, grad.options());
  return fmp2BackOut(grad, self, k, o, indices, gi);
}
at::Tensor& fmp3BackOut(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef, at::IntArrayRef,
                        const at::Tensor& indices, at::Tensor& gradInput) {
  return fractionalMaxPoolBackward(3, grad, self, indices, gradInput);
}
at::Tensor fmp3Back(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef o,
                    const at::Tensor& indices) {
  at::Tensor gi = at::empty({0}, grad.options());
  return fmp3BackOut(grad, self, k, o, indices, gi);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fractional_max_pool2d", fmp2);
  m.impl("fractional_max_pool2d.output", fmp2Out);
  m.impl("fractional_max_pool2d_backward", fmp2Back);
  m.impl("fractional_max_pool2d_backward.grad_input", fmp2BackOut);
  m.impl("fractional_max_pool3d", fmp3);
  m.impl("fractional_max_pool3d.output", fmp3Out);
  m.impl("fractional_max_pool3d_backward", fmp3Back);
  m.impl("fractional_max_pool3d_backward.grad_input", fmp3BackOut);
}

}  // namespace tpu::aten
