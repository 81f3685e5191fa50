// Special functions and pointwise ops found missing by the OpInfo harness
// (tests/opinfo): lgamma/digamma/polygamma/erfinv/zeta, Bessel i0/i1(e),
// sinc, entr, angle, logaddexp(2), fmax/fmin, heaviside, nextafter, xlog1py,
// hard/softshrink (+backward), logit (+backward), rsub, round(decimals),
// nan_to_num, frexp, gcd/lcm, orthogonal polynomials. Each op has one rule writing into a given output; the
// functional, in-place and out= registrations allocate or reuse that output.
#include <ATen/ExpandUtils.h>
#include <ATen/Dispatch.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "csrc/lowering/Special.h"

namespace tpu::aten {
namespace {

using lowering::Special;

// Runs `body` over tensors/scalars converted to `compute` and broadcast to out's shape.

// How an op picks its result dtype from the promoted input dtype.
enum class Kind {
  IntOnly,    // integers only (gcd, lcm)
  Float,      // integers and bool promote to the default float (lgamma, sinc, ...)
  FloatOnly,  // floating inputs only (CPU raises NotImplementedError for the others)
  Same,       // the promoted dtype (fmax, heaviside, ...)
};

c10::ScalarType resultOf(Kind k, c10::ScalarType promoted, const char* name, bool complexOk = false) {
  // Of this family only sinc's lowering is written for complex values (sin(pi z) / (pi z), 1 at 0).
  TORCH_CHECK_NOT_IMPLEMENTED(complexOk || !c10::isComplexType(promoted), "\"", name, "\" is not implemented for '",
                              promoted, "' on tpu");
  if (k == Kind::Same) return promoted;
  if (k == Kind::IntOnly) {
    TORCH_CHECK_NOT_IMPLEMENTED(c10::isIntegralType(promoted, false), "\"", name, "\" not implemented for '",
                                promoted, "'");
    return promoted;
  }
  if (k == Kind::FloatOnly)
    TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(promoted), "\"", name, "\" not implemented for '", promoted, "'");
  return c10::isIntegralType(promoted, true) ? defaultFloat() : promoted;
}

std::vector<int64_t> shapeOf(const std::vector<Arg>& args) {
  std::vector<int64_t> shape;
  for (const Arg& a : args)
    if (a.isTensor()) shape = at::infer_size(shape, a.tensor.sizes());
  return shape;
}

c10::ScalarType promote(const std::vector<Arg>& args, size_t tensorArgs) {
  at::native::ResultTypeState st;
  for (size_t i = 0; i < tensorArgs; ++i) {
    if (args[i].isTensor()) st = at::native::update_result_type_state(args[i].tensor, st);
    else st = at::native::update_result_type_state(args[i].scalar, st);
  }
  return at::native::result_type(st);
}

const at::Tensor& firstTensor(const std::vector<Arg>& args) {
  for (const Arg& a : args)
    if (a.isTensor()) return a.tensor;
  TORCH_CHECK(false, "tpu: expected a tensor argument");
}

// One op: `K` over `args` (the first `tensorArgs` decide the dtype; the rest are scalar parameters).
template <Special K, Kind P>
struct Rule {
  static void run(const char* name, const std::vector<Arg>& args, const at::Tensor& out, c10::ScalarType result) {
    runPointwise(TPU_OP(name), args, out, opmathType(result), [](hlo::Builder& b, std::vector<hlo::Value>& v) {
      return lowering::special(b, K, v);
    });
  }
  static at::Tensor functional(const char* name, const std::vector<Arg>& args, size_t tensorArgs) {
    c10::ScalarType result = resultOf(P, promote(args, tensorArgs), name, K == Special::Sinc);
    std::vector<const Arg*> operands;
    for (const Arg& a : args) operands.push_back(&a);
    at::Tensor out = emptyPointwise(operands, shapeOf(args), firstTensor(args).options().dtype(result));
    run(name, args, out, result);
    return out;
  }
  static at::Tensor& inplace(const char* name, at::Tensor& self, const std::vector<Arg>& args, size_t tensorArgs) {
    c10::ScalarType result = resultOf(P, promote(args, tensorArgs), name, K == Special::Sinc);
    checkInplace(name, self, shapeOf(args), result);
    run(name, args, self, result);
    return self;
  }
  static at::Tensor& out(const char* name, const std::vector<Arg>& args, size_t tensorArgs, at::Tensor& out) {
    c10::ScalarType result = resultOf(P, promote(args, tensorArgs), name, K == Special::Sinc);
    prepareOut(name, out, shapeOf(args), result);
    run(name, args, out, result);
    return out;
  }
};

// ---- unary ops: functional, in-place and out= from one rule ------------------

template <Special K, Kind P>
struct Unary {
  static constexpr const char* name = "special unary op";
  static at::Tensor f(const at::Tensor& self) { return Rule<K, P>::functional(name, {Arg::of(self)}, 1); }
  static at::Tensor& i(at::Tensor& self) { return Rule<K, P>::inplace(name, self, {Arg::of(self)}, 1); }
  static at::Tensor& o(const at::Tensor& self, at::Tensor& out) {
    return Rule<K, P>::out(name, {Arg::of(self)}, 1, out);
  }
};

template <Special K, Kind P>
struct Binary {
  static constexpr const char* name = "special binary op";
  static at::Tensor f(const at::Tensor& a, const at::Tensor& b) {
    return Rule<K, P>::functional(name, {Arg::of(a), Arg::of(b)}, 2);
  }
  static at::Tensor& i(at::Tensor& a, const at::Tensor& b) {
    return Rule<K, P>::inplace(name, a, {Arg::of(a), Arg::of(b)}, 2);
  }
  static at::Tensor& o(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
    return Rule<K, P>::out(name, {Arg::of(a), Arg::of(b)}, 2, out);
  }
};

// heaviside requires one dtype for both inputs, as on CPU.
template <class F, class... T>
decltype(auto) sameDtype(F f, const at::Tensor& a, const at::Tensor& b, T&&... rest) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "heaviside is not yet implemented for tensors with different dtypes");
  return f(a, b, std::forward<T>(rest)...);
}
using Heaviside = Binary<Special::Heaviside, Kind::Same>;
at::Tensor heaviside(const at::Tensor& a, const at::Tensor& b) { return sameDtype(&Heaviside::f, a, b); }
at::Tensor& heaviside_(at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "heaviside is not yet implemented for tensors with different dtypes");
  return Heaviside::i(a, b);
}
at::Tensor& heavisideOut(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return sameDtype(&Heaviside::o, a, b, out);
}

