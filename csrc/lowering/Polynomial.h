#pragma once
// Orthogonal polynomials of integer degree n (a tensor, truncated as ATen
// does): Chebyshev T/U/V/W (and shifted), Hermite H/He, Laguerre, Legendre,
// by their three-term recurrences in a while loop up to the largest degree,
// with ATen's special cases (|x| = 1, trigonometric forms for large n).
#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

enum class Poly { ChebT, ChebU, ChebV, ChebW, ShiftT, ShiftU, ShiftV, ShiftW, HermiteH, HermiteHe, Laguerre, Legendre };

// x and n in the compute dtype, same shape.
hlo::Value orthoPoly(hlo::Builder& b, Poly kind, hlo::Value x, hlo::Value n);

}  // namespace tpu::lowering
