// Orthogonal decompositions: linalg_qr, _linalg_eigh, _linalg_svd (what torch.linalg.qr / eigh / eigvalsh /
// svd / svdvals / pinv / matrix_norm(ord=2) / matrix_rank and nn.init.orthogonal_ reach). One program per
// call, the while loops of lowering/Decomp.cpp. Gradients come from PyTorch's formulas (derivatives.yaml)
// on these outputs. float32 and float64.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "OpRunner.h"
#include "csrc/lowering/Decomp.h"

namespace tpu::aten {
namespace {

void checkInput(const at::Tensor& a, const char* op) {
  TORCH_CHECK(a.dim() >= 2, op, ": The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble, op,
              ": expected a float32 or float64 input on tpu, got ", a.scalar_type(),
              " (complex and reduced-precision inputs are not supported yet)");
}

std::vector<int64_t> with(c10::IntArrayRef batch, std::initializer_list<int64_t> tail) {
  std::vector<int64_t> r(batch.begin(), batch.end());
  r.insert(r.end(), tail);
  return r;
}
c10::IntArrayRef batchOf(const at::Tensor& a) { return a.sizes().slice(0, a.dim() - 2); }

hlo::Value sliceLast2(hlo::Builder& b, hlo::Value x, int64_t rows, int64_t cols) {
  std::vector<int64_t> start(x.rank(), 0), limit(x.shape().begin(), x.shape().end()), st(x.rank(), 1);
  limit[x.rank() - 2] = rows;
  limit[x.rank() - 1] = cols;
  return b.slice(x, start, limit, st);
}

// ---- QR ------------------------------------------------------------------------------------------

std::tuple<at::Tensor&, at::Tensor&> qrOut(const at::Tensor& a, c10::string_view mode, at::Tensor& Q, at::Tensor& R) {
  checkInput(a, "linalg.qr");
  TORCH_CHECK(mode == "reduced" || mode == "complete" || mode == "r", "qr received unrecognized mode '", mode,
              "' but expected one of 'reduced' (default), 'r', or 'complete'");
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  bool complete = mode == "complete", wantQ = mode != "r";
  auto batch = batchOf(a);
  at::native::resize_output(Q, wantQ ? with(batch, {m, complete ? m : k}) : std::vector<int64_t>{0});
  at::native::resize_output(R, with(batch, {complete ? m : k, n}));
  if (a.numel() == 0) {
    if (wantQ && Q.numel() > 0) Q.copy_(at::eye(m, Q.options()).narrow(1, 0, Q.size(-1)).expand(Q.sizes()));
    R.zero_();
    return {Q, R};
  }
  at::Tensor r = R;
  Op op = TPU_OP("aten::linalg_qr");
  op.in(a).attr(complete).attr(wantQ);
  if (wantQ) op.out(Q);
  op.out(R).run([&](hlo::Builder& b, Values in, Values) {
    auto [q, rr] = lowering::householderQr(b, in[0]);
    ValueList res;
    if (wantQ) res.push_back(complete ? q : sliceLast2(b, q, m, k));
    res.push_back(complete ? rr : sliceLast2(b, rr, k, n));
    return res;
  });
  return {Q, R};
}
std::tuple<at::Tensor, at::Tensor> qr(const at::Tensor& a, c10::string_view mode) {
  at::Tensor Q = at::empty({0}, a.options()), R = at::empty({0}, a.options());
  qrOut(a, mode, Q, R);
  return {Q, R};
}

// ---- geqrf / householder_product / ormqr ------------------------------------------------------------

std::tuple<at::Tensor&, at::Tensor&> geqrfOut(const at::Tensor& a, at::Tensor& qr, at::Tensor& tau) {
  checkInput(a, "geqrf");
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  at::native::resize_output(qr, a.sizes());
  at::native::resize_output(tau, with(batchOf(a), {k}));
  if (a.numel() == 0) return {qr, tau};
  TPU_OP("aten::geqrf").in(a).out(qr).out(tau).run([&](hlo::Builder& b, Values in, Values) {
    auto [c, t] = lowering::householderQrCompact(b, in[0]);
    return ValueList{c, t};
  });
  return {qr, tau};
}
std::tuple<at::Tensor, at::Tensor> geqrf(const at::Tensor& a) {
  at::Tensor qr = at::empty({0}, a.options()), tau = at::empty({0}, a.options());
  geqrfOut(a, qr, tau);
  return {qr, tau};
}

at::Tensor& householderProductOut(const at::Tensor& a, const at::Tensor& tau, at::Tensor& out) {
  checkInput(a, "torch.linalg.householder_product");
  TORCH_CHECK(a.size(-2) >= a.size(-1), "torch.linalg.householder_product: input.shape[-2] must be greater than or "
              "equal to input.shape[-1]");
  TORCH_CHECK(a.size(-1) >= tau.size(-1), "torch.linalg.householder_product: input.shape[-1] must be greater than or "
              "equal to tau.shape[-1]");
  TORCH_CHECK(tau.dim() == a.dim() - 1 && tau.sizes().slice(0, tau.dim() - 1) == batchOf(a),
              "torch.linalg.householder_product: Expected batch dimensions of tau to be equal to input.shape[:-2], "
              "but got ", tau.sizes());
  TORCH_CHECK(tau.scalar_type() == a.scalar_type(), "torch.linalg.householder_product: tau dtype ",
              tau.scalar_type(), " does not match input dtype ", a.scalar_type());
  at::native::resize_output(out, a.sizes());
  if (a.numel() == 0) return out;
  if (tau.size(-1) == 0) {
    out.copy_(at::eye(a.size(-2), a.size(-1), a.options()).expand(a.sizes()));
    return out;
  }
  TPU_OP("aten::linalg_householder_product").in(a).in(tau).out(out).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::householderProduct(b, in[0], in[1])};
  });
  return out;
}
at::Tensor householderProduct(const at::Tensor& a, const at::Tensor& tau) {
  at::Tensor out = at::empty({0}, a.options());
  return householderProductOut(a, tau, out);
}

