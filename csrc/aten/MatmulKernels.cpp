// Matrix products: mm, bmm, dot, addmm, baddbmm, addbmm, addmv (mv, matmul,
// linear and einsum decompose into these). Python alpha/beta are device
// operands, so changing them never recompiles.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Matmul.h"

namespace tpu::aten {
namespace {

enum class Kind { Product, AddProduct, AddBatchSum };

void checkDtypes(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ", a.dtype(),
              " != ", b.dtype());
  TORCH_CHECK_NOT_IMPLEMENTED(a.scalar_type() != c10::kBool, "\"addmm_impl_cpu_\" not implemented for 'Bool'");
}

void checkSelf(const at::Tensor& self, const at::Tensor& a) {
  TORCH_CHECK(self.scalar_type() == a.scalar_type(), "self and mat2 must have the same dtype, but got ",
              self.scalar_type(), " and ", a.scalar_type());
}

// out= of a product: the dtype must match exactly (as for CPU's structured kernels).
void prepareExactOut(at::Tensor& out, c10::IntArrayRef shape, c10::ScalarType t) {
  TORCH_CHECK(out.scalar_type() == t, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(t),
              ", but got ", out.dtype(), " instead");
  at::native::resize_output(out, shape);
}

void checkInplaceShape(const at::Tensor& self, c10::IntArrayRef shape) {
  TORCH_CHECK(self.sizes().equals(shape), "Bad in-place call: input tensor size ", self.sizes(),
              " and output tensor size ", shape, " should match");
}

// out = [beta * self +] alpha * product(a, c); `self` is already expanded to out's shape.
// The products read stored values: a conj/neg view (PyTorch passes those through to BLAS-style
// kernels, which fold them into the call) is resolved first.
at::Tensor resolved(const at::Tensor& t) { return t.defined() ? t.resolve_conj().resolve_neg() : t; }

template <Kind K>
void runProduct(const at::Tensor& out, const at::Tensor& selfIn, const at::Tensor& aIn, const at::Tensor& cIn,
                int64_t batch, const c10::Scalar& beta, const c10::Scalar& alpha) {
  if (out.numel() == 0) return;
  at::Tensor self = resolved(selfIn), a = resolved(aIn), c = resolved(cIn);
  auto acc = opmathType(out.scalar_type());
  if (a.numel() == 0 || c.numel() == 0) {
    // Empty contraction: the product is zero.
    if (K == Kind::Product) {
      out.zero_();
      return;
    }
    TPU_OP("aten::addmm").in(self).scalar(beta, acc).scalar(alpha, acc).out(out).run(
        [&](hlo::Builder& b, Values in, Values s) {
          hlo::DType t = toHlo(acc);
          hlo::Value zero = b.full(hlo::Type{t, out.sizes().vec()}, 0);
          return ValueList{lowering::addScaled(b, in[0], zero, s[0], s[1])};
        });
    return;
  }
  Op op = TPU_OP(K == Kind::Product ? "aten::mm" : K == Kind::AddProduct ? "aten::addmm" : "aten::addbmm");
  op.in(a).in(c).attr(batch);
  if (K != Kind::Product) op.in(self).scalar(beta, acc).scalar(alpha, acc);
  op.out(out).run([&](hlo::Builder& b, Values in, Values s) {
    hlo::Value p = K == Kind::AddBatchSum ? lowering::batchSummedProduct(b, in[0], in[1])
                                          : lowering::product(b, in[0], in[1], batch);
    if (K == Kind::Product) return ValueList{p};
    return ValueList{lowering::addScaled(b, in[2], p, s[0], s[1])};
  });
}

// ---- mm / addmm ----------------------------------------------------------

std::vector<int64_t> mmShape(const at::Tensor& a, const at::Tensor& c) {
  TORCH_CHECK(a.dim() == 2, "self must be a matrix");
  TORCH_CHECK(c.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == c.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
              " and ", c.size(0), "x", c.size(1), ")");
  checkDtypes(a, c);
  return {a.size(0), c.size(1)};
}

at::Tensor& mmOut(const at::Tensor& a, const at::Tensor& c, at::Tensor& out) {
  auto shape = mmShape(a, c);
  prepareExactOut(out, shape, a.scalar_type());
  runProduct<Kind::Product>(out, at::Tensor(), a, c, 0, 0, 1);
  return out;
}
at::Tensor mm(const at::Tensor& a, const at::Tensor& c) {
  at::Tensor out = at::empty(mmShape(a, c), a.options());
  runProduct<Kind::Product>(out, at::Tensor(), a, c, 0, 0, 1);
  return out;
}

at::Tensor& addmmOut(const at::Tensor& self, const at::Tensor& a, const at::Tensor& c, const c10::Scalar& beta,
                     const c10::Scalar& alpha, at::Tensor& out) {
  auto shape = mmShape(a, c);
  checkSelf(self, a);
  at::Tensor expanded = self.expand(shape);
  prepareExactOut(out, shape, a.scalar_type());
  runProduct<Kind::AddProduct>(out, expanded, a, c, 0, beta, alpha);
  return out;
}
at::Tensor addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& c, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  at::Tensor out = at::empty(mmShape(a, c), a.options());
  return addmmOut(self, a, c, beta, alpha, out);
}
at::Tensor& addmmInplace(at::Tensor& self, const at::Tensor& a, const at::Tensor& c, const c10::Scalar& beta,
                         const c10::Scalar& alpha) {
  auto shape = mmShape(a, c);
  checkSelf(self, a);
  checkInplaceShape(self, shape);
  runProduct<Kind::AddProduct>(self, self, a, c, 0, beta, alpha);
  return self;
}

