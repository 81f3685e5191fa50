#pragma once
// Special functions evaluated as ATen's CPU kernels evaluate them (ATen/native/Math.h: Cephes' rational and
// Chebyshev fits, the same branches, the same operation order), in the compute dtype, so float32 results
// round like CPU's: Bessel J0/J1/Y0/Y1, modified Bessel K0/K1 (and exp-scaled), Airy Ai, ndtri, erfcx,
// log_ndtr. The coefficient tables are in SpecialTables.h.
#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

enum class Cephes { J0, J1, Y0, Y1, K0, K1, K0e, K1e, AiryAi, Ndtri, Erfcx, LogNdtr };

hlo::Value cephes(hlo::Builder& b, Cephes op, hlo::Value x);

// erfc(t) for t >= -1/sqrt(2), relatively accurate far into the tail (erfcx(t) e^-t^2, as CPU's erfc).
hlo::Value erfcTail(hlo::Builder& b, hlo::Value t);

// Regularised incomplete gamma P(a, x) (igamma) and Q(a, x) = 1 - P (igammac) with ATen's domain rules and
// method choice (power series, Legendre's continued fraction, DLMF 8.7.3 for Q at small x). Accumulated in
// float64, as zeta is (the x^a e^-x / Gamma(a) prefactor needs it for large a); ATen's uniform asymptotic
// expansion for a > 20 near x = a is replaced by the same series / fraction, which converge there in
// float64 too (more terms).
hlo::Value igamma(hlo::Builder& b, hlo::Value a, hlo::Value x, bool complement);

}  // namespace tpu::lowering
