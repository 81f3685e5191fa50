// Linear-algebra odds and ends found missing by the OpInfo harness: addr
// (beta * self + alpha * outer(vec1, vec2), one rounding at the end as on CPU).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "csrc/lowering/Elementwise.h"

namespace tpu::aten {
namespace {

using lowering::Binary;

// out = [beta * self +] alpha * vec1 (x) vec2; beta == 0 ignores self (its NaNs too), as on CPU.
void runAddr(const at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2, const c10::Scalar& beta,
             const c10::Scalar& alpha, const at::Tensor& out) {
  TORCH_CHECK(v1.dim() == 1 && v2.dim() == 1, "addr: Expected 1-D argument vec1, but got ", v1.dim(), "-D");
  c10::ScalarType t = out.scalar_type();
  if (t != at::kBool) {
    TORCH_CHECK(!beta.isBoolean(), "Boolean beta only supported for Boolean results.");
    TORCH_CHECK(!alpha.isBoolean(), "Boolean alpha only supported for Boolean results.");
  }
  if (c10::isIntegralType(t, false)) {
    TORCH_CHECK(!beta.isFloatingPoint() && !alpha.isFloatingPoint(),
                "For integral input tensors, argument beta must not be a floating point number.");
  }
  bool useSelf = !(beta.isBoolean() ? !beta.toBool() : beta.toDouble() == 0);
  Arg s = Arg::of(self), a = Arg::of(v1.unsqueeze(1)), c = Arg::of(v2.unsqueeze(0));
  Arg bt = Arg::of(beta), al = Arg::of(alpha);
  auto body = [](hlo::Builder& b, std::vector<hlo::Value>& v) {
    hlo::Value prod = lowering::binary(b, Binary::Mul, lowering::binary(b, Binary::Mul, v[1], v[2]), v[3]);
    if (v.size() == 4) return prod;
    return lowering::binary(b, Binary::Add, lowering::binary(b, Binary::Mul, v[0], v[4]), prod);
  };
  if (useSelf) {
    runPointwise(TPU_OP("aten::addr"), {&s, &a, &c, &al, &bt}, out, opmathType(t), body);
  } else {
    // self is not read: a dummy first operand keeps the body's numbering.
    runPointwise(TPU_OP("aten::addr.nobeta"), {&a, &a, &c, &al}, out, opmathType(t), body);
  }
}

c10::ScalarType addrType(const at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2) {
  return c10::promoteTypes(c10::promoteTypes(self.scalar_type(), v1.scalar_type()), v2.scalar_type());
}

at::Tensor& addrOut(const at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2, const c10::Scalar& beta,
                    const c10::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(v1.dim() == 1 && v2.dim() == 1, "addr: Expected 1-D argument vec1, but got ", v1.dim(), "-D");
  std::vector<int64_t> shape{v1.size(0), v2.size(0)};
  at::expand_size(self, shape, "addr");  // raises when self does not broadcast
  prepareOut("addr", out, shape, addrType(self, v1, v2));
  runAddr(self, v1, v2, beta, alpha, out);
  return out;
}
at::Tensor addr(const at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2, const c10::Scalar& beta,
                const c10::Scalar& alpha) {
  TORCH_CHECK(v1.dim() == 1 && v2.dim() == 1, "addr: Expected 1-D argument vec1, but got ", v1.dim(), "-D");
  at::Tensor out = at::empty({v1.size(0), v2.size(0)}, self.options().dtype(addrType(self, v1, v2)));
  return addrOut(self, v1, v2, beta, alpha, out);
}
at::Tensor& addr_(at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2, const c10::Scalar& beta,
                  const c10::Scalar& alpha) {
  TORCH_CHECK(v1.dim() == 1 && v2.dim() == 1, "addr: Expected 1-D argument vec1, but got ", v1.dim(), "-D");
  checkInplace("addr_", self, {v1.size(0), v2.size(0)}, addrType(self, v1, v2));
  runAddr(self, v1, v2, beta, alpha, self);
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addr", addr);
  m.impl("addr_", addr_);
  m.impl("addr.out", addrOut);
}

}  // namespace tpu::aten