// ---- bmm / baddbmm / addbmm ----------------------------------------------

std::vector<int64_t> bmmShape(const at::Tensor& a, const at::Tensor& c) {
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(c.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(c.size(0) == a.size(0) && c.size(1) == a.size(2),
              "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ", a.size(2),
              "] but got: [", c.size(0), ", ", c.size(1), "].");
  checkDtypes(a, c);
  return {a.size(0), a.size(1), c.size(2)};
}

at::Tensor& bmmOut(const at::Tensor& a, const at::Tensor& c, at::Tensor& out) {
  auto shape = bmmShape(a, c);
  prepareExactOut(out, shape, a.scalar_type());
  runProduct<Kind::Product>(out, at::Tensor(), a, c, 1, 0, 1);
  return out;
}
at::Tensor bmm(const at::Tensor& a, const at::Tensor& c) {
  at::Tensor out = at::empty(bmmShape(a, c), a.options());
  runProduct<Kind::Product>(out, at::Tensor(), a, c, 1, 0, 1);
  return out;
}

at::Tensor& baddbmmOut(const at::Tensor& self, const at::Tensor& a, const at::Tensor& c, const c10::Scalar& beta,
                       const c10::Scalar& alpha, at::Tensor& out) {
  auto shape = bmmShape(a, c);
  checkSelf(self, a);
  at::Tensor expanded = self.expand(shape);
  prepareExactOut(out, shape, a.scalar_type());
  runProduct<Kind::AddProduct>(out, expanded, a, c, 1, beta, alpha);
  return out;
}
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& c, const c10::Scalar& beta,
                   const c10::Scalar& alpha) {
  at::Tensor out = at::empty(bmmShape(a, c), a.options());
  return baddbmmOut(self, a, c, beta, alpha, out);
}
at::Tensor& baddbmmInplace(at::Tensor& self, const at::Tensor& a, const at::Tensor& c, const c10::Scalar& beta,
                           const c10::Scalar& alpha) {
  auto shape = bmmShape(a, c);
  checkSelf(self, a);
  checkInplaceShape(self, shape);
  runProduct<Kind::AddProduct>(self, self, a, c, 1, beta, alpha);
  return self;
}

