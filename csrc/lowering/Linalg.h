#pragma once
// Dense linear algebra over batched matrices [..., m, n]: LU with partial
// pivoting (a while loop over the columns, as LAPACK's getrf), solves through
// it, determinants, triangular solves and Cholesky (stablehlo ops).
#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::Value;

struct LUResult {
  Value lu;      // [..., m, n]: L below the diagonal (unit diagonal implied), U on and above
  Value pivots;  // S32 [..., min(m, n)], 1-based as LAPACK: row i was swapped with row pivots[i] - 1
  Value perm;    // S64 [..., m]: row i of P A is row perm[i] of A
  Value info;    // S32 [...]: 0, or the 1-based index of the first zero pivot
};
LUResult luFactor(Builder& b, Value a);
// perm (as above) from LAPACK pivots, for m rows.
Value permFromPivots(Builder& b, Value pivots, int64_t m);
// Real or complex values (complex: pivots on |re| + |im|, as LAPACK's i?amax).
// Solves A X = B (adjoint: A^H X = B; A^T X = B for real A) for square A = P^T L U given as (lu, perm); rhs [..., n, k].
Value luSolve(Builder& b, Value lu, Value perm, Value rhs, bool adjoint);
// {det, sign, logabsdet} of square A from its LU.
struct DetResult {
  Value det, sign, logabsdet;
};
DetResult luDet(Builder& b, Value lu, Value pivots);
// P [..., m, m] (A = P L U), L [..., m, k] (unit lower), U [..., k, n] from an LU.
std::tuple<Value, Value, Value> luUnpack(Builder& b, Value lu, Value perm);
// op(A) X = B (left) or X op(A) = B: A triangular [..., n, n], op(A) = A^T when transposeA (the plain transpose,
// complex values too, as torch.triangular_solve's transpose).
// conjugate: op(A) = A^H for complex A (the adjoint; A^T for real A).
Value triangularSolve(Builder& b, Value a, Value rhs, bool left, bool lower, bool transposeA, bool unitDiagonal,
                      bool conjugate = false);
// Lower (or upper: L^H) Cholesky factor of a real symmetric or complex Hermitian A (its lower triangle is read);
// {factor, info (S32: 0 or the 1-based order of the first non-positive minor)}.
std::pair<Value, Value> cholesky(Builder& b, Value a, bool upper);

}  // namespace tpu::lowering
