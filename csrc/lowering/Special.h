#pragma once
// Special functions and the pointwise ops that the OpInfo harness found missing
// (tests/opinfo): gamma family, Bessel I0/I1, logaddexp, fmax/fmin, heaviside,
// nextafter, sinc, entr, logit, shrink ops, nan_to_num, frexp, round(decimals).
// Operands arrive converted to the compute dtype and broadcast to one shape.
#include <span>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Value;

enum class Special {
  // one operand
  Lgamma, Digamma, Erfinv, I0, I0e, I1, I1e, Sinc, Entr, Angle, SphericalJ0,
  // one operand, Cephes.h: ATen's Cephes fits
  BesselJ0, BesselJ1, BesselY0, BesselY1, BesselK0, BesselK1, BesselK0e, BesselK1e, AiryAi, Ndtri, Erfcx, LogNdtr,
  // two operands
  LogAddExp, LogAddExp2, FMax, FMin, Heaviside, NextAfter, Xlog1py, Zeta, Gcd, Lcm, Igamma, Igammac,
  // (x, lambda): shrink ops; (grad, x, lambda): their backward
  HardShrink, SoftShrink, ShrinkBackward,
  // (x[, eps]) and (grad, x[, eps]): logit with optional clamping (eps operand present)
  Logit, LogitEps, LogitBackward, LogitBackwardEps,
  // (grad, x, ...) rsub: (x, y, alpha) -> y - alpha * x
  Rsub,
  // (x, n): orthogonal polynomials (Polynomial.h), in Poly's order
  ChebT, ChebU, ChebV, ChebW, ShiftT, ShiftU, ShiftV, ShiftW, HermiteH, HermiteHe, Laguerre, Legendre,
};

// `args` per the comments above; the result has the args' common shape.
Value special(Builder& b, Special op, std::span<const Value> args);
// polygamma(n, x) for a fixed order n >= 0.
Value polygamma(Builder& b, int64_t n, Value x);
// round(x * 10^d) / 10^d as PyTorch computes it (d < 0: round(x / 10^-d) * 10^-d).
Value roundDecimals(Builder& b, Value x, int64_t decimals);
// nan -> nan_, +inf -> posinf, -inf -> neginf (scalars of x's dtype).
Value nanToNum(Builder& b, Value x, Value nan, Value posinf, Value neginf);
// {mantissa, exponent (S32)} with x = mantissa * 2^exponent, |mantissa| in [0.5, 1).
std::pair<Value, Value> frexp(Builder& b, Value x);
// Clenshaw evaluation of the Chebyshev series c[0..n) at x, as Cephes' chbevl: 0.5 (b0 - b2).
Value chbevl(Builder& b, Value x, const double* c, size_t n);

}  // namespace tpu::lowering