// ---- shrink ops and their backward -----------------------------------------------

template <Special K>
struct Shrink {
  static at::Tensor f(const at::Tensor& self, const c10::Scalar& l) {
    return Rule<K, Kind::FloatOnly>::functional("shrink", {Arg::of(self), Arg::of(l)}, 1);
  }
  static at::Tensor& o(const at::Tensor& self, const c10::Scalar& l, at::Tensor& out) {
    return Rule<K, Kind::FloatOnly>::out("shrink", {Arg::of(self), Arg::of(l)}, 1, out);
  }
};
using ShrinkBack = Rule<Special::ShrinkBackward, Kind::FloatOnly>;
at::Tensor shrinkBackward(const at::Tensor& g, const at::Tensor& self, const c10::Scalar& l) {
  return ShrinkBack::functional("shrink_backward", {Arg::of(g), Arg::of(self), Arg::of(l)}, 2);
}
at::Tensor& shrinkBackwardOut(const at::Tensor& g, const at::Tensor& self, const c10::Scalar& l, at::Tensor& out) {
  return ShrinkBack::out("shrink_backward", {Arg::of(g), Arg::of(self), Arg::of(l)}, 2, out);
}

// ---- logit (optional eps: a different program, its value an operand) ------------

std::vector<Arg> withEps(std::vector<Arg> args, std::optional<double> eps) {
  if (eps) args.push_back(Arg::of(c10::Scalar(*eps)));
  return args;
}
at::Tensor logit(const at::Tensor& self, std::optional<double> eps) {
  auto args = withEps({Arg::of(self)}, eps);
  return eps ? Rule<Special::LogitEps, Kind::Float>::functional("logit", args, 1)
             : Rule<Special::Logit, Kind::Float>::functional("logit", args, 1);
}
at::Tensor& logit_(at::Tensor& self, std::optional<double> eps) {
  auto args = withEps({Arg::of(self)}, eps);
  return eps ? Rule<Special::LogitEps, Kind::Float>::inplace("logit_", self, args, 1)
             : Rule<Special::Logit, Kind::Float>::inplace("logit_", self, args, 1);
}
at::Tensor& logitOut(const at::Tensor& self, std::optional<double> eps, at::Tensor& out) {
  auto args = withEps({Arg::of(self)}, eps);
  return eps ? Rule<Special::LogitEps, Kind::Float>::out("logit", args, 1, out)
             : Rule<Special::Logit, Kind::Float>::out("logit", args, 1, out);
}
at::Tensor& logitBackwardOut(const at::Tensor& g, const at::Tensor& self, std::optional<double> eps,
                             at::Tensor& out) {
  auto args = withEps({Arg::of(g), Arg::of(self)}, eps);
  return eps ? Rule<Special::LogitBackwardEps, Kind::Float>::out("logit_backward", args, 2, out)
             : Rule<Special::LogitBackward, Kind::Float>::out("logit_backward", args, 2, out);
}
at::Tensor logitBackward(const at::Tensor& g, const at::Tensor& self, std::optional<double> eps) {
  c10::ScalarType t = at::result_type(g, self);
  at::Tensor out = at::empty(at::infer_size(g.sizes(), self.sizes()), g.options().dtype(t));
  return logitBackwardOut(g, self, eps, out);
}

