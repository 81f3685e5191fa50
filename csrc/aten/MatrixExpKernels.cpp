// linalg_matrix_exp: scaling and squaring with a degree-18 Taylor polynomial (Horner, matmuls on tpu).
// The scaling uses PyTorch's bound for degree 18 (theta_18 of its mexp: 3.01 for float32, 1.09 for float64):
// 2^-s A has 1-norm <= theta, s read from the device once per call (CPU reads the norms too). The
// gradient is PyTorch's (the exponential of a block matrix, which comes back here).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>

namespace tpu::aten {
namespace {

at::Tensor matrixExp(const at::Tensor& a) {
  TORCH_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2), "linalg.matrix_exp: A must be batches of square matrices, "
              "but they are ", a.dim() >= 2 ? a.size(-2) : 0, " by ", a.dim() >= 1 ? a.size(-1) : 0, " matrices");
  TORCH_CHECK(at::isFloatingType(a.scalar_type()), "linalg.matrix_exp: expected a floating-point input on tpu, got ",
              a.scalar_type(), " (complex inputs are not supported yet)");
  // float16 / bfloat16 compute in float32 (at least as accurate as CPU, which stays in the low precision).
  if (a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16)
    return matrixExp(a.to(at::kFloat)).to(a.scalar_type());
  int64_t n = a.size(-1);
  if (a.numel() == 0) return at::empty_like(a);
  if (n == 1) return a.exp();
  double theta = a.scalar_type() == at::kDouble ? 1.090863719290036 : 3.010066362817634;
  double norm = a.abs().sum(-2).amax().to(at::kDouble).cpu().item<double>();
  TORCH_CHECK(std::isfinite(norm), "linalg.matrix_exp: the input holds a non-finite value");
  int64_t s = norm > theta ? static_cast<int64_t>(std::ceil(std::log2(norm / theta))) : 0;
  at::Tensor x = s > 0 ? a * std::ldexp(1.0, -static_cast<int>(s)) : a;
  at::Tensor eye = at::eye(n, a.options()).expand(a.sizes());
  // Horner: I + x (I + x/2 (I + x/3 (... (I + x/18)))).
  at::Tensor r = eye + x / 18.0;
  for (int k = 17; k >= 1; --k) r = eye + at::matmul(x, r) / static_cast<double>(k);
  for (int64_t i = 0; i < s; ++i) r = at::matmul(r, r);
  return r;
}
}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_matrix_exp", matrixExp);
}

}  // namespace tpu::aten
