// Convolutions: convolution_overrideable (regular and transposed, any number
// of spatial dims, groups) and convolution_backward_overrideable, which
// at::convolution and its autograd call for backends other than CPU/CUDA.
// float16/bfloat16 convolve in float32 (as CPU accumulates), results convert back.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Conv.h"

namespace tpu::aten {
namespace {

lowering::ConvParams params(c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                            c10::IntArrayRef outputPadding, int64_t groups, size_t nd) {
  auto expand = [nd](c10::IntArrayRef v, int64_t dflt) {
    std::vector<int64_t> r(nd, dflt);
    for (size_t i = 0; i < nd; ++i) r[i] = v.size() == 1 ? v[0] : (i < v.size() ? v[i] : dflt);
    return r;
  };
  lowering::ConvParams p;
  p.stride = expand(stride, 1);
  p.padding = expand(padding, 0);
  p.dilation = expand(dilation, 1);
  p.outputPadding = expand(outputPadding, 0);
  p.groups = groups;
  return p;
}

// The program's shape facts: transposed flag, groups and every per-dim parameter.
void keyParams(Op& op, const lowering::ConvParams& p, bool transposed) {
  op.attr(transposed).attr(p.groups).attrs(p.stride).attrs(p.padding).attrs(p.dilation).attrs(p.outputPadding);
}

std::vector<int64_t> outputShape(const at::Tensor& x, const at::Tensor& w, const lowering::ConvParams& p,
                                 bool transposed) {
  std::vector<int64_t> shape{x.size(0), transposed ? w.size(1) * p.groups : w.size(0)};
  for (size_t i = 0; i < p.stride.size(); ++i) {
    int64_t in = x.size(i + 2), k = w.size(i + 2);
    int64_t keff = p.dilation[i] * (k - 1) + 1;
    shape.push_back(transposed ? (in - 1) * p.stride[i] - 2 * p.padding[i] + keff + p.outputPadding[i]
                               : (in + 2 * p.padding[i] - keff) / p.stride[i] + 1);
  }
  return shape;
}

hlo::DType computeOf(const at::Tensor& t) { return toHlo(opmathType(t.scalar_type())); }

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                       c10::IntArrayRef outputPadding, int64_t groups) {
  TORCH_CHECK(input.dim() >= 3, "tpu convolution: expected a batched input with at least one spatial dim, got ",
              input.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(input.scalar_type() != at::kBool, "\"convolution\" not implemented for 'Bool'");
  size_t nd = input.dim() - 2;
  lowering::ConvParams p = params(stride, padding, dilation, outputPadding, groups, nd);
  at::Tensor out = at::empty(outputShape(input, weight, p, transposed), input.options());
  if (out.numel() == 0) return out;
  bool hasBias = bias.has_value() && bias->defined();
  Op op = TPU_OP("aten::convolution");
  op.in(input).in(weight);
  if (hasBias) op.in(*bias);
  keyParams(op, p, transposed);
  hlo::DType ct = computeOf(input);
  op.attr(hasBias).out(out).run([&](hlo::Builder& b, Values in, Values) {
    hlo::Value x = b.convert(in[0], ct), w = b.convert(in[1], ct);
    hlo::Value y = transposed ? lowering::convTransposeForward(b, x, w, p) : lowering::convForward(b, x, w, p);
    if (hasBias) y = b.add(y, b.broadcastInDim(b.convert(in[2], ct), y.shape(), {1}));
    return ValueList{y};
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackward(
    const at::Tensor& gradOut, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef outputPadding,
    int64_t groups, std::array<bool, 3> mask) {
  size_t nd = input.dim() - 2;
  lowering::ConvParams p = params(stride, padding, dilation, outputPadding, groups, nd);
  hlo::DType ct = computeOf(input);
  at::Tensor gi, gw, gb;
  if (mask[0]) {
    gi = at::empty(input.sizes(), input.options());
    if (gi.numel() > 0 && gradOut.numel() > 0) {
      // Regular conv: the input gradient is a transposed conv whose output padding restores the input size.
      lowering::ConvParams q = p;
      for (size_t i = 0; i < nd; ++i) {
        int64_t keff = p.dilation[i] * (weight.size(i + 2) - 1) + 1;
        q.outputPadding[i] = input.size(i + 2) - ((gradOut.size(i + 2) - 1) * p.stride[i] - 2 * p.padding[i] + keff);
      }
      Op op = TPU_OP("aten::convolution_backward.input");
      op.in(gradOut).in(weight);
      keyParams(op, q, transposed);
      op.out(gi).run([&](hlo::Builder& b, Values in, Values) {
        hlo::Value g = b.convert(in[0], ct), w = b.convert(in[1], ct);
        hlo::Value r = transposed ? lowering::convForward(b, g, w, q) : lowering::convTransposeForward(b, g, w, q);
        // A transposed conv's output padding can exceed its stride (dilation > stride): the regular conv
        // then covers a few more positions than the input has.
        std::vector<int64_t> zeros(r.rank(), 0), ones(r.rank(), 1), limit(input.sizes().begin(), input.sizes().end());
        return ValueList{r.shape() == limit ? r : b.slice(r, zeros, limit, ones)};
      });
    } else {
      gi.zero_();
    }
  }
  if (mask[1]) {
    gw = at::empty(weight.sizes(), weight.options());
    if (gw.numel() > 0 && gradOut.numel() > 0 && input.numel() > 0) {
      std::vector<int64_t> k(weight.sizes().begin() + 2, weight.sizes().end());
      Op op = TPU_OP("aten::convolution_backward.weight");
      op.in(input).in(gradOut);
      keyParams(op, p, transposed);
      op.out(gw).run([&](hlo::Builder& b, Values in, Values) {
        hlo::Value x = b.convert(in[0], ct), g = b.convert(in[1], ct);
        // Transposed conv: its weight gradient is a regular conv's with the roles of input and gradient swapped.
        return ValueList{transposed ? lowering::convWeightGrad(b, g, x, k, p) : lowering::convWeightGrad(b, x, g, k, p)};
      });
    } else {
      gw.zero_();
    }
  }
  if (mask[2]) {
    std::vector<int64_t> dims{0};
    for (size_t i = 0; i < nd; ++i) dims.push_back(static_cast<int64_t>(i) + 2);
    gb = at::sum(gradOut, dims);
  }
  return {gi, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolutionBackward);
}

}  // namespace tpu::aten