// Q (m x m, from the reflectors of `a`) times `other`: Q C, Q^T C (left) or C Q, C Q^T.
at::Tensor& ormqrOut(const at::Tensor& a, const at::Tensor& tau, const at::Tensor& other, bool left, bool transpose,
                     at::Tensor& out) {
  checkInput(a, "torch.ormqr");
  TORCH_CHECK(other.dim() == a.dim(), "torch.ormqr: input and other must have the same number of dimensions");
  int64_t m = left ? other.size(-2) : other.size(-1);
  TORCH_CHECK(a.size(-2) == m, "torch.ormqr: input.shape[-2] must be equal to other.shape[", left ? -2 : -1, "]");
  TORCH_CHECK(tau.size(-1) <= a.size(-1), "torch.ormqr: tau.shape[-1] must be less than or equal to input.shape[-1]");
  // Full Q: pad the reflectors to m columns (tau 0: identity reflections).
  int64_t cols = a.size(-1);
  at::Tensor full = cols >= m ? a.narrow(-1, 0, m)
                              : at::cat({a, at::zeros(with(batchOf(a), {m, m - cols}), a.options())}, -1);
  at::Tensor t = tau.size(-1) >= m ? tau.narrow(-1, 0, m)
                                   : at::cat({tau, at::zeros(with(batchOf(a), {m - tau.size(-1)}), tau.options())}, -1);
  at::Tensor q = householderProduct(full, t);
  if (transpose) q = q.mT();
  at::Tensor r = left ? at::matmul(q, other) : at::matmul(other, q);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}
at::Tensor ormqr(const at::Tensor& a, const at::Tensor& tau, const at::Tensor& other, bool left, bool transpose) {
  at::Tensor out = at::empty({0}, a.options());
  return ormqrOut(a, tau, other, left, transpose, out);
}

// ---- eigh ----------------------------------------------------------------------------------------

