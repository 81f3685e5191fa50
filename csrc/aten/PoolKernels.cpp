// Pooling: max_pool2d/3d_with_indices (+backward), avg_pool2d/3d (+backward),
// adaptive average and max pooling 2d/3d (+backward), max_unpool2d/3d, im2col/col2im. 1-d pooling decomposes
// into the 2-d ops. Pooled dims are the last 2 (3); leading dims are batch.
// Max-pool backward scatters the gradient through the saved indices.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Pool.h"

namespace tpu::aten {
namespace {

std::vector<int64_t> expandArg(c10::IntArrayRef v, size_t nd, const char* what, const char* op,
                               std::optional<c10::IntArrayRef> dflt = std::nullopt) {
  if (v.empty() && dflt) return expandArg(*dflt, nd, what, op);
  TORCH_CHECK(v.size() == 1 || v.size() == nd, op, ": ", what, " must either be a single int, or a tuple of ", nd,
              " ints");
  std::vector<int64_t> r(nd);
  for (size_t i = 0; i < nd; ++i) r[i] = v.size() == 1 ? v[0] : v[i];
  return r;
}

void checkInput(const at::Tensor& self, size_t nd, const char* op) {
  TORCH_CHECK(self.dim() == static_cast<int64_t>(nd) + 1 || self.dim() == static_cast<int64_t>(nd) + 2, op,
              ": Expected ", nd + 1, "D or ", nd + 2, "D (batch mode) tensor for input, but got: ", self.sizes());
  for (int64_t i = self.dim() - static_cast<int64_t>(nd) - 1; i < self.dim(); ++i)
    TORCH_CHECK(self.size(i) > 0 || i == 0, op, ": Expected input's non-batch dimensions to have positive length, "
                "but input has a shape of ", self.sizes());
}

lowering::PoolParams poolParams(const at::Tensor& self, size_t nd, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                                c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil, const char* op) {
  checkInput(self, nd, op);
  lowering::PoolParams p;
  p.kernel = expandArg(kernel, nd, "kernel_size", op);
  p.stride = expandArg(stride, nd, "stride", op, kernel);
  p.padding = expandArg(padding, nd, "padding", op);
  p.dilation = expandArg(dilation, nd, "dilation", op);
  p.ceilMode = ceil;
  for (size_t i = 0; i < nd; ++i) {
    TORCH_CHECK(p.kernel[i] > 0, op, ": kernel_size must be greater than zero");
    TORCH_CHECK(p.stride[i] > 0, op, ": stride must be greater than zero");
    TORCH_CHECK(p.dilation[i] > 0, op, ": dilation must be greater than zero");
    TORCH_CHECK(p.padding[i] >= 0 && p.padding[i] <= p.kernel[i] / 2, op,
                ": pad should be at most half of effective kernel size, but got pad=", p.padding[i],
                ", kernel_size=", p.kernel[i]);
    int64_t in = self.size(self.dim() - nd + i);
    int64_t o = lowering::poolOutputSize(in, p.kernel[i], p.padding[i], p.stride[i], p.dilation[i], ceil);
    TORCH_CHECK(o > 0, op, ": Given input size: ", self.sizes(), ". Calculated output size is too small");
  }
  return p;
}

std::vector<int64_t> pooledShape(const at::Tensor& self, const lowering::PoolParams& p) {
  size_t nd = p.kernel.size();
  std::vector<int64_t> shape = self.sizes().vec();
  for (size_t i = 0; i < nd; ++i) {
    size_t d = shape.size() - nd + i;
    shape[d] = lowering::poolOutputSize(shape[d], p.kernel[i], p.padding[i], p.stride[i], p.dilation[i], p.ceilMode);
  }
  return shape;
}

void keyParams(Op& op, const lowering::PoolParams& p) {
  op.attrs(p.kernel).attrs(p.stride).attrs(p.padding).attrs(p.dilation).attr(p.ceilMode);
}

// ---- max pooling ----------------------------------------------------------------------

template <size_t ND>
std::tuple<at::Tensor&, at::Tensor&> maxPoolOut(const at::Tensor& self, c10::IntArrayRef kernel,
                                               c10::IntArrayRef stride, c10::IntArrayRef padding,
                                               c10::IntArrayRef dilation, bool ceil, at::Tensor& out,
                                               at::Tensor& indices) {
  const char* name = ND == 2 ? "max_pool2d" : "max_pool3d";
  TORCH_CHECK(self.scalar_type() != at::kBool, name, ": \"max_pool\" not implemented for 'Bool'");
  lowering::PoolParams p = poolParams(self, ND, kernel, stride, padding, dilation, ceil, name);
  auto shape = pooledShape(self, p);
  at::native::resize_output(out, shape);
  at::native::resize_output(indices, shape);
  if (out.numel() == 0) return {out, indices};
  Op op = TPU_OP("aten::max_pool");
  op.in(self);
  keyParams(op, p);
  op.out(out).out(indices).run([&](hlo::Builder& b, Values in, Values) {
    auto [v, i] = lowering::maxPool(b, in[0], p);
    return ValueList{v, i};
  });
  return {out, indices};
}

template <size_t ND>
std::tuple<at::Tensor, at::Tensor> maxPool(const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                                           c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil) {
  at::Tensor out = at::empty({0}, self.options()), idx = at::empty({0}, self.options().dtype(at::kLong));
  maxPoolOut<ND>(self, kernel, stride, padding, dilation, ceil, out, idx);
  return {out, idx};
}

// Gradient through saved flat plane indices: scatter-add into zeros (the pooled plane flattened).
at::Tensor& scatterByIndices(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& indices, size_t nd,
                             at::Tensor& gradInput) {
  at::native::resize_output(gradInput, self.sizes());
  gradInput.zero_();
  if (grad.numel() == 0 || self.numel() == 0) return gradInput;
  int64_t lead = self.dim() - static_cast<int64_t>(nd);
  std::vector<int64_t> flat(self.sizes().begin(), self.sizes().begin() + lead), gflat = flat;
  flat.push_back(-1);
  at::Tensor acc = at::zeros(self.sizes(), grad.options());
  acc.view(flat).scatter_add_(-1, indices.reshape(flat), grad.reshape(flat));
  gradInput.copy_(acc);
  return gradInput;
}

template <size_t ND>
at::Tensor& maxPoolBackwardOut(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef, c10::IntArrayRef,
                               c10::IntArrayRef, c10::IntArrayRef, bool, const at::Tensor& indices,
                               at::Tensor& gradInput) {
  return scatterByIndices(grad, self, indices, ND, gradInput);
}
template <size_t ND>
at::Tensor maxPoolBackward(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef k, c10::IntArrayRef s,
                           c10::IntArrayRef p, c10::IntArrayRef d, bool c, const at::Tensor& indices) {
  at::Tensor gi = at::empty(self.sizes(), grad.options());
  return maxPoolBackwardOut<ND>(grad, self, k, s, p, d, c, indices, gi);
}

// ---- average pooling -----------------------------------------------------------------------

template <size_t ND>
at::Tensor& avgPoolOut(const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                       c10::IntArrayRef padding, bool ceil, bool countIncludePad,
                       std::optional<int64_t> divisorOverride, at::Tensor& out) {
  const char* name = ND == 2 ? "avg_pool2d" : "avg_pool3d";
  TORCH_CHECK(!divisorOverride || *divisorOverride != 0, name, ": divisor must be not zero");
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"", name, "\" not implemented for 'Bool'");
  lowering::PoolParams p = poolParams(self, ND, kernel, stride, padding, {1}, ceil, name);
  if constexpr (ND == 3) {  // CPU's avg_pool3d (not avg_pool2d) refuses a kernel larger than the input
    int64_t t = self.size(-3), h = self.size(-2), w = self.size(-1);
    TORCH_CHECK(t >= p.kernel[0] && h >= p.kernel[1] && w >= p.kernel[2], "input image (T: ", t, " H: ", h, " W: ", w,
                ") smaller than kernel size (kT: ", p.kernel[0], " kH: ", p.kernel[1], " kW: ", p.kernel[2], ")");
  }
  at::native::resize_output(out, pooledShape(self, p));
  if (out.numel() == 0) return out;
  int64_t div = divisorOverride.value_or(0);
  hlo::DType ct = toHlo(opmathType(self.scalar_type()));
  bool isInt = !c10::isFloatingType(self.scalar_type());
  Op op = TPU_OP("aten::avg_pool");
  op.in(self);
  keyParams(op, p);
  op.attr(countIncludePad).attr(div).out(out).run([&](hlo::Builder& b, Values in, Values) {
    // Integer inputs: an int64 sum divided by the count, truncating (as CPU).
    hlo::Value x = b.convert(in[0], isInt ? hlo::DType::S64 : ct);
    return ValueList{lowering::avgPool(b, x, p, countIncludePad, div)};
  });
  return out;
}
template <size_t ND>
at::Tensor avgPool(const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride, c10::IntArrayRef padding,
                   bool ceil, bool countIncludePad, std::optional<int64_t> divisorOverride) {
  at::Tensor out = at::empty({0}, self.options());
  return avgPoolOut<ND>(self, kernel, stride, padding, ceil, countIncludePad, divisorOverride, out);
}

template <size_t ND>
at::Tensor& avgPoolBackwardOut(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef kernel,
                               c10::IntArrayRef stride, c10::IntArrayRef padding, bool ceil, bool countIncludePad,
                               std::optional<int64_t> divisorOverride, at::Tensor& gradInput) {
  const char* name = ND == 2 ? "avg_pool2d_backward" : "avg_pool3d_backward";
  lowering::PoolParams p = poolParams(self, ND, kernel, stride, padding, {1}, ceil, name);
  at::native::resize_output(gradInput, self.sizes());
  if (gradInput.numel() == 0) return gradInput;
  int64_t div = divisorOverride.value_or(0);
  hlo::DType ct = toHlo(opmathType(grad.scalar_type()));
  std::vector<int64_t> inShape = self.sizes().vec();
  Op op = TPU_OP("aten::avg_pool_backward");
  op.in(grad);
  keyParams(op, p);
  op.attr(countIncludePad).attr(div).attrs(inShape).out(gradInput).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::avgPoolBackward(b, b.convert(in[0], ct), inShape, p, countIncludePad, div)};
  });
  return gradInput;
}
template <size_t ND>
at::Tensor avgPoolBackward(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef kernel,
                           c10::IntArrayRef stride, c10::IntArrayRef padding, bool ceil, bool countIncludePad,
                           std::optional<int64_t> divisorOverride) {
  at::Tensor gi = at::empty(self.sizes(), grad.options());
  return avgPoolBackwardOut<ND>(grad, self, kernel, stride, padding, ceil, countIncludePad, divisorOverride, gi);
}