// ---- rsub: other - alpha * self ------------------------------------------------

at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  std::vector<Arg> args{Arg::of(self), Arg::of(other), Arg::of(alpha)};
  TORCH_CHECK(promote(args, 2) != c10::kBool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
              "`logical_xor()` operator instead.");
  // Complex: sub's complex lowering (other - alpha * self) with the same promotion.
  if (c10::isComplexType(promote(args, 2)) || alpha.isComplex()) return at::sub(other, self, alpha);
  return Rule<Special::Rsub, Kind::Same>::functional("rsub", args, 2);
}

// ---- polygamma (order n: part of the program) ------------------------------------

at::Tensor& polygammaOut(int64_t n, const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  c10::ScalarType result = resultOf(Kind::Float, self.scalar_type(), "polygamma");
  prepareOut("polygamma", out, self.sizes(), result);
  runPointwise(TPU_OP("aten::polygamma").attr(n), {Arg::of(self)}, out, opmathType(result),
          [n](hlo::Builder& b, std::vector<hlo::Value>& v) { return lowering::polygamma(b, n, v[0]); });
  return out;
}
at::Tensor polygamma(int64_t n, const at::Tensor& self) {
  Arg x = Arg::of(self);
  at::Tensor out = emptyPointwise({&x}, self.sizes(), self.options().dtype(resultOf(Kind::Float, self.scalar_type(), "")));
  return polygammaOut(n, self, out);
}

// ---- round(decimals), nan_to_num, frexp ------------------------------------------

at::Tensor& roundDecimalsOut(const at::Tensor& self, int64_t decimals, at::Tensor& out) {
  prepareOut("round", out, self.sizes(), self.scalar_type());
  if (!c10::isFloatingType(self.scalar_type())) {
    TORCH_CHECK(decimals == 0, "round_decimals not implemented for '", self.scalar_type(), "'");
    if (!out.is_same(self)) out.copy_(self);
    return out;
  }
  // float16/bfloat16 round every step to their own precision on CPU: compute in that dtype too.
  runPointwise(TPU_OP("aten::round.decimals").attr(decimals), {Arg::of(self)}, out, self.scalar_type(),
          [decimals](hlo::Builder& b, std::vector<hlo::Value>& v) {
            return lowering::roundDecimals(b, v[0], decimals);
          });
  return out;
}
at::Tensor roundDecimals(const at::Tensor& self, int64_t decimals) {
  Arg x = Arg::of(self);
  at::Tensor out = emptyPointwise({&x}, self.sizes(), self.options());
  return roundDecimalsOut(self, decimals, out);
}
at::Tensor& roundDecimals_(at::Tensor& self, int64_t decimals) { return roundDecimalsOut(self, decimals, self); }

at::Tensor& nanToNumOut(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf, at::Tensor& out) {
  c10::ScalarType t = self.scalar_type();
  TORCH_CHECK(out.scalar_type() == t, "nan_to_num: dtype of out: ", out.scalar_type(),
              " should be same as input: ", t);
  at::native::resize_output(out, self.sizes());
  if (!c10::isFloatingType(t)) {
    if (!out.is_same(self)) out.copy_(self);
    return out;
  }
  double hi = 0, lo = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "nan_to_num", [&] {
    hi = static_cast<double>(std::numeric_limits<scalar_t>::max());
    lo = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
  });
  // Computed in the tensor's own dtype: the replacement values are of that dtype.
  std::vector<Arg> args{Arg::of(self), Arg::of(c10::Scalar(nan.value_or(0.0))),
                        Arg::of(c10::Scalar(posinf.value_or(hi))), Arg::of(c10::Scalar(neginf.value_or(lo)))};
  runPointwise(TPU_OP("aten::nan_to_num"), args, out, t, [](hlo::Builder& b, std::vector<hlo::Value>& v) {
    return lowering::nanToNum(b, v[0], v[1], v[2], v[3]);
  });
  return out;
}
at::Tensor& nanToNum_(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                      std::optional<double> neginf) {
  return nanToNumOut(self, nan, posinf, neginf, self);
}