std::tuple<at::Tensor&, at::Tensor&> eighOut(const at::Tensor& a, c10::string_view uplo, bool computeV,
                                             at::Tensor& vals, at::Tensor& vecs) {
  checkInput(a, "linalg.eigh");
  TORCH_CHECK(a.size(-1) == a.size(-2), "linalg.eigh: A must be batches of square matrices, but they are ",
              a.size(-2), " by ", a.size(-1), " matrices");
  TORCH_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u", "Expected UPLO argument to be 'L' or 'U', "
              "but got ", uplo);
  bool lower = uplo == "L" || uplo == "l";
  int64_t n = a.size(-1);
  auto batch = batchOf(a);
  at::native::resize_output(vals, with(batch, {n}));
  at::native::resize_output(vecs, computeV ? with(batch, {n, n}) : std::vector<int64_t>{0});
  if (a.numel() == 0) return {vals, vecs};
  Op op = TPU_OP("aten::_linalg_eigh");
  op.in(a).attr(lower).attr(computeV).out(vals);
  if (computeV) op.out(vecs);
  op.run([&](hlo::Builder& b, Values in, Values) {
    auto [w, v] = lowering::eighJacobi(b, in[0], lower);
    return computeV ? ValueList{w, v} : ValueList{w};
  });
  return {vals, vecs};
}
std::tuple<at::Tensor, at::Tensor> eigh(const at::Tensor& a, c10::string_view uplo, bool computeV) {
  at::Tensor w = at::empty({0}, a.options()), v = at::empty({0}, a.options());
  eighOut(a, uplo, computeV, w, v);
  return {w, v};
}

// ---- SVD -----------------------------------------------------------------------------------------

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> svdOut(const at::Tensor& a, bool full, bool computeUV,
                                                         std::optional<c10::string_view>, at::Tensor& U,
                                                         at::Tensor& S, at::Tensor& Vh) {
  checkInput(a, "linalg.svd");
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  auto batch = batchOf(a);
  at::native::resize_output(S, with(batch, {k}));
  at::native::resize_output(U, computeUV ? with(batch, {m, full ? m : k}) : std::vector<int64_t>{0});
  at::native::resize_output(Vh, computeUV ? with(batch, {full ? n : k, n}) : std::vector<int64_t>{0});
  if (a.numel() == 0) {
    if (computeUV && U.numel() > 0) U.copy_(at::eye(m, U.options()).narrow(1, 0, U.size(-1)).expand(U.sizes()));
    if (computeUV && Vh.numel() > 0) Vh.copy_(at::eye(n, Vh.options()).narrow(0, 0, Vh.size(-2)).expand(Vh.sizes()));
    return {U, S, Vh};
  }
  Op op = TPU_OP("aten::_linalg_svd");
  op.in(a).attr(full).attr(computeUV);
  if (computeUV) op.out(U);
  op.out(S);
  if (computeUV) op.out(Vh);
  op.run([&](hlo::Builder& b, Values in, Values) {
    lowering::SvdResult r = lowering::svdJacobi(b, in[0], full);
    if (!computeUV) return ValueList{r.s};
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < r.v.rank(); ++i) perm.push_back(i);
    std::swap(perm[r.v.rank() - 1], perm[r.v.rank() - 2]);
    return ValueList{r.u, r.s, b.transpose(r.v, perm)};
  });
  return {U, S, Vh};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> svd(const at::Tensor& a, bool full, bool computeUV,
                                                   std::optional<c10::string_view> driver) {
  at::Tensor U = at::empty({0}, a.options()), S = at::empty({0}, a.options()), Vh = at::empty({0}, a.options());
  svdOut(a, full, computeUV, driver, U, S, Vh);
  return {U, S, Vh};
}

// ---- lstsq ---------------------------------------------------------------------------------------