// ---- adaptive pooling ----------------------------------------------------------------------

std::vector<int64_t> adaptiveShape(const at::Tensor& self, c10::IntArrayRef outputSize, size_t nd, const char* op) {
  checkInput(self, nd, op);
  TORCH_CHECK(outputSize.size() == nd, op, ": output_size must be ", nd);
  std::vector<int64_t> shape = self.sizes().vec();
  for (size_t i = 0; i < nd; ++i) {
    TORCH_CHECK(outputSize[i] >= 0, op, ": elements of output_size must be greater than or equal to 0 but received ",
                outputSize[i]);
    shape[shape.size() - nd + i] = outputSize[i];
  }
  return shape;
}

template <size_t ND>
at::Tensor& adaptiveAvgOut(const at::Tensor& self, c10::SymIntArrayRef outputSize, at::Tensor& out) {
  auto os = C10_AS_INTARRAYREF_SLOW(outputSize);
  auto shape = adaptiveShape(self, os, ND, "adaptive_avg_pool");
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  std::vector<int64_t> o(os.begin(), os.end());
  hlo::DType ct = toHlo(opmathType(self.scalar_type()));
  TPU_OP("aten::adaptive_avg_pool").in(self).attrs(o).out(out).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::adaptiveAvgPool(b, b.convert(in[0], ct), o)};
  });
  return out;
}
template <size_t ND>
at::Tensor adaptiveAvg(const at::Tensor& self, c10::SymIntArrayRef outputSize) {
  at::Tensor out = at::empty({0}, self.options());
  return adaptiveAvgOut<ND>(self, outputSize, out);
}
template <size_t ND>
at::Tensor adaptiveAvgBackward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor gi = at::empty(self.sizes(), grad.options());
  if (gi.numel() == 0) return gi;
  std::vector<int64_t> sizes(self.sizes().end() - ND, self.sizes().end());
  hlo::DType ct = toHlo(opmathType(grad.scalar_type()));
  TPU_OP("aten::adaptive_avg_pool_backward").in(grad).attrs(sizes).out(gi).run(
      [&](hlo::Builder& b, Values in, Values) {
        return ValueList{lowering::adaptiveAvgPoolBackward(b, b.convert(in[0], ct), sizes)};
      });
  return gi;
}

