// Antialiased resizing (F.interpolate(..., antialias=True), torchvision's Resize): _upsample_bilinear2d_aa and
// _upsample_bicubic2d_aa with their backwards. The filter weights depend only on the sizes, so they are
// computed on the host exactly as CPU's separable kernel computes them (in the input's precision) and the
// resize is two matmuls, out = Wh @ x @ Ww^T; the backward is their transposes.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

namespace tpu::aten {
namespace {

using OptDouble = std::optional<double>;

template <class T>
T bilinearFilter(T x) {
  x = std::abs(x);
  return x < 1 ? 1 - x : 0;
}
template <class T>
T bicubicFilter(T x) {
  const T a = -0.5;  // Keys' kernel, as CPU's antialiased bicubic
  x = std::abs(x);
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// (out, in) weights of one axis, ATen's _compute_weights_aa (align_corners_delta 0 for floating inputs).
template <class T>
at::Tensor axisWeights(int64_t in, int64_t out, bool align, OptDouble scale, bool cubic, c10::ScalarType dtype) {
  T s;
  if (align) s = out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  else s = scale.has_value() && *scale > 0 ? static_cast<T>(1.0 / *scale) : static_cast<T>(in) / static_cast<T>(out);
  T interp = cubic ? 4 : 2;
  T support = s >= 1 ? interp * T(0.5) * s : interp * T(0.5);
  T invscale = s >= 1 ? T(1) / s : T(1);
  at::Tensor w = at::zeros({out, in}, at::TensorOptions().dtype(dtype));
  T* p = w.data_ptr<T>();
  for (int64_t i = 0; i < out; ++i) {
    T center = s * (static_cast<T>(i) + T(0.5));
    int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + T(0.5)), 0);
    int64_t xsize = std::min<int64_t>(static_cast<int64_t>(center + support + T(0.5)), in) - xmin;
    T total = 0;
    for (int64_t j = 0; j < xsize; ++j) {
      T v = (static_cast<T>(j + xmin) - center + T(0.5)) * invscale;
      v = cubic ? bicubicFilter(v) : bilinearFilter(v);
      p[i * in + xmin + j] = v;
      total += v;
    }
    if (total != 0)
      for (int64_t j = 0; j < xsize; ++j) p[i * in + xmin + j] /= total;
  }
  return w;
}

at::Tensor weights(int64_t in, int64_t out, bool align, OptDouble scale, bool cubic, const at::Tensor& like) {
  at::Tensor w = like.scalar_type() == at::kDouble ? axisWeights<double>(in, out, align, scale, cubic, at::kDouble)
                                                   : axisWeights<float>(in, out, align, scale, cubic, at::kFloat);
  return w.to(like.device()).to(like.scalar_type());
}

void checkSizes(const char* op, c10::IntArrayRef outSize, c10::IntArrayRef inSize) {
  TORCH_CHECK(outSize.size() == 2, op, ": it is expected output_size equals to 2, but got size ", outSize.size());
  TORCH_CHECK(inSize.size() == 4, op, ": it is expected input_size equals to 4, but got size ", inSize.size());
  TORCH_CHECK(inSize[2] > 0 && inSize[3] > 0 && outSize[0] > 0 && outSize[1] > 0, op,
              ": Input and output sizes should be greater than 0, but got input (H: ", inSize[2], ", W: ", inSize[3],
              ") output (H: ", outSize[0], ", W: ", outSize[1], ")");
}

template <bool Cubic>
at::Tensor& resizeOut(const at::Tensor& self, c10::SymIntArrayRef symOut, bool align, OptDouble sh, OptDouble sw,
                      at::Tensor& out) {
  auto os = C10_AS_INTARRAYREF_SLOW(symOut);
  const char* op = Cubic ? "upsample_bicubic2d_aa" : "upsample_bilinear2d_aa";
  TORCH_CHECK(self.dim() == 4, op, ": expected 4-D input (N, C, H, W), got ", self.sizes());
  checkSizes(op, os, self.sizes());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, ": expected a floating-point input, got ",
              self.scalar_type());
  at::native::resize_output(out, {self.size(0), self.size(1), os[0], os[1]});
  if (out.numel() == 0) return out;
  at::Tensor wh = weights(self.size(2), os[0], align, sh, Cubic, self);
  at::Tensor ww = weights(self.size(3), os[1], align, sw, Cubic, self);
  out.copy_(at::matmul(wh, at::matmul(self, ww.t())));
  return out;
}
template <bool Cubic>
at::Tensor resize(const at::Tensor& self, c10::SymIntArrayRef os, bool align, OptDouble sh, OptDouble sw) {
  at::Tensor out = at::empty({0}, self.options());
  return resizeOut<Cubic>(self, os, align, sh, sw, out);
}

template <bool Cubic>
at::Tensor& resizeBackwardOut(const at::Tensor& grad, c10::SymIntArrayRef symOut, c10::SymIntArrayRef symIn,
                              bool align, OptDouble sh, OptDouble sw, at::Tensor& gi) {
  auto os = C10_AS_INTARRAYREF_SLOW(symOut);
  auto is = C10_AS_INTARRAYREF_SLOW(symIn);
  checkSizes(Cubic ? "upsample_bicubic2d_aa_backward" : "upsample_bilinear2d_aa_backward", os, is);
  TORCH_CHECK(grad.dim() == 4 && grad.size(0) == is[0] && grad.size(1) == is[1] && grad.size(2) == os[0] &&
                  grad.size(3) == os[1],
              "Expected grad_output to have the output's shape (", is[0], ", ", is[1], ", ", os[0], ", ", os[1],
              "), but got ", grad.sizes());
  at::native::resize_output(gi, is);
  if (gi.numel() == 0) return gi;
  at::Tensor wh = weights(is[2], os[0], align, sh, Cubic, grad);
  at::Tensor ww = weights(is[3], os[1], align, sw, Cubic, grad);
  gi.copy_(at::matmul(wh.t(), at::matmul(grad, ww)));
  return gi;
}
template <bool Cubic>
at::Tensor resizeBackward(const at::Tensor& grad, c10::SymIntArrayRef os, c10::SymIntArrayRef is, bool align,
                          OptDouble sh, OptDouble sw) {
  at::Tensor gi = at::empty({0}, grad.options());
  return resizeBackwardOut<Cubic>(grad, os, is, align, sh, sw, gi);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_upsample_bilinear2d_aa", resize<false>);
  m.impl("_upsample_bilinear2d_aa.out", resizeOut<false>);
  m.impl("_upsample_bilinear2d_aa_backward", resizeBackward<false>);
  m.impl("_upsample_bilinear2d_aa_backward.grad_input", resizeBackwardOut<false>);
  m.impl("_upsample_bicubic2d_aa", resize<true>);
  m.impl("_upsample_bicubic2d_aa.out", resizeOut<true>);
  m.impl("_upsample_bicubic2d_aa_backward", resizeBackward<true>);
  m.impl("_upsample_bicubic2d_aa_backward.grad_input", resizeBackwardOut<true>);
}

}  // namespace tpu::aten
