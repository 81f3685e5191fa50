// Upsampling (nearest, nearest-exact 1d/2d/3d, linear 1d, bilinear 2d,
// trilinear 3d, bicubic 2d) and reflection/replication padding (1d/2d/3d),
// each with its backward, on the separable resampling lowering.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Resample.h"

namespace tpu::aten {
namespace {

using lowering::Interp;
using Scales = std::vector<std::optional<double>>;

std::vector<lowering::ResampleDim> resampleDims(c10::IntArrayRef in, c10::IntArrayRef out, const Scales& scales) {
  std::vector<lowering::ResampleDim> dims;
  for (size_t i = 0; i < out.size(); ++i) dims.push_back({in[in.size() - out.size() + i], out[i], scales[i]});
  return dims;
}

void keyDims(Op& op, Interp mode, bool align, const std::vector<lowering::ResampleDim>& dims) {
  op.attr(static_cast<int64_t>(mode)).attr(align);
  for (const auto& d : dims) {
    op.attr(d.in).attr(d.out).attr(d.scale.has_value());
    if (d.scale) op.attrDouble(*d.scale);
  }
}

c10::ScalarType computeType(c10::ScalarType t, Interp mode) {
  if (mode == Interp::Nearest || mode == Interp::NearestExact) return c10::isFloatingType(t) ? opmathType(t) : t;
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(t), "\"upsample\" not implemented for '", t, "'");
  return opmathType(t);
}

at::Tensor& upsampleOut(const at::Tensor& self, c10::IntArrayRef outSize, Interp mode, bool align,
                        const Scales& scales, at::Tensor& out) {
  size_t nd = outSize.size();
  TORCH_CHECK(self.dim() == static_cast<int64_t>(nd) + 2, "upsample: expected a ", nd + 2,
              "-D input (N, C, spatial...), got ", self.sizes());
  for (size_t i = 0; i < nd; ++i)
    TORCH_CHECK(outSize[i] > 0 && self.size(2 + i) > 0, "Input and output sizes should be greater than 0, but got "
                "input ", self.sizes(), " and output ", outSize);
  std::vector<int64_t> shape{self.size(0), self.size(1)};
  shape.insert(shape.end(), outSize.begin(), outSize.end());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  auto dims = resampleDims(self.sizes(), outSize, scales);
  hlo::DType ct = toHlo(computeType(self.scalar_type(), mode));
  Op op = TPU_OP("aten::upsample");
  op.in(self);
  keyDims(op, mode, align, dims);
  op.out(out).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::resample(b, b.convert(in[0], ct), mode, align, dims)};
  });
  return out;
}

at::Tensor& upsampleBackwardOut(const at::Tensor& grad, c10::IntArrayRef outSize, c10::IntArrayRef inSize,
                                Interp mode, bool align, const Scales& scales, at::Tensor& gradInput) {
  TORCH_CHECK(inSize.size() == outSize.size() + 2, "upsample backward: input_size must have ", outSize.size() + 2,
              " elements");
  at::native::resize_output(gradInput, inSize);
  if (gradInput.numel() == 0) return gradInput;
  if (grad.numel() == 0) return gradInput.zero_();
  auto dims = resampleDims(inSize, outSize, scales);
  hlo::DType ct = toHlo(computeType(grad.scalar_type(), mode));
  Op op = TPU_OP("aten::upsample_backward");
  op.in(grad);
  keyDims(op, mode, align, dims);
  op.out(gradInput).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::resampleBackward(b, b.convert(in[0], ct), mode, align, dims)};
  });
  return gradInput;
}