template <size_t ND>
std::tuple<at::Tensor&, at::Tensor&> adaptiveMaxOut(const at::Tensor& self, c10::IntArrayRef outputSize,
                                                   at::Tensor& out, at::Tensor& indices) {
  auto shape = adaptiveShape(self, outputSize, ND, "adaptive_max_pool");
  at::native::resize_output(out, shape);
  at::native::resize_output(indices, shape);
  if (out.numel() == 0) return {out, indices};
  std::vector<int64_t> o(outputSize.begin(), outputSize.end());
  TPU_OP("aten::adaptive_max_pool").in(self).attrs(o).out(out).out(indices).run(
      [&](hlo::Builder& b, Values in, Values) {
        auto [v, i] = lowering::adaptiveMaxPool(b, in[0], o);
        return ValueList{v, i};
      });
  return {out, indices};
}
template <size_t ND>
std::tuple<at::Tensor, at::Tensor> adaptiveMax(const at::Tensor& self, c10::IntArrayRef outputSize) {
  at::Tensor out = at::empty({0}, self.options()), idx = at::empty({0}, self.options().dtype(at::kLong));
  adaptiveMaxOut<ND>(self, outputSize, out, idx);
  return {out, idx};
}
template <size_t ND>
at::Tensor& adaptiveMaxBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& indices,
                                   at::Tensor& gradInput) {
  return scatterByIndices(grad, self, indices, ND, gradInput);
}
template <size_t ND>
at::Tensor adaptiveMaxBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& indices) {
  at::Tensor gi = at::empty(self.sizes(), grad.options());
  return scatterByIndices(grad, self, indices, ND, gi);
}