std::tuple<at::Tensor&, at::Tensor&> frexpOut(const at::Tensor& self, at::Tensor& mantissa, at::Tensor& exponent) {
  TORCH_CHECK(c10::isFloatingType(self.scalar_type()),
              "torch.frexp() only supports floating-point dtypes");
  TORCH_CHECK(mantissa.dtype() == self.dtype(), "torch.frexp() expects mantissa to have dtype ", self.dtype(),
              " but got ", mantissa.dtype());
  TORCH_CHECK(exponent.dtype() == at::kInt, "torch.frexp() expects exponent to have int dtype but got ",
              exponent.dtype());
  at::native::resize_output(mantissa, self.sizes());
  at::native::resize_output(exponent, self.sizes());
  if (self.numel() == 0) return {mantissa, exponent};
  TPU_OP("aten::frexp").in(self).out(mantissa).out(exponent).run([](hlo::Builder& b, Values in, Values) {
    auto [m, e] = lowering::frexp(b, in[0]);
    return ValueList{m, e};
  });
  return {mantissa, exponent};
}

}  // namespace

#define TPU_SPECIAL_UNARY(name, K, P)                          \
  m.impl(name, &Unary<Special::K, Kind::P>::f);                \
  m.impl(name ".out", &Unary<Special::K, Kind::P>::o);
#define TPU_SPECIAL_UNARY_INPLACE(name, K, P) \
  TPU_SPECIAL_UNARY(name, K, P)               \
  m.impl(name "_", &Unary<Special::K, Kind::P>::i);
