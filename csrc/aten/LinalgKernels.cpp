// Linear algebra: LU with partial pivoting and what is built on it (lu_factor,
// lu_solve, solve, inv, det, slogdet, lu, lu_unpack), triangular solves,
// Cholesky (+ solve, inverse), and addr (beta * self + alpha * outer(vec1,
// vec2), one rounding at the end as on CPU). float32/float64/complex64/complex128 (addr: every dtype);
// check_errors=True reads the info tensor from the device (a sync).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "csrc/lowering/Elementwise.h"
#include "csrc/lowering/Linalg.h"

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
  bool useSelf = !(beta.isBoolean() ? !beta.toBool() : beta.toComplexDouble() == c10::complex<double>(0, 0));
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

// ---- shared checks -------------------------------------------------------------

// LU and what is built on it (solves, inv, det, slogdet), the triangular solves and Cholesky (+ solve, inverse) also
// take complex64/complex128 (pivoting on |re| + |im| as LAPACK, conjugate transposes for adjoint LU solves and
// Hermitian factors, triangular_solve's transpose the plain one as CPU's).
void checkFloatOrComplex(const at::Tensor& t, const char* op) {
  c10::ScalarType s = t.scalar_type();
  TORCH_CHECK(s == at::kFloat || s == at::kDouble || s == at::kComplexFloat || s == at::kComplexDouble, op,
              ": Expected a floating point or complex tensor as input. Got ", s);
}
void checkSquare(const at::Tensor& a, const char* op) {
  TORCH_CHECK(a.dim() >= 2, op, ": The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(a.size(-1) == a.size(-2), op, ": A must be batches of square matrices, but they are ", a.size(-2),
              " by ", a.size(-1), " matrices");
}
void out(at::Tensor& t, c10::IntArrayRef shape) { at::native::resize_output(t, shape); }

std::vector<int64_t> batchOf(const at::Tensor& a) { return a.sizes().slice(0, a.dim() - 2).vec(); }
std::vector<int64_t> with(std::vector<int64_t> v, std::initializer_list<int64_t> extra) {
  v.insert(v.end(), extra);
  return v;
}

void raiseIfInfo(const at::Tensor& info, const char* op, const char* what) {
  if (info.numel() == 0) return;
  int64_t bad = info.abs().max().item<int64_t>();
  TORCH_CHECK_LINALG(bad == 0, op, ": ", what, " (error code: ", bad, ").");
}