// ---- max_unpool: scatter the values to their saved flat positions in a zero plane -------------

at::Tensor& maxUnpoolOut(const at::Tensor& self, const at::Tensor& indices, c10::IntArrayRef outputSize,
                         at::Tensor& out) {
  size_t nd = outputSize.size();
  TORCH_CHECK(indices.scalar_type() == at::kLong, "elements in indices should be type int64 but got: ",
              indices.scalar_type());
  TORCH_CHECK(self.sizes().equals(indices.sizes()), "Expected shape of indices to be same as that of the input "
              "tensor (", self.sizes(), ") but got indices tensor with shape: ", indices.sizes());
  checkInput(self, nd, nd == 2 ? "max_unpool2d" : "max_unpool3d");
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - nd), flat = shape;
  int64_t plane = 1;
  for (int64_t s : outputSize) {
    shape.push_back(s);
    plane *= s;
  }
  at::native::resize_output(out, shape);
  out.zero_();
  if (self.numel() == 0 || plane == 0) return out;
  flat.push_back(-1);
  at::Tensor acc = at::zeros(shape, self.options());
  acc.view(flat).scatter_(-1, indices.reshape(flat), self.reshape(flat));
  out.copy_(acc);
  return out;
}
at::Tensor maxUnpool2d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef outputSize) {
  at::Tensor out = at::empty({0}, self.options());
  return maxUnpoolOut(self, indices, C10_AS_INTARRAYREF_SLOW(outputSize), out);
}
at::Tensor& maxUnpool2dOut(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef outputSize,
                           at::Tensor& out) {
  return maxUnpoolOut(self, indices, C10_AS_INTARRAYREF_SLOW(outputSize), out);
}
at::Tensor maxUnpool3d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef outputSize,
                       c10::IntArrayRef, c10::IntArrayRef) {
  at::Tensor out = at::empty({0}, self.options());
  return maxUnpoolOut(self, indices, C10_AS_INTARRAYREF_SLOW(outputSize), out);
}
at::Tensor& maxUnpool3dOut(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef outputSize,
                           c10::IntArrayRef, c10::IntArrayRef, at::Tensor& out) {
  return maxUnpoolOut(self, indices, C10_AS_INTARRAYREF_SLOW(outputSize), out);
}

