#pragma once
// Symmetric indefinite factorisation A = L D L^T with Bunch-Kaufman pivoting, as LAPACK's sytrf (UPLO='L')
// computes it, and the solve with it (sytrs), over batched real matrices [..., n, n], as while loops over
// the columns (StableHLO has no such op; the CPU plugin no LAPACK custom calls).
// - ldlFactor: LD holds L's unit lower triangle below the diagonal (in LAPACK's form, where the
//   interchanges of later steps are not applied to earlier columns) and D's 1x1 / 2x2 blocks on and below
//   the diagonal, zeros above it; pivots are LAPACK's 1-based ipiv (k: rows k and ipiv(k) were swapped for a
//   1x1 block; -p twice: a 2x2 block whose second row was swapped with row p); info is the first zero
//   1x1 pivot (1-based), 0 when none. Each batch element pivots on its own (per-element 1x1/2x2 steps).
// - ldlSolve: X with A X = B from that LD and pivots.
#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

struct LdlResult {
  hlo::Value ld, pivots, info;  // [..., n, n] (A's dtype), [..., n] S32, [...] S32
};
LdlResult ldlFactor(hlo::Builder& b, hlo::Value a);
// ld [..., n, n], pivots [..., n] S32, rhs [..., n, k] (the same batch dims) -> [..., n, k].
hlo::Value ldlSolve(hlo::Builder& b, hlo::Value ld, hlo::Value pivots, hlo::Value rhs);

}  // namespace tpu::lowering
