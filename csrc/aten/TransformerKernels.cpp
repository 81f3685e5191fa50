// The fast paths of nn.TransformerEncoderLayer and nn.MultiheadAttention in inference
// (_transformer_encoder_layer_fwd, _native_multi_head_attention). Both are ATen's device-generic C++ (written
// with at:: ops, so they dispatch back to tpu kernels); they need _transform_bias_rescale_qkv and
// _masked_softmax, composed here with CPU's semantics.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <torch/library.h>

#include <cmath>

#include "Elementwise.h"

namespace tpu::aten {
namespace {

// qkv (B, T, 3D) + bias, split into q, k, v of (B, heads, T, D / heads); q scaled by 1 / sqrt(D / heads).
std::tuple<at::Tensor, at::Tensor, at::Tensor> transformBiasRescaleQkv(const at::Tensor& qkv, const at::Tensor& bias,
                                                                       int64_t heads) {
  TORCH_CHECK(!qkv.is_nested(), "_transform_bias_rescale_qkv: nested tensors are not supported on tpu");
  TORCH_CHECK(qkv.dim() == 3 && bias.dim() == 1 && qkv.size(2) == bias.size(0) && qkv.size(2) % 3 == 0,
              "_transform_bias_rescale_qkv: expected qkv (B, T, 3 * D) and bias (3 * D), got ", qkv.sizes(), " and ",
              bias.sizes());
  int64_t b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / 3;
  TORCH_CHECK(heads > 0 && d % heads == 0, "_transform_bias_rescale_qkv: embedding dim ", d,
              " is not divisible by num_heads ", heads);
  int64_t dh = d / heads;
  c10::ScalarType ct = opmathType(qkv.scalar_type());
  at::Tensor x = (qkv.to(ct) + bias.to(ct)).view({b, t, 3, heads, dh}).permute({2, 0, 3, 1, 4});
  double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  if (qkv.scalar_type() != at::kDouble) scale = static_cast<float>(1.0f / std::sqrt(static_cast<float>(dh)));
  auto part = [&](int64_t i) { return x.select(0, i).to(qkv.scalar_type()).contiguous(); };
  at::Tensor q = (x.select(0, 0) * scale).to(qkv.scalar_type()).contiguous();
  return {q, part(1), part(2)};
}

// The mask broadcast to the input's shape, per mask_type (0: (L, L) source mask, 1: (B, L) padding mask,
// 2: the input's shape; none: a 2-d mask on 4-d input is a padding mask, as CPU's legacy rule).
at::Tensor expandMask(const at::Tensor& input, const at::Tensor& mask, std::optional<int64_t> maskType) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "_masked_softmax: mask must be bool, got ", mask.scalar_type());
  at::Tensor m = mask;
  bool padding = maskType ? *maskType == 1 : (input.dim() == 4 && mask.dim() == 2);
  if (padding) {
    TORCH_CHECK(input.dim() == 4 && mask.dim() == 2 && mask.size(0) == input.size(0) && mask.size(1) == input.size(3),
                "_masked_softmax: a padding mask must be (B, L) for input (B, H, L, L), got ", mask.sizes(), " and ",
                input.sizes());
    m = mask.view({mask.size(0), 1, 1, mask.size(1)});
  }
  return m.expand(input.sizes());
}

at::Tensor maskedSoftmax(const at::Tensor& self, const at::Tensor& mask, std::optional<int64_t> dim,
                         std::optional<int64_t> maskType) {
  int64_t d = at::maybe_wrap_dim(dim.value_or(self.dim() - 1), self.dim());
  at::Tensor m = expandMask(self, mask, maskType);
  c10::ScalarType ct = opmathType(self.scalar_type());
  at::Tensor x = at::where(m, at::scalar_tensor(-INFINITY, self.options().dtype(ct)), self.to(ct));
  // As CPU: a fully masked row is NaN (exp(-inf - -inf)); masked entries of other rows are 0.
  at::Tensor e = (x - x.amax(d, true)).exp();
  return (e / e.sum(d, true)).to(self.scalar_type());
}

at::Tensor maskedSoftmaxBackward(const at::Tensor& grad, const at::Tensor& out, const at::Tensor& mask,
                                 std::optional<int64_t> dim) {
  int64_t d = at::maybe_wrap_dim(dim.value_or(out.dim() - 1), out.dim());
  at::Tensor m = mask.expand(out.sizes());
  c10::ScalarType ct = opmathType(out.scalar_type());
  at::Tensor g = at::where(m, at::zeros({}, grad.options().dtype(ct)), grad.to(ct)), y = out.to(ct);
  at::Tensor r = y * (g - (g * y).sum(d, true));
  return at::where(m, at::zeros({}, r.options()), r).to(out.scalar_type());
}

// relu / gelu (exact, as CPU; CUDA's cuBLASLt epilogue uses the tanh approximation) of addmm.
at::Tensor& addmmActivationOut(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
                               const c10::Scalar& beta, const c10::Scalar& alpha, bool useGelu, at::Tensor& out) {
  at::Tensor r = at::addmm(self, m1, m2, beta, alpha);
  r = useGelu ? at::gelu(r) : at::relu(r);
  out.resize_(r.sizes());
  return out.copy_(r);
}
at::Tensor addmmActivation(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
                           const c10::Scalar& beta, const c10::Scalar& alpha, bool useGelu) {
  at::Tensor r = at::addmm(self, m1, m2, beta, alpha);
  return useGelu ? at::gelu(r) : at::relu(r);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_transform_bias_rescale_qkv", transformBiasRescaleQkv);
  m.impl("_masked_softmax", maskedSoftmax);
  m.impl("_masked_softmax_backward", maskedSoftmaxBackward);
  m.impl("_addmm_activation", addmmActivation);
  m.impl("_addmm_activation.out", addmmActivationOut);
  m.impl("_native_multi_head_attention", at::native::native_multi_head_attention_cpu);
  m.impl("_transformer_encoder_layer_fwd", at::native::transformer_encoder_layer_forward);
}

}  // namespace tpu::aten