std::vector<int64_t> addbmmShape(const at::Tensor& a, const at::Tensor& c) {
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(c.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(a.size(0) == c.size(0), "batch1 and batch2 must have same number of batches, got ", a.size(0),
              " and ", c.size(0));
  TORCH_CHECK(a.size(2) == c.size(1), "Incompatible matrix sizes for bmm (", a.size(1), "x", a.size(2), " and ",
              c.size(1), "x", c.size(2), ")");
  checkDtypes(a, c);
  return {a.size(1), c.size(2)};
}

at::Tensor& addbmmOut(const at::Tensor& self, const at::Tensor& a, const at::Tensor& c, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& out) {
  auto shape = addbmmShape(a, c);
  checkSelf(self, a);
  at::Tensor expanded = self.expand(shape);
  prepareExactOut(out, shape, a.scalar_type());
  runProduct<Kind::AddBatchSum>(out, expanded, a, c, 0, beta, alpha);
  return out;
}
at::Tensor addbmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& c, const c10::Scalar& beta,
                  const c10::Scalar& alpha) {
  at::Tensor out = at::empty(addbmmShape(a, c), a.options());
  return addbmmOut(self, a, c, beta, alpha, out);
}
at::Tensor& addbmmInplace(at::Tensor& self, const at::Tensor& a, const at::Tensor& c, const c10::Scalar& beta,
                          const c10::Scalar& alpha) {
  auto shape = addbmmShape(a, c);
  checkSelf(self, a);
  checkInplaceShape(self, shape);
  runProduct<Kind::AddBatchSum>(self, self, a, c, 0, beta, alpha);
  return self;
}

// ---- dot / addmv -----------------------------------------------------------

at::Tensor dot(const at::Tensor& a, const at::Tensor& c) {
  TORCH_CHECK(a.dim() == 1 && c.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ", c.dim(),
              "D tensors");
  TORCH_CHECK(a.scalar_type() == c.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              a.scalar_type(), " and ", c.scalar_type());
  TORCH_CHECK(a.numel() == c.numel(), "inconsistent tensor size, expected tensor [", a.numel(), "] and src [",
              c.numel(), "] to have the same number of elements, but got ", a.numel(), " and ", c.numel(),
              " elements respectively");
  TORCH_CHECK_NOT_IMPLEMENTED(a.scalar_type() != c10::kBool, "\"dot\" not implemented for 'Bool'");
  at::Tensor out = at::empty({}, a.options());
  runProduct<Kind::Product>(out, at::Tensor(), a, c, 0, 0, 1);
  return out;
}

std::vector<int64_t> addmvShape(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1, "vector + matrix @ vector expected, got ",
              self.dim(), ", ", mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) && (mat.size(0) == self.numel() || self.numel() == 1),
              "size mismatch, got input (", self.dim() == 0 ? 1 : self.size(0), "), mat (", mat.size(0), "x",
              mat.size(1), "), vec (", vec.size(0), ")");
  checkDtypes(mat, vec);
  checkSelf(self, mat);
  return {mat.size(0)};
}

at::Tensor& addmvOut(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                     const c10::Scalar& alpha, at::Tensor& out) {
  auto shape = addmvShape(self, mat, vec);
  at::Tensor expanded = self.expand(shape);
  prepareExactOut(out, shape, mat.scalar_type());
  runProduct<Kind::AddProduct>(out, expanded, mat, vec, 0, beta, alpha);
  return out;
}
at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  at::Tensor out = at::empty(addmvShape(self, mat, vec), mat.options());
  return addmvOut(self, mat, vec, beta, alpha, out);
}
at::Tensor& addmvInplace(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                         const c10::Scalar& alpha) {
  auto shape = addmvShape(self, mat, vec);
  checkInplaceShape(self, shape);
  runProduct<Kind::AddProduct>(self, self, mat, vec, 0, beta, alpha);
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", mm);
  m.impl("mm.out", mmOut);
  m.impl("addmm", addmm);
  m.impl("addmm_", addmmInplace);
  m.impl("addmm.out", addmmOut);
  m.impl("bmm", bmm);
  m.impl("bmm.out", bmmOut);
  m.impl("baddbmm", baddbmm);
  m.impl("baddbmm_", baddbmmInplace);
  m.impl("baddbmm.out", baddbmmOut);
  m.impl("addbmm", addbmm);
  m.impl("addbmm_", addbmmInplace);
  m.impl("addbmm.out", addbmmOut);
  m.impl("dot", dot);
  m.impl("addmv", addmv);
  m.impl("addmv_", addmvInplace);
  m.impl("addmv.out", addmvOut);
}

}  // namespace tpu::aten