// ---- LU ------------------------------------------------------------------------

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> luFactorExOut(const at::Tensor& a, bool pivot, bool checkErrors,
                                                               at::Tensor& lu, at::Tensor& pivots, at::Tensor& info) {
  TORCH_CHECK(a.dim() >= 2, "torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: ", a.sizes(),
              " instead");
  checkFloatOrComplex(a, "linalg.lu_factor");
  TORCH_CHECK(pivot, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  auto batch = batchOf(a);
  out(lu, a.sizes());
  out(pivots, with(batch, {k}));
  out(info, batch);
  if (a.numel() == 0) {
    info.zero_();
    if (pivots.numel()) pivots.copy_(at::arange(1, k + 1, pivots.options()).expand(pivots.sizes()));
    return {lu, pivots, info};
  }
  TPU_OP("aten::linalg_lu_factor_ex").in(a).out(lu).out(pivots).out(info).run([](hlo::Builder& b, Values in, Values) {
    auto r = lowering::luFactor(b, in[0]);
    return ValueList{r.lu, r.pivots, r.info};
  });
  if (checkErrors) raiseIfInfo(info, "torch.linalg.lu_factor_ex", "The factorization could not be completed because "
                               "the input is not invertible");
  return {lu, pivots, info};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> luFactorEx(const at::Tensor& a, bool pivot, bool checkErrors) {
  at::Tensor lu = at::empty({0}, a.options()), piv = at::empty({0}, a.options().dtype(at::kInt)),
             info = at::empty({0}, a.options().dtype(at::kInt));
  luFactorExOut(a, pivot, checkErrors, lu, piv, info);
  return {lu, piv, info};
}

// X with A X = B (adjoint: A^H X = B), or X A = B (left = false), from A's LU.
at::Tensor& luSolveOut(const at::Tensor& lu, const at::Tensor& pivots, const at::Tensor& bIn, bool left, bool adjoint,
                       at::Tensor& result) {
  checkFloatOrComplex(lu, "linalg.lu_solve");
  checkSquare(lu, "linalg.lu_solve");
  TORCH_CHECK(bIn.dim() >= 2, "linalg.lu_solve: Expected B to have at least 2 dimensions, but it has ", bIn.dim(),
              " dimensions instead");
  TORCH_CHECK(lu.scalar_type() == bIn.scalar_type(), "linalg.lu_solve: Expected LU and B to have the same dtype, "
              "but found LU of type ", lu.scalar_type(), " and B of type ", bIn.scalar_type(), " instead");
  int64_t n = lu.size(-1);
  TORCH_CHECK(left ? bIn.size(-2) == n : bIn.size(-1) == n, "linalg.lu_solve: Incompatible shapes of A and B for "
              "the equation ", left ? "AX = B" : "XA = B", " (", n, "x", n, " and ", bIn.size(-2), "x", bIn.size(-1), ")");
  // X A = B  <=>  A^H X^H = B^H (A^T X^T = B^T for real values). The kernel reads plain values: the conj view
  // is resolved here (this call is below the dispatcher's Conjugate fallback).
  at::Tensor rhs = left ? bIn : bIn.mH().resolve_conj();
  bool adj = left ? adjoint : !adjoint;
  auto batch = at::infer_size(batchOf(lu), batchOf(rhs));
  at::Tensor luB = lu.expand(with(batch, {n, n})), pivB = pivots.expand(with(batch, {n}));
  at::Tensor rB = rhs.expand(with(batch, {rhs.size(-2), rhs.size(-1)}));
  at::Tensor x = at::empty(rB.sizes(), rhs.options());
  if (x.numel() > 0) {
    TPU_OP("aten::linalg_lu_solve").in(luB).in(pivB).in(rB).attr(adj).out(x).run([&](hlo::Builder& b, Values in, Values) {
      hlo::Value perm = lowering::permFromPivots(b, in[1], n);
      return ValueList{lowering::luSolve(b, in[0], perm, in[2], adj)};
    });
  }
  at::Tensor r = left ? x : x.mH();  // copy_ resolves the conj view
  out(result, r.sizes());
  result.copy_(r);
  return result;
}
at::Tensor luSolve(const at::Tensor& lu, const at::Tensor& pivots, const at::Tensor& b, bool left, bool adjoint) {
  at::Tensor r = at::empty({0}, lu.options());
  return luSolveOut(lu, pivots, b, left, adjoint, r);
}

// B is a batch of vectors when it has one dim less than A and matches A's leading dims (as linalg.solve).
bool vectorRhs(const at::Tensor& a, const at::Tensor& b) {
  return b.dim() == 1 || (b.dim() == a.dim() - 1 && b.sizes().equals(a.sizes().slice(0, a.dim() - 1)));
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> solveExOut(
    const at::Tensor& a, const at::Tensor& bIn, bool left, bool checkErrors, at::Tensor& result, at::Tensor& lu,
    at::Tensor& pivots, at::Tensor& info) {
  checkFloatOrComplex(a, "linalg.solve");
  checkSquare(a, "linalg.solve");
  TORCH_CHECK(a.scalar_type() == bIn.scalar_type(), "linalg.solve: Expected A and B to have the same dtype, but found "
              "A of type ", a.scalar_type(), " and B of type ", bIn.scalar_type(), " instead");
  bool vec = vectorRhs(a, bIn);
  at::Tensor rhs = vec ? bIn.unsqueeze(left ? -1 : -2) : bIn;
  // The LU of A itself, as CPU returns it (the backward solves with it).
  luFactorExOut(a, true, false, lu, pivots, info);
  at::Tensor x = luSolve(lu, pivots, rhs, left, false);
  if (vec) x = x.squeeze(left ? -1 : -2);
  out(result, x.sizes());
  result.copy_(x);
  if (checkErrors) raiseIfInfo(info, "torch.linalg.solve_ex", "The solver failed because the input matrix is singular");
  return {result, lu, pivots, info};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> solveEx(const at::Tensor& a, const at::Tensor& b, bool left,
                                                                   bool checkErrors) {
  at::Tensor r = at::empty({0}, a.options()), lu = at::empty({0}, a.options()),
             piv = at::empty({0}, a.options().dtype(at::kInt)), info = at::empty({0}, a.options().dtype(at::kInt));
  solveExOut(a, b, left, checkErrors, r, lu, piv, info);
  return {r, lu, piv, info};
}

std::tuple<at::Tensor&, at::Tensor&> invExOut(const at::Tensor& a, bool checkErrors, at::Tensor& inverse,
                                             at::Tensor& info) {
  checkFloatOrComplex(a, "linalg.inv");
  checkSquare(a, "linalg.inv");
  at::Tensor eye = at::eye(a.size(-1), a.options()).expand(a.sizes());
  at::Tensor lu = at::empty({0}, a.options()), piv = at::empty({0}, a.options().dtype(at::kInt));
  at::Tensor r = at::empty({0}, a.options());
  solveExOut(a, eye, true, false, r, lu, piv, info);
  out(inverse, r.sizes());
  inverse.copy_(r);
  if (checkErrors) raiseIfInfo(info, "torch.linalg.inv_ex", "The diagonal element is zero, the inversion could not be "
                               "completed because the input matrix is singular");
  return {inverse, info};
}
std::tuple<at::Tensor, at::Tensor> invEx(const at::Tensor& a, bool checkErrors) {
  at::Tensor inv = at::empty({0}, a.options()), info = at::empty({0}, a.options().dtype(at::kInt));
  invExOut(a, checkErrors, inv, info);
  return {inv, info};
}

// det / slogdet from the LU.
enum class DetKind { Det, SlogDet };
void runDet(DetKind kind, const at::Tensor& a, at::Tensor& lu, at::Tensor& pivots, at::Tensor& first,
            at::Tensor* second) {
  checkFloatOrComplex(a, kind == DetKind::Det ? "linalg.det" : "linalg.slogdet");
  checkSquare(a, kind == DetKind::Det ? "linalg.det" : "linalg.slogdet");
  at::Tensor info = at::empty({0}, a.options().dtype(at::kInt));
  // As CPU: a contiguous real A is factored as A^T (same determinant), a complex one as itself; the backward
  // relies on it (linalg_det_backward solves with the LU as A^T only for contiguous real A).
  bool useTranspose = a.is_contiguous() && !a.is_complex();
  luFactorExOut(useTranspose ? a.mT() : a, true, false, lu, pivots, info);
  auto batch = batchOf(a);
  out(first, batch);
  if (second) out(*second, batch);
  if (first.numel() == 0) return;
  if (a.size(-1) == 0) {
    first.fill_(1);
    if (second) second->zero_();
    return;
  }
  Op op = TPU_OP("aten::linalg_det");
  op.in(lu).in(pivots).attr(static_cast<int64_t>(kind)).out(first);
  if (second) op.out(*second);
  op.run([&](hlo::Builder& b, Values in, Values) {
    auto d = lowering::luDet(b, in[0], in[1]);
    return kind == DetKind::Det ? ValueList{d.det} : ValueList{d.sign, d.logabsdet};
  });
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> detOut(const at::Tensor& a, at::Tensor& det, at::Tensor& lu,
                                                        at::Tensor& pivots) {
  runDet(DetKind::Det, a, lu, pivots, det, nullptr);
  return {det, lu, pivots};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> det(const at::Tensor& a) {
  at::Tensor d = at::empty({0}, a.options()), lu = at::empty({0}, a.options()),
             piv = at::empty({0}, a.options().dtype(at::kInt));
  detOut(a, d, lu, piv);
  return {d, lu, piv};
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> slogdetOut(const at::Tensor& a, at::Tensor& sign,
                                                                         at::Tensor& logabs, at::Tensor& lu,
                                                                         at::Tensor& pivots) {
  runDet(DetKind::SlogDet, a, lu, pivots, sign, &logabs);
  return {sign, logabs, lu, pivots};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> slogdet(const at::Tensor& a) {
  at::Tensor s = at::empty({0}, a.options()), l = at::empty({0}, a.options().dtype(c10::toRealValueType(a.scalar_type()))),
             lu = at::empty({0}, a.options()),
             piv = at::empty({0}, a.options().dtype(at::kInt));
  slogdetOut(a, s, l, lu, piv);
  return {s, l, lu, piv};
}

// P, L, U from an LU (lu_unpack) or of A (linalg.lu).
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> luUnpackOut(const at::Tensor& lu, const at::Tensor& pivots,
                                                             bool unpackData, bool unpackPivots, at::Tensor& P,
                                                             at::Tensor& L, at::Tensor& U) {
  TORCH_CHECK(lu.dim() >= 2, "torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: ", lu.sizes(),
              " instead");
  TORCH_CHECK(pivots.scalar_type() == at::kInt, "torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of "
              "torch.int32 dtype. Note: this function is intended to be used with the output produced by "
              "torch.linalg.lu_factor");
  int64_t m = lu.size(-2), n = lu.size(-1), k = std::min(m, n);
  auto batch = batchOf(lu);
  out(P, unpackPivots ? with(batch, {m, m}) : std::vector<int64_t>{0});
  out(L, unpackData ? with(batch, {m, k}) : std::vector<int64_t>{0});
  out(U, unpackData ? with(batch, {k, n}) : std::vector<int64_t>{0});
  if (lu.numel() == 0) {
    if (unpackPivots && P.numel()) P.copy_(at::eye(m, P.options()).expand(P.sizes()));
    if (unpackData) {
      L.zero_();
      U.zero_();
    }
    return {P, L, U};
  }
  Op op = TPU_OP("aten::lu_unpack");
  op.in(lu).in(pivots).attr(unpackData).attr(unpackPivots);
  if (unpackPivots) op.out(P);
  if (unpackData) op.out(L).out(U);
  op.run([&](hlo::Builder& b, Values in, Values) {
    auto [p, l, u] = lowering::luUnpack(b, in[0], lowering::permFromPivots(b, in[1], m));
    ValueList r;
    if (unpackPivots) r.push_back(p);
    if (unpackData) {
      r.push_back(l);
      r.push_back(u);
    }
    return r;
  });
  return {P, L, U};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> luUnpack(const at::Tensor& lu, const at::Tensor& pivots,
                                                        bool unpackData, bool unpackPivots) {
  at::Tensor P = at::empty({0}, lu.options()), L = at::empty({0}, lu.options()), U = at::empty({0}, lu.options());
  return luUnpackOut(lu, pivots, unpackData, unpackPivots, P, L, U);
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalgLuOut(const at::Tensor& a, bool pivot, at::Tensor& P,
                                                             at::Tensor& L, at::Tensor& U) {
  auto [lu, piv, info] = luFactorEx(a, pivot, false);
  return luUnpackOut(lu, piv, true, true, P, L, U);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> linalgLu(const at::Tensor& a, bool pivot) {
  at::Tensor P = at::empty({0}, a.options()), L = at::empty({0}, a.options()), U = at::empty({0}, a.options());
  linalgLuOut(a, pivot, P, L, U);
  return {P, L, U};
}

// ---- triangular solves and Cholesky ----------------------------------------------------

// op(A) X = B (left) or X op(A) = B with A's batch broadcast against B's; op(A) = A^T (transpose), or A^H when
// also `conjugate`.
at::Tensor triSolve(const at::Tensor& a, const at::Tensor& bIn, bool left, bool upper, bool transpose, bool unit,
                    bool conjugate = false) {
  auto batch = at::infer_size(batchOf(a), batchOf(bIn));
  at::Tensor aB = a.expand(with(batch, {a.size(-2), a.size(-1)}));
  at::Tensor bB = bIn.expand(with(batch, {bIn.size(-2), bIn.size(-1)}));
  at::Tensor x = at::empty(bB.sizes(), bIn.options());
  if (x.numel() == 0) return x;
  TPU_OP("aten::triangular_solve").in(aB).in(bB).attr(left).attr(upper).attr(transpose).attr(unit).attr(conjugate)
      .out(x).run([&](hlo::Builder& b, Values in, Values) {
        return ValueList{lowering::triangularSolve(b, in[0], in[1], left, !upper, transpose, unit, conjugate)};
      });
  return x;
}

at::Tensor& solveTriangularOut(const at::Tensor& a, const at::Tensor& bIn, bool upper, bool left, bool unit,
                               at::Tensor& result) {
  checkFloatOrComplex(a, "linalg.solve_triangular");
  checkSquare(a, "linalg.solve_triangular");
  TORCH_CHECK(bIn.dim() >= 2, "linalg.solve_triangular: The input tensor B must have at least 2 dimensions.");
  TORCH_CHECK(a.scalar_type() == bIn.scalar_type(), "linalg.solve_triangular: Expected A and B to have the same "
              "dtype, but found A of type ", a.scalar_type(), " and B of type ", bIn.scalar_type(), " instead");
  TORCH_CHECK(left ? bIn.size(-2) == a.size(-1) : bIn.size(-1) == a.size(-1), "linalg.solve_triangular: Incompatible "
              "shapes of A and B for the equation ", left ? "AX = B" : "XA = B");
  // PyTorch lets linalg_solve_triangular through its Conjugate and Negative fallbacks (BLAS kernels take conj
  // operands): the kernel reads plain values, so a conj / neg view (A.mH) is resolved here.
  at::Tensor x = triSolve(a.resolve_conj().resolve_neg(), bIn.resolve_conj().resolve_neg(), left, upper, false, unit);
  out(result, x.sizes());
  result.copy_(x);
  return result;
}
at::Tensor solveTriangular(const at::Tensor& a, const at::Tensor& b, bool upper, bool left, bool unit) {
  at::Tensor r = at::empty({0}, a.options());
  return solveTriangularOut(a, b, upper, left, unit, r);
}

std::tuple<at::Tensor&, at::Tensor&> triangularSolveOut(const at::Tensor& self, const at::Tensor& a, bool upper,
                                                       bool transpose, bool unit, at::Tensor& x, at::Tensor& m) {
  checkFloatOrComplex(a, "triangular_solve");
  TORCH_CHECK(self.dim() >= 2 && a.dim() >= 2, "torch.triangular_solve: Expected b to have at least 2 dimensions, "
              "but it has ", self.dim(), " dimensions instead");
  at::Tensor r = triSolve(a, self, true, upper, transpose, unit);
  out(x, r.sizes());
  x.copy_(r);
  auto batch = at::infer_size(batchOf(a), batchOf(self));
  out(m, with(batch, {a.size(-2), a.size(-1)}));
  m.copy_(a.expand(m.sizes()));
  return {x, m};
}
std::tuple<at::Tensor, at::Tensor> triangularSolveFn(const at::Tensor& self, const at::Tensor& a, bool upper,
                                                     bool transpose, bool unit) {
  at::Tensor x = at::empty({0}, self.options()), m = at::empty({0}, a.options());
  triangularSolveOut(self, a, upper, transpose, unit, x, m);
  return {x, m};
}

std::tuple<at::Tensor&, at::Tensor&> choleskyExOut(const at::Tensor& a, bool upper, bool checkErrors, at::Tensor& L,
                                                  at::Tensor& info) {
  checkFloatOrComplex(a, "linalg.cholesky");
  checkSquare(a, "linalg.cholesky");
  out(L, a.sizes());
  out(info, batchOf(a));
  if (a.numel() == 0) {
    info.zero_();
    return {L, info};
  }
  TPU_OP("aten::linalg_cholesky_ex").in(a).attr(upper).out(L).out(info).run([&](hlo::Builder& b, Values in, Values) {
    auto [l, i] = lowering::cholesky(b, in[0], upper);
    return ValueList{l, i};
  });
  if (checkErrors) raiseIfInfo(info, "linalg.cholesky", "The factorization could not be completed because the input "
                               "is not positive-definite");
  return {L, info};
}
std::tuple<at::Tensor, at::Tensor> choleskyEx(const at::Tensor& a, bool upper, bool checkErrors) {
  at::Tensor L = at::empty({0}, a.options()), info = at::empty({0}, a.options().dtype(at::kInt));
  choleskyExOut(a, upper, checkErrors, L, info);
  return {L, info};
}
at::Tensor& choleskyOut(const at::Tensor& a, bool upper, at::Tensor& result) {
  at::Tensor info = at::empty({0}, a.options().dtype(at::kInt));
  choleskyExOut(a, upper, true, result, info);
  return result;
}
at::Tensor cholesky(const at::Tensor& a, bool upper) {
  at::Tensor r = at::empty({0}, a.options());
  return choleskyOut(a, upper, r);
}

// X with A X = B where A = L L^T (or U^T U).
at::Tensor choleskySolveHelper(const at::Tensor& self, const at::Tensor& factor, bool upper) {
  // upper: A = U^H U: solve U^H y = B, U x = y. lower: L y = B, L^H x = y (^H = ^T for real values).
  checkFloatOrComplex(factor, "cholesky_solve");
  checkFloatOrComplex(self, "cholesky_solve");
  at::Tensor y = triSolve(factor, self, true, upper, /*transpose=*/upper, false, /*conjugate=*/true);
  return triSolve(factor, y, true, upper, /*transpose=*/!upper, false, /*conjugate=*/true);
}
at::Tensor& choleskyInverseOut(const at::Tensor& factor, bool upper, at::Tensor& result) {
  checkFloatOrComplex(factor, "cholesky_inverse");
  checkSquare(factor, "cholesky_inverse");
  at::Tensor eye = at::eye(factor.size(-1), factor.options()).expand(factor.sizes());
  at::Tensor r = choleskySolveHelper(eye, factor, upper);
  out(result, r.sizes());
  result.copy_(r);
  return result;
}
at::Tensor choleskyInverse(const at::Tensor& factor, bool upper) {
  at::Tensor r = at::empty({0}, factor.options());
  return choleskyInverseOut(factor, upper, r);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_lu_factor_ex", luFactorEx);
  m.impl("linalg_lu_factor_ex.out", luFactorExOut);
  m.impl("linalg_lu_solve", luSolve);
  m.impl("linalg_lu_solve.out", luSolveOut);
  m.impl("_linalg_solve_ex", solveEx);
  m.impl("_linalg_solve_ex.result", solveExOut);
  m.impl("linalg_inv_ex", invEx);
  m.impl("linalg_inv_ex.inverse", invExOut);
  m.impl("_linalg_det", det);
  m.impl("_linalg_det.result", detOut);
  m.impl("_linalg_slogdet", slogdet);
  m.impl("_linalg_slogdet.sign", slogdetOut);
  m.impl("lu_unpack", luUnpack);
  m.impl("lu_unpack.out", luUnpackOut);
  m.impl("linalg_lu", linalgLu);
  m.impl("linalg_lu.out", linalgLuOut);
  m.impl("linalg_solve_triangular", solveTriangular);
  m.impl("linalg_solve_triangular.out", solveTriangularOut);
  m.impl("triangular_solve", triangularSolveFn);
  m.impl("triangular_solve.X", triangularSolveOut);
  m.impl("linalg_cholesky_ex", choleskyEx);
  m.impl("linalg_cholesky_ex.L", choleskyExOut);
  m.impl("cholesky", cholesky);
  m.impl("cholesky.out", choleskyOut);
  m.impl("_cholesky_solve_helper", choleskySolveHelper);
  m.impl("cholesky_inverse", choleskyInverse);
  m.impl("cholesky_inverse.out", choleskyInverseOut);
  m.impl("addr", addr);
  m.impl("addr_", addr_);
  m.impl("addr.out", addrOut);
}

}  // namespace tpu::aten
