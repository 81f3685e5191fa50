// torch.linalg.ldl_factor(_ex) and ldl_solve: LAPACK's sytrf / sytrs (Bunch-Kaufman, lower) as while
// loops (lowering/Ldl.cpp), with CPU's output layout: LD lower triangular (zeros above), pivots int32 and
// 1-based, info the first zero pivot. float32 and float64; hermitian is the same factorisation for real
// inputs. Not differentiable (as on CPU).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "OpRunner.h"
#include "csrc/lowering/Ldl.h"

namespace tpu::aten {
namespace {

void checkReal(const at::Tensor& a, const char* op) {
  TORCH_CHECK(at::isFloatingType(a.scalar_type()) || at::isComplexType(a.scalar_type()), op,
              ": Expected a floating point or complex tensor as input. Got ", a.scalar_type());
  TORCH_CHECK(a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble, op,
              ": expected a float32 or float64 input on tpu, got ", a.scalar_type(),
              " (complex and reduced-precision inputs are not supported yet)");
}

void checkSquare(const at::Tensor& a, const char* op) {
  TORCH_CHECK(a.dim() >= 2, op, ": The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(a.size(-1) == a.size(-2), op, ": A must be batches of square matrices, but they are ", a.size(-2),
              " by ", a.size(-1), " matrices");
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> ldlFactorExOut(const at::Tensor& a, bool /*hermitian*/,
                                                                 bool checkErrors, at::Tensor& LD,
                                                                 at::Tensor& pivots, at::Tensor& info) {
  const char* op = "torch.linalg.ldl_factor_ex";
  checkSquare(a, op);
  checkReal(a, op);
  TORCH_CHECK(LD.scalar_type() == a.scalar_type(), op, ": Expected LD to have dtype ", a.scalar_type(),
              ", but got ", LD.scalar_type());
  TORCH_CHECK(pivots.scalar_type() == at::kInt && info.scalar_type() == at::kInt, op,
              ": Expected pivots and info to have dtype int32");
  auto batch = a.sizes().slice(0, a.dim() - 2);
  at::native::resize_output(LD, a.sizes());
  at::native::resize_output(pivots, a.sizes().slice(0, a.dim() - 1));
  at::native::resize_output(info, batch);
  if (a.numel() == 0) {
    info.zero_();
    return {LD, pivots, info};
  }
  TPU_OP("aten::linalg_ldl_factor_ex").in(a).out(LD).out(pivots).out(info).run([](hlo::Builder& b, Values in, Values) {
    lowering::LdlResult r = lowering::ldlFactor(b, in[0]);
    return ValueList{r.ld, r.pivots, r.info};
  });
  if (checkErrors) at::_linalg_check_errors(info, op, a.dim() == 2);
  return {LD, pivots, info};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> ldlFactorEx(const at::Tensor& a, bool hermitian, bool checkErrors) {
  at::Tensor LD = at::empty({0}, a.options()), pivots = at::empty({0}, a.options().dtype(at::kInt)),
             info = at::empty({0}, a.options().dtype(at::kInt));
  ldlFactorExOut(a, hermitian, checkErrors, LD, pivots, info);
  return {LD, pivots, info};
}

at::Tensor& ldlSolveOut(const at::Tensor& LD, const at::Tensor& pivots, const at::Tensor& B, bool /*hermitian*/,
                        at::Tensor& out) {
  const char* op = "torch.linalg.ldl_solve";
  checkSquare(LD, op);
  TORCH_CHECK(B.dim() >= 2, op, ": The input tensor B must have at least 2 dimensions.");
  TORCH_CHECK(LD.sizes().slice(0, LD.dim() - 1) == pivots.sizes(), op,
              ": Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots with shape ", pivots.sizes(),
              " instead");
  TORCH_CHECK(at::isIntegralType(pivots.scalar_type(), false), op,
              ": Expected pivots to be integers. Got ", pivots.scalar_type());
  TORCH_CHECK(LD.scalar_type() == B.scalar_type(), "Expected b and A to have the same dtype, but found b of type ",
              B.scalar_type(), " and A of type ", LD.scalar_type(), " instead.");
  checkReal(LD, op);
  int64_t n = LD.size(-1), k = B.size(-1);
  TORCH_CHECK(B.size(-2) == n, "Incompatible matrix sizes for torch.linalg.ldl_solve: each A matrix is ", n, " by ", n,
              " but each b matrix is ", B.size(-2), " by ", k);
  auto batch = at::infer_size(LD.sizes().slice(0, LD.dim() - 2), B.sizes().slice(0, B.dim() - 2));
  std::vector<int64_t> ldShape(batch), pivShape(batch), bShape(batch);
  ldShape.insert(ldShape.end(), {n, n});
  pivShape.push_back(n);
  bShape.insert(bShape.end(), {n, k});
  at::native::resize_output(out, bShape);
  if (out.numel() == 0) return out;
  at::Tensor ld = LD.expand(ldShape), piv = pivots.to(at::kInt).expand(pivShape), rhs = B.expand(bShape);
  at::Tensor res = at::empty(bShape, B.options());
  TPU_OP("aten::linalg_ldl_solve").in(ld).in(piv).in(rhs).out(res).run([](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::ldlSolve(b, in[0], in[1], in[2])};
  });
  return out.copy_(res);
}
at::Tensor ldlSolve(const at::Tensor& LD, const at::Tensor& pivots, const at::Tensor& B, bool hermitian) {
  at::Tensor out = at::empty({0}, B.options());
  return ldlSolveOut(LD, pivots, B, hermitian, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_ldl_factor_ex", ldlFactorEx);
  m.impl("linalg_ldl_factor_ex.out", ldlFactorExOut);
  m.impl("linalg_ldl_solve", ldlSolve);
  m.impl("linalg_ldl_solve.out", ldlSolveOut);
}

}  // namespace tpu::aten