// ---- im2col / col2im (nn.functional.unfold / fold) -----------------------------------------

lowering::PoolParams colParams(c10::IntArrayRef kernel, c10::IntArrayRef dilation, c10::IntArrayRef padding,
                               c10::IntArrayRef stride, const char* op) {
  lowering::PoolParams p;
  p.kernel = expandArg(kernel, 2, "kernel_size", op);
  p.dilation = expandArg(dilation, 2, "dilation", op);
  p.padding = expandArg(padding, 2, "padding", op);
  p.stride = expandArg(stride, 2, "stride", op);
  for (int i = 0; i < 2; ++i)
    TORCH_CHECK(p.kernel[i] > 0 && p.dilation[i] > 0 && p.stride[i] > 0 && p.padding[i] >= 0, op,
                ": kernel size, dilation and stride should be greater than zero, padding non-negative");
  return p;
}

at::Tensor& im2colOut(const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef dilation,
                      c10::IntArrayRef padding, c10::IntArrayRef stride, at::Tensor& out) {
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, "Expected 3D or 4D (batch mode) tensor for input with possible 0 "
              "batch size and non-zero dimensions, but got: ", self.sizes());
  lowering::PoolParams p = colParams(kernel, dilation, padding, stride, "im2col");
  int64_t l = 1;
  for (int i = 0; i < 2; ++i) {
    int64_t o = lowering::poolOutputSize(self.size(-2 + i), p.kernel[i], p.padding[i], p.stride[i], p.dilation[i], false);
    TORCH_CHECK(o > 0, "Given input with spatial size ", self.sizes(), ", kernel_size=", kernel, ", dilation=",
                dilation, ", padding=", padding, ", calculated shape of the array of sliding blocks as non-positive");
    l *= o;
  }
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - 3);
  shape.push_back(self.size(-3) * p.kernel[0] * p.kernel[1]);
  shape.push_back(l);
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  Op op = TPU_OP("aten::im2col");
  op.in(self);
  keyParams(op, p);
  op.out(out).run([&](hlo::Builder& b, Values in, Values) { return ValueList{lowering::im2col(b, in[0], p)}; });
  return out;
}
at::Tensor im2col(const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef dilation,
                  c10::IntArrayRef padding, c10::IntArrayRef stride) {
  at::Tensor out = at::empty({0}, self.options());
  return im2colOut(self, kernel, dilation, padding, stride, out);
}