// ATen's signatures: nearest ops take (self, output_size, scales...), the others an align_corners flag first.
template <Interp M, class... S>
at::Tensor& nearestOut(const at::Tensor& self, c10::SymIntArrayRef os, S... scales, at::Tensor& out) {
  return upsampleOut(self, C10_AS_INTARRAYREF_SLOW(os), M, false, Scales{scales...}, out);
}
template <Interp M, class... S>
at::Tensor nearest(const at::Tensor& self, c10::SymIntArrayRef os, S... scales) {
  at::Tensor out = at::empty({0}, self.options());
  return upsampleOut(self, C10_AS_INTARRAYREF_SLOW(os), M, false, Scales{scales...}, out);
}
template <Interp M, class... S>
at::Tensor& nearestBackwardOut(const at::Tensor& g, c10::SymIntArrayRef os, c10::SymIntArrayRef is, S... scales,
                               at::Tensor& gi) {
  return upsampleBackwardOut(g, C10_AS_INTARRAYREF_SLOW(os), C10_AS_INTARRAYREF_SLOW(is), M, false, Scales{scales...},
                             gi);
}
template <Interp M, class... S>
at::Tensor nearestBackward(const at::Tensor& g, c10::SymIntArrayRef os, c10::SymIntArrayRef is, S... scales) {
  at::Tensor gi = at::empty({0}, g.options());
  return nearestBackwardOut<M, S...>(g, os, is, scales..., gi);
}
template <Interp M, class... S>
at::Tensor& interpOut(const at::Tensor& self, c10::SymIntArrayRef os, bool align, S... scales, at::Tensor& out) {
  return upsampleOut(self, C10_AS_INTARRAYREF_SLOW(os), M, align, Scales{scales...}, out);
}
template <Interp M, class... S>
at::Tensor interp(const at::Tensor& self, c10::SymIntArrayRef os, bool align, S... scales) {
  at::Tensor out = at::empty({0}, self.options());
  return upsampleOut(self, C10_AS_INTARRAYREF_SLOW(os), M, align, Scales{scales...}, out);
}
template <Interp M, class... S>
at::Tensor& interpBackwardOut(const at::Tensor& g, c10::SymIntArrayRef os, c10::SymIntArrayRef is, bool align,
                              S... scales, at::Tensor& gi) {
  return upsampleBackwardOut(g, C10_AS_INTARRAYREF_SLOW(os), C10_AS_INTARRAYREF_SLOW(is), M, align, Scales{scales...},
                             gi);
}
template <Interp M, class... S>
at::Tensor interpBackward(const at::Tensor& g, c10::SymIntArrayRef os, c10::SymIntArrayRef is, bool align,
                          S... scales) {
  at::Tensor gi = at::empty({0}, g.options());
  return interpBackwardOut<M, S...>(g, os, is, align, scales..., gi);
}

// ---- reflection / replication padding --------------------------------------------------

