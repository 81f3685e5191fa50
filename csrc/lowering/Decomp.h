#pragma once
// Orthogonal decompositions over batched real matrices [..., m, n], written as while loops (StableHLO has
// no QR / eigen / SVD op and the CPU plugin has no LAPACK custom calls):
// - QR: Householder reflections as LAPACK's geqrf + orgqr (dlarfg's convention: beta = -sign(x0) |x|, no
//   reflection when the column below the diagonal is already zero, so R's diagonal signs match CPU).
// - eigh: cyclic Jacobi rotations on the symmetric matrix (read from the lower triangle, as UPLO='L'),
//   sweeps until one rotates nothing (threshold eps sqrt(|a_pp a_qq|)); eigenvalues ascending.
// - SVD: one-sided (Hestenes) Jacobi on the columns, accurate to the small singular values; U is made
//   orthonormal (also for zero singular values and full_matrices) by a Householder QR of the normalised
//   columns. Singular values descending.
#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

// {Q [..., m, m], R [..., m, n]} (complete); callers slice the reduced forms.
std::pair<hlo::Value, hlo::Value> householderQr(hlo::Builder& b, hlo::Value a);
// LAPACK's compact form (geqrf): R on and above the diagonal, each reflector's v below it (v_j = 1 implied),
// and tau [..., k] with H_j = I - tau_j v v^T; the same reflections as householderQr.
std::pair<hlo::Value, hlo::Value> householderQrCompact(hlo::Builder& b, hlo::Value a);
// Q [..., m, n] = H_0 H_1 ... H_{k-1} (first n columns) from reflectors in a [..., m, n] (below the diagonal)
// and tau [..., k] (orgqr / householder_product).
hlo::Value householderProduct(hlo::Builder& b, hlo::Value a, hlo::Value tau);
// {eigenvalues [..., n] ascending, eigenvectors [..., n, n] (columns)}.
std::pair<hlo::Value, hlo::Value> eighJacobi(hlo::Builder& b, hlo::Value a, bool lower);
// {U [..., m, m or k], S [..., k], V [..., n, n or k]} with k = min(m, n) (V, not V^T).
struct SvdResult {
  hlo::Value u, s, v;
};
SvdResult svdJacobi(hlo::Builder& b, hlo::Value a, bool full);

}  // namespace tpu::lowering