// The minimum-norm least-squares solution through the SVD (what gelsd / gelss compute; gelsy's complete
// orthogonal factorisation gives the same solution), rank = #{s > rcond * s_max}. Which outputs are filled
// follows CPU's drivers: rank for gelsy/gelsd/gelss, singular values for gelsd/gelss, residuals when
// m > n for gels, and for gelsd/gelss when every matrix has full rank.
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> lstsqOut(
    const at::Tensor& a, const at::Tensor& bIn, std::optional<double> rcond, std::optional<c10::string_view> driverOpt,
    at::Tensor& solution, at::Tensor& residuals, at::Tensor& rank, at::Tensor& sv) {
  checkInput(a, "torch.linalg.lstsq");
  TORCH_CHECK(bIn.dim() >= 1, "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
              "(input.dim() - other.dim()) <= 1");
  TORCH_CHECK(a.scalar_type() == bIn.scalar_type(), "torch.linalg.lstsq: Expected input and other to have the same "
              "dtype, but got input's dtype ", a.scalar_type(), " and other's dtype ", bIn.scalar_type());
  std::string driver = driverOpt.has_value() ? std::string(*driverOpt) : "gelsy";
  TORCH_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  bool vec = bIn.dim() == a.dim() - 1;
  TORCH_CHECK(vec || bIn.dim() == a.dim(), "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() "
              "and (input.dim() - other.dim()) <= 1");
  at::Tensor b = vec ? bIn.unsqueeze(-1) : bIn;
  int64_t m = a.size(-2), n = a.size(-1);
  TORCH_CHECK(b.size(-2) == m, "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  auto batch = at::infer_size(batchOf(a), batchOf(b));
  at::Tensor A = a.expand(with(batch, {m, n})), B = b.expand(with(batch, {m, b.size(-1)}));
  double eps = a.scalar_type() == at::kDouble ? 2.220446049250313e-16 : 1.1920928955078125e-07;
  double rc = rcond.has_value() && *rcond > 0 ? *rcond : eps * static_cast<double>(std::max(m, n));
  auto [U, S, Vh] = at::_linalg_svd(A, false, true, std::nullopt);
  at::Tensor keep = S > (S.narrow(-1, 0, std::min<int64_t>(1, S.size(-1))) * rc);
  at::Tensor inv = at::where(keep, 1.0 / at::where(keep, S, at::ones({}, S.options())), at::zeros({}, S.options()));
  at::Tensor x = at::matmul(Vh.mT(), inv.unsqueeze(-1) * at::matmul(U.mT(), B));
  at::Tensor r = keep.sum(-1);
  at::Tensor sol = vec ? x.squeeze(-1) : x;
  at::native::resize_output(solution, sol.sizes());
  solution.copy_(sol);
  bool wantRank = driver != "gels", wantSv = driver == "gelsd" || driver == "gelss";
  at::native::resize_output(rank, wantRank ? r.sizes() : c10::IntArrayRef{0});
  if (wantRank) rank.copy_(r);
  at::native::resize_output(sv, wantSv ? S.sizes() : c10::IntArrayRef{0});
  if (wantSv) sv.copy_(S);
  bool wantRes = m > n && driver != "gelsy";
  if (wantRes && driver != "gels") wantRes = (r == n).all().cpu().item<bool>();
  if (wantRes) {
    at::Tensor res = (at::matmul(A, x) - B).square().sum(-2);
    if (vec) res = res.squeeze(-1);
    at::native::resize_output(residuals, res.sizes());
    residuals.copy_(res);
  } else {
    at::native::resize_output(residuals, {0});
  }
  return {solution, residuals, rank, sv};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_qr", qr);
  m.impl("linalg_qr.out", qrOut);
  m.impl("geqrf", geqrf);
  m.impl("geqrf.a", geqrfOut);
  m.impl("linalg_householder_product", householderProduct);
  m.impl("linalg_householder_product.out", householderProductOut);
  m.impl("ormqr", ormqr);
  m.impl("ormqr.out", ormqrOut);
  m.impl("_linalg_eigh", eigh);
  m.impl("_linalg_eigh.eigenvalues", eighOut);
  m.impl("_linalg_svd", svd);
  m.impl("_linalg_svd.U", svdOut);
  m.impl("linalg_lstsq.out", lstsqOut);
}

}  // namespace tpu::aten