at::Tensor& col2imOut(const at::Tensor& self, c10::SymIntArrayRef outputSize, c10::IntArrayRef kernel,
                      c10::IntArrayRef dilation, c10::IntArrayRef padding, c10::IntArrayRef stride, at::Tensor& out) {
  auto os = C10_AS_INTARRAYREF_SLOW(outputSize);
  TORCH_CHECK(os.size() == 2, "It is expected output_size equals to 2, but got size ", os.size());
  TORCH_CHECK(self.dim() == 2 || self.dim() == 3, "Expected 2D or 3D (batch mode) tensor for input with possible 0 "
              "batch size and non-zero dimensions, but got: ", self.sizes());
  lowering::PoolParams p = colParams(kernel, dilation, padding, stride, "col2im");
  int64_t k = p.kernel[0] * p.kernel[1], l = 1;
  TORCH_CHECK(self.size(-2) % k == 0, "Expected size of input's dimension 1 to be divisible by the product of "
              "kernel_size, but got input.size(1)=", self.size(-2), " and kernel_size=", kernel);
  for (int i = 0; i < 2; ++i)
    l *= lowering::poolOutputSize(os[i], p.kernel[i], p.padding[i], p.stride[i], p.dilation[i], false);
  TORCH_CHECK(self.size(-1) == l, "Given output_size=", os, ", kernel_size=", kernel, ", dilation=", dilation,
              ", padding=", padding, ", stride=", stride, ", expected size of input's dimension 2 to match the "
              "calculated number of sliding blocks ", l, ", but got input.size(2)=", self.size(-1), ".");
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - 2), size(os.begin(), os.end());
  shape.push_back(self.size(-2) / k);
  shape.insert(shape.end(), os.begin(), os.end());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  hlo::DType ct = toHlo(opmathType(self.scalar_type()));
  Op op = TPU_OP("aten::col2im");
  op.in(self);
  keyParams(op, p);
  op.attrs(size).out(out).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::col2im(b, b.convert(in[0], ct), size, p)};
  });
  return out;
}
at::Tensor col2im(const at::Tensor& self, c10::SymIntArrayRef outputSize, c10::IntArrayRef kernel,
                  c10::IntArrayRef dilation, c10::IntArrayRef padding, c10::IntArrayRef stride) {
  at::Tensor out = at::empty({0}, self.options());
  return col2imOut(self, outputSize, kernel, dilation, padding, stride, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool2d_with_indices", maxPool<2>);
  m.impl("max_pool2d_with_indices.out", maxPoolOut<2>);
  m.impl("max_pool3d_with_indices", maxPool<3>);
  m.impl("max_pool3d_with_indices.out", maxPoolOut<3>);
  m.impl("max_pool2d_with_indices_backward", maxPoolBackward<2>);
  m.impl("max_pool2d_with_indices_backward.grad_input", maxPoolBackwardOut<2>);
  m.impl("max_pool3d_with_indices_backward", maxPoolBackward<3>);
  m.impl("max_pool3d_with_indices_backward.grad_input", maxPoolBackwardOut<3>);
  m.impl("avg_pool2d", avgPool<2>);
  m.impl("avg_pool2d.out", avgPoolOut<2>);
  m.impl("avg_pool3d", avgPool<3>);
  m.impl("avg_pool3d.out", avgPoolOut<3>);
  m.impl("avg_pool2d_backward", avgPoolBackward<2>);
  m.impl("avg_pool2d_backward.grad_input", avgPoolBackwardOut<2>);
  m.impl("avg_pool3d_backward", avgPoolBackward<3>);
  m.impl("avg_pool3d_backward.grad_input", avgPoolBackwardOut<3>);
  m.impl("_adaptive_avg_pool2d", adaptiveAvg<2>);
  m.impl("_adaptive_avg_pool2d.out", adaptiveAvgOut<2>);
  m.impl("_adaptive_avg_pool3d", adaptiveAvg<3>);
  m.impl("_adaptive_avg_pool3d.out", adaptiveAvgOut<3>);
  m.impl("_adaptive_avg_pool2d_backward", adaptiveAvgBackward<2>);
  m.impl("_adaptive_avg_pool3d_backward", adaptiveAvgBackward<3>);
  m.impl("adaptive_max_pool2d", adaptiveMax<2>);
  m.impl("adaptive_max_pool2d.out", adaptiveMaxOut<2>);
  m.impl("adaptive_max_pool3d", adaptiveMax<3>);
  m.impl("adaptive_max_pool3d.out", adaptiveMaxOut<3>);
  m.impl("adaptive_max_pool2d_backward", adaptiveMaxBackward<2>);
  m.impl("adaptive_max_pool2d_backward.grad_input", adaptiveMaxBackwardOut<2>);
  m.impl("adaptive_max_pool3d_backward", adaptiveMaxBackward<3>);
  m.impl("adaptive_max_pool3d_backward.grad_input", adaptiveMaxBackwardOut<3>);
  m.impl("im2col", im2col);
  m.impl("im2col.out", im2colOut);
  m.impl("col2im", col2im);
  m.impl("col2im.out", col2imOut);
  m.impl("max_unpool2d", maxUnpool2d);
  m.impl("max_unpool2d.out", maxUnpool2dOut);
  m.impl("max_unpool3d", maxUnpool3d);
  m.impl("max_unpool3d.out", maxUnpool3dOut);
}

}  // namespace tpu::aten