#define TPU_SPECIAL_BINARY(name, K, P)                         \
  m.impl(name, &Binary<Special::K, Kind::P>::f);               \
  m.impl(name ".out", &Binary<Special::K, Kind::P>::o);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  TPU_SPECIAL_UNARY_INPLACE("lgamma", Lgamma, Float)
  TPU_SPECIAL_UNARY_INPLACE("digamma", Digamma, Float)
  TPU_SPECIAL_UNARY_INPLACE("erfinv", Erfinv, Float)
  TPU_SPECIAL_UNARY_INPLACE("i0", I0, Float)
  TPU_SPECIAL_UNARY_INPLACE("sinc", Sinc, Float)
  TPU_SPECIAL_UNARY("special_i0e", I0e, Float)
  TPU_SPECIAL_UNARY("special_i1", I1, Float)
  TPU_SPECIAL_UNARY("special_i1e", I1e, Float)
  TPU_SPECIAL_UNARY("special_entr", Entr, Float)
  // angle: ComplexKernels.cpp (real and complex inputs).
  TPU_SPECIAL_UNARY("special_modified_bessel_i0", I0, Float)
  TPU_SPECIAL_UNARY("special_modified_bessel_i1", I1, Float)
  TPU_SPECIAL_UNARY("special_spherical_bessel_j0", SphericalJ0, Float)
  TPU_SPECIAL_UNARY("special_bessel_j0", BesselJ0, Float)
  TPU_SPECIAL_UNARY("special_bessel_j1", BesselJ1, Float)
  TPU_SPECIAL_UNARY("special_bessel_y0", BesselY0, Float)
  TPU_SPECIAL_UNARY("special_bessel_y1", BesselY1, Float)
  TPU_SPECIAL_UNARY("special_modified_bessel_k0", BesselK0, Float)
  TPU_SPECIAL_UNARY("special_modified_bessel_k1", BesselK1, Float)
  TPU_SPECIAL_UNARY("special_scaled_modified_bessel_k0", BesselK0e, Float)
  TPU_SPECIAL_UNARY("special_scaled_modified_bessel_k1", BesselK1e, Float)
  TPU_SPECIAL_UNARY("special_airy_ai", AiryAi, Float)
  TPU_SPECIAL_UNARY("special_ndtri", Ndtri, Float)
  TPU_SPECIAL_UNARY("special_erfcx", Erfcx, Float)
  TPU_SPECIAL_UNARY("special_log_ndtr", LogNdtr, Float)
  TPU_SPECIAL_BINARY("logaddexp", LogAddExp, FloatOnly)
  TPU_SPECIAL_BINARY("logaddexp2", LogAddExp2, FloatOnly)
  TPU_SPECIAL_BINARY("fmax", FMax, Same)
  TPU_SPECIAL_BINARY("fmin", FMin, Same)
  TPU_SPECIAL_BINARY("special_xlog1py", Xlog1py, Float)
  TPU_SPECIAL_BINARY("special_zeta", Zeta, Float)
  TPU_SPECIAL_BINARY("nextafter", NextAfter, FloatOnly)
  TPU_SPECIAL_BINARY("igamma", Igamma, FloatOnly)
  m.impl("igamma_", &Binary<Special::Igamma, Kind::FloatOnly>::i);
  TPU_SPECIAL_BINARY("igammac", Igammac, FloatOnly)
  m.impl("igammac_", &Binary<Special::Igammac, Kind::FloatOnly>::i);
  TPU_SPECIAL_BINARY("gcd", Gcd, IntOnly)
  m.impl("gcd_", &Binary<Special::Gcd, Kind::IntOnly>::i);
  TPU_SPECIAL_BINARY("lcm", Lcm, IntOnly)
  m.impl("lcm_", &Binary<Special::Lcm, Kind::IntOnly>::i);
  TPU_SPECIAL_BINARY("special_chebyshev_polynomial_t", ChebT, Float)
  TPU_SPECIAL_BINARY("special_chebyshev_polynomial_u", ChebU, Float)
  TPU_SPECIAL_BINARY("special_chebyshev_polynomial_v", ChebV, Float)
  TPU_SPECIAL_BINARY("special_chebyshev_polynomial_w", ChebW, Float)
  TPU_SPECIAL_BINARY("special_shifted_chebyshev_polynomial_t", ShiftT, Float)
  TPU_SPECIAL_BINARY("special_shifted_chebyshev_polynomial_u", ShiftU, Float)
  TPU_SPECIAL_BINARY("special_shifted_chebyshev_polynomial_v", ShiftV, Float)
  TPU_SPECIAL_BINARY("special_shifted_chebyshev_polynomial_w", ShiftW, Float)
  TPU_SPECIAL_BINARY("special_hermite_polynomial_h", HermiteH, Float)
  TPU_SPECIAL_BINARY("special_hermite_polynomial_he", HermiteHe, Float)
  TPU_SPECIAL_BINARY("special_laguerre_polynomial_l", Laguerre, Float)
  TPU_SPECIAL_BINARY("special_legendre_polynomial_p", Legendre, Float)
  m.impl("nextafter_", &Binary<Special::NextAfter, Kind::FloatOnly>::i);
  m.impl("heaviside", heaviside);
  m.impl("heaviside_", heaviside_);
  m.impl("heaviside.out", heavisideOut);
  m.impl("hardshrink", &Shrink<Special::HardShrink>::f);
  m.impl("hardshrink.out", &Shrink<Special::HardShrink>::o);
  m.impl("softshrink", &Shrink<Special::SoftShrink>::f);
  m.impl("softshrink.out", &Shrink<Special::SoftShrink>::o);
  m.impl("hardshrink_backward", shrinkBackward);
  m.impl("hardshrink_backward.grad_input", shrinkBackwardOut);
  m.impl("softshrink_backward", shrinkBackward);
  m.impl("softshrink_backward.grad_input", shrinkBackwardOut);
  m.impl("logit", logit);
  m.impl("logit_", logit_);
  m.impl("logit.out", logitOut);
  m.impl("logit_backward", logitBackward);
  m.impl("logit_backward.grad_input", logitBackwardOut);
  m.impl("rsub.Tensor", rsub);
  m.impl("polygamma", polygamma);
  m.impl("polygamma.out", polygammaOut);
  m.impl("round.decimals", roundDecimals);
  m.impl("round_.decimals", roundDecimals_);
  m.impl("round.decimals_out", roundDecimalsOut);
  m.impl("nan_to_num.out", nanToNumOut);
  m.impl("nan_to_num_", nanToNum_);
  m.impl("frexp.Tensor_out", frexpOut);
}

}  // namespace tpu::aten