template <bool Reflect, size_t ND>
at::Tensor& padOut(const at::Tensor& self, c10::SymIntArrayRef padding, at::Tensor& out) {
  auto pads = C10_AS_INTARRAYREF_SLOW(padding).vec();
  const char* name = Reflect ? "reflection_pad" : "replication_pad";
  TORCH_CHECK(pads.size() == 2 * ND, name, ": padding size is expected to be ", 2 * ND, ", but got: ", pads.size());
  TORCH_CHECK(self.dim() == static_cast<int64_t>(ND) + 1 || self.dim() == static_cast<int64_t>(ND) + 2, name,
              ": expected ", ND + 1, "D or ", ND + 2, "D input, got ", self.sizes());
  std::vector<int64_t> shape = self.sizes().vec();
  for (size_t i = 0; i < ND; ++i) {
    int64_t d = self.dim() - 1 - static_cast<int64_t>(i), n = self.size(d);
    if (Reflect)
      TORCH_CHECK(pads[2 * i] < n && pads[2 * i + 1] < n, "Argument #4: Padding size should be less than the "
                  "corresponding input dimension, but got: padding (", pads[2 * i], ", ", pads[2 * i + 1],
                  ") at dimension ", d, " of input ", self.sizes());
    shape[d] = n + pads[2 * i] + pads[2 * i + 1];
    TORCH_CHECK(shape[d] >= 1, name, ": input (", self.sizes(), ") is too small. Calculated output size is too small");
  }
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  TPU_OP("aten::pad_reflect_replicate").in(self).attr(Reflect).attrs(pads).out(out).run(
      [&](hlo::Builder& b, Values in, Values) {
        return ValueList{lowering::padReflectReplicate(b, in[0], pads, Reflect)};
      });
  return out;
}
template <bool Reflect, size_t ND>
at::Tensor pad(const at::Tensor& self, c10::SymIntArrayRef padding) {
  at::Tensor out = at::empty({0}, self.options());
  return padOut<Reflect, ND>(self, padding, out);
}
template <bool Reflect, size_t ND>
at::Tensor& padBackwardOut(const at::Tensor& grad, const at::Tensor& self, c10::SymIntArrayRef padding,
                           at::Tensor& gi) {
  auto pads = C10_AS_INTARRAYREF_SLOW(padding).vec();
  at::native::resize_output(gi, self.sizes());
  if (gi.numel() == 0) return gi;
  std::vector<int64_t> inShape = self.sizes().vec();
  hlo::DType ct = toHlo(opmathType(grad.scalar_type()));
  TPU_OP("aten::pad_reflect_replicate_backward").in(grad).attr(Reflect).attrs(pads).attrs(inShape).out(gi).run(
      [&](hlo::Builder& b, Values in, Values) {
        return ValueList{lowering::padReflectReplicateBackward(b, b.convert(in[0], ct), inShape, pads, Reflect)};
      });
  return gi;
}
template <bool Reflect, size_t ND>
at::Tensor padBackward(const at::Tensor& grad, const at::Tensor& self, c10::SymIntArrayRef padding) {
  at::Tensor gi = at::empty({0}, grad.options());
  return padBackwardOut<Reflect, ND>(grad, self, padding, gi);
}

using OD = std::optional<double>;

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_nearest1d", nearest<Interp::Nearest, OD>);
  m.impl("upsample_nearest1d.out", nearestOut<Interp::Nearest, OD>);
  m.impl("upsample_nearest2d", nearest<Interp::Nearest, OD, OD>);
  m.impl("upsample_nearest2d.out", nearestOut<Interp::Nearest, OD, OD>);
  m.impl("upsample_nearest3d", nearest<Interp::Nearest, OD, OD, OD>);
  m.impl("upsample_nearest3d.out", nearestOut<Interp::Nearest, OD, OD, OD>);
  m.impl("_upsample_nearest_exact1d", nearest<Interp::NearestExact, OD>);
  m.impl("_upsample_nearest_exact1d.out", nearestOut<Interp::NearestExact, OD>);
  m.impl("_upsample_nearest_exact2d", nearest<Interp::NearestExact, OD, OD>);
  m.impl("_upsample_nearest_exact2d.out", nearestOut<Interp::NearestExact, OD, OD>);
  m.impl("_upsample_nearest_exact3d", nearest<Interp::NearestExact, OD, OD, OD>);
  m.impl("_upsample_nearest_exact3d.out", nearestOut<Interp::NearestExact, OD, OD, OD>);
  m.impl("upsample_nearest1d_backward", nearestBackward<Interp::Nearest, OD>);
  m.impl("upsample_nearest1d_backward.grad_input", nearestBackwardOut<Interp::Nearest, OD>);
  m.impl("upsample_nearest2d_backward", nearestBackward<Interp::Nearest, OD, OD>);
  m.impl("upsample_nearest2d_backward.grad_input", nearestBackwardOut<Interp::Nearest, OD, OD>);
  m.impl("upsample_nearest3d_backward", nearestBackward<Interp::Nearest, OD, OD, OD>);
  m.impl("upsample_nearest3d_backward.grad_input", nearestBackwardOut<Interp::Nearest, OD, OD, OD>);
  m.impl("_upsample_nearest_exact1d_backward", nearestBackward<Interp::NearestExact, OD>);
  m.impl("_upsample_nearest_exact1d_backward.grad_input", nearestBackwardOut<Interp::NearestExact, OD>);
  m.impl("_upsample_nearest_exact2d_backward", nearestBackward<Interp::NearestExact, OD, OD>);
  m.impl("_upsample_nearest_exact2d_backward.grad_input", nearestBackwardOut<Interp::NearestExact, OD, OD>);
  m.impl("_upsample_nearest_exact3d_backward", nearestBackward<Interp::NearestExact, OD, OD, OD>);
  m.impl("_upsample_nearest_exact3d_backward.grad_input", nearestBackwardOut<Interp::NearestExact, OD, OD, OD>);
  m.impl("upsample_linear1d", interp<Interp::Linear, OD>);
  m.impl("upsample_linear1d.out", interpOut<Interp::Linear, OD>);
  m.impl("upsample_bilinear2d", interp<Interp::Linear, OD, OD>);
  m.impl("upsample_bilinear2d.out", interpOut<Interp::Linear, OD, OD>);
  m.impl("upsample_trilinear3d", interp<Interp::Linear, OD, OD, OD>);
  m.impl("upsample_trilinear3d.out", interpOut<Interp::Linear, OD, OD, OD>);
  m.impl("upsample_bicubic2d", interp<Interp::Cubic, OD, OD>);
  m.impl("upsample_bicubic2d.out", interpOut<Interp::Cubic, OD, OD>);
  m.impl("upsample_linear1d_backward", interpBackward<Interp::Linear, OD>);
  m.impl("upsample_linear1d_backward.grad_input", interpBackwardOut<Interp::Linear, OD>);
  m.impl("upsample_bilinear2d_backward", interpBackward<Interp::Linear, OD, OD>);
  m.impl("upsample_bilinear2d_backward.grad_input", interpBackwardOut<Interp::Linear, OD, OD>);
  m.impl("upsample_trilinear3d_backward", interpBackward<Interp::Linear, OD, OD, OD>);
  m.impl("upsample_trilinear3d_backward.grad_input", interpBackwardOut<Interp::Linear, OD, OD, OD>);
  m.impl("upsample_bicubic2d_backward", interpBackward<Interp::Cubic, OD, OD>);
  m.impl("upsample_bicubic2d_backward.grad_input", interpBackwardOut<Interp::Cubic, OD, OD>);
  m.impl("reflection_pad1d", pad<true, 1>);
  m.impl("reflection_pad1d.out", padOut<true, 1>);
  m.impl("reflection_pad2d", pad<true, 2>);
  m.impl("reflection_pad2d.out", padOut<true, 2>);
  m.impl("reflection_pad3d", pad<true, 3>);
  m.impl("reflection_pad3d.out", padOut<true, 3>);
  m.impl("replication_pad1d", pad<false, 1>);
  m.impl("replication_pad1d.out", padOut<false, 1>);
  m.impl("replication_pad2d", pad<false, 2>);
  m.impl("replication_pad2d.out", padOut<false, 2>);
  m.impl("replication_pad3d", pad<false, 3>);
  m.impl("replication_pad3d.out", padOut<false, 3>);
  m.impl("reflection_pad1d_backward", padBackward<true, 1>);
  m.impl("reflection_pad1d_backward.grad_input", padBackwardOut<true, 1>);
  m.impl("reflection_pad2d_backward", padBackward<true, 2>);
  m.impl("reflection_pad2d_backward.grad_input", padBackwardOut<true, 2>);
  m.impl("reflection_pad3d_backward", padBackward<true, 3>);
  m.impl("reflection_pad3d_backward.grad_input", padBackwardOut<true, 3>);
  m.impl("replication_pad1d_backward", padBackward<false, 1>);
  m.impl("replication_pad1d_backward.grad_input", padBackwardOut<false, 1>);
  m.impl("replication_pad2d_backward", padBackward<false, 2>);
  m.impl("replication_pad2d_backward.grad_input", padBackwardOut<false, 2>);
  m.impl("replication_pad3d_backward", padBackward<false, 3>);
  m.impl("replication_pad3d_backward.grad_input", padBackwardOut<false, 3>);
}

}  // namespace tpu::aten
