// Activations and their backward ops, glu, and the ternary pointwise ops
// (lerp, addcmul, addcdiv) plus floor_divide. Functional, in-place and out=
// variants of each op share one rule; scalar parameters are device operands.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "csrc/lowering/Activation.h"

namespace tpu::aten {
namespace {

using lowering::Activation;
using lowering::ActivationGrad;
using Scalars = std::vector<c10::Scalar>;


// Which dtypes an op accepts (CPU raises NotImplementedError for the others).
enum class Types { Float, NumericNoBool };

void checkTypes(const char* name, Types types, c10::ScalarType t) {
  bool ok = types == Types::Float ? c10::isFloatingType(t) : t != c10::kBool && !c10::isComplexType(t);
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", name, "\" not implemented for '", t, "'");
}

std::vector<Arg> withScalars(std::vector<Arg> args, const Scalars& p) {
  for (const c10::Scalar& s : p) args.push_back(Arg::of(s));
  return args;
}

// ---- forward activations ---------------------------------------------------

template <Activation K>
struct Act {
  static void run(const char* name, const at::Tensor& self, const Scalars& p, const at::Tensor& out) {
    runPointwise(TPU_OP(name), withScalars({Arg::of(self)}, p), out, opmathType(self.scalar_type()),
            [](hlo::Builder& b, std::vector<hlo::Value>& v) {
              return lowering::activation(b, K, v[0], std::span<const hlo::Value>(v).subspan(1));
            });
  }
  static at::Tensor functional(const char* name, Types t, const at::Tensor& self, const Scalars& p) {
    checkTypes(name, t, self.scalar_type());
    Arg x = Arg::of(self);
    at::Tensor out = emptyPointwise({&x}, self.sizes(), self.options());
    run(name, self, p, out);
    return out;
  }
  static at::Tensor& inplace(const char* name, Types t, at::Tensor& self, const Scalars& p) {
    checkTypes(name, t, self.scalar_type());
    run(name, self, p, self);
    return self;
  }
  static at::Tensor& out(const char* name, Types t, const at::Tensor& self, const Scalars& p, at::Tensor& out) {
    checkTypes(name, t, self.scalar_type());
    prepareOut(name, out, self.sizes(), self.scalar_type());
    run(name, self, p, out);
    return out;
  }
};

bool geluTanh(c10::string_view approximate) {
  if (approximate == "none") return false;
  TORCH_CHECK(approximate == "tanh", "approximate argument must be either none or tanh.");
  return true;
}

at::Tensor gelu(const at::Tensor& self, c10::string_view a) {
  return geluTanh(a) ? Act<Activation::GeluTanh>::functional("gelu", Types::Float, self, {})
                     : Act<Activation::Gelu>::functional("gelu", Types::Float, self, {});
}
at::Tensor& gelu_(at::Tensor& self, c10::string_view a) {
  return geluTanh(a) ? Act<Activation::GeluTanh>::inplace("gelu_", Types::Float, self, {})
                     : Act<Activation::Gelu>::inplace("gelu_", Types::Float, self, {});
}
at::Tensor& geluOut(const at::Tensor& self, c10::string_view a, at::Tensor& out) {
  return geluTanh(a) ? Act<Activation::GeluTanh>::out("gelu", Types::Float, self, {}, out)
                     : Act<Activation::Gelu>::out("gelu", Types::Float, self, {}, out);
}

using Threshold = Act<Activation::Threshold>;
at::Tensor threshold(const at::Tensor& self, const c10::Scalar& th, const c10::Scalar& value) {
  return Threshold::functional("threshold", Types::NumericNoBool, self, {th, value});
}
at::Tensor& threshold_(at::Tensor& self, const c10::Scalar& th, const c10::Scalar& value) {
  return Threshold::inplace("threshold_", Types::NumericNoBool, self, {th, value});
}
at::Tensor& thresholdOut(const at::Tensor& self, const c10::Scalar& th, const c10::Scalar& value, at::Tensor& out) {
  return Threshold::out("threshold", Types::NumericNoBool, self, {th, value}, out);
}

using LeakyRelu = Act<Activation::LeakyRelu>;
at::Tensor leakyRelu(const at::Tensor& self, const c10::Scalar& slope) {
  return LeakyRelu::functional("leaky_relu", Types::Float, self, {slope});
}
at::Tensor& leakyRelu_(at::Tensor& self, const c10::Scalar& slope) {
  return LeakyRelu::inplace("leaky_relu_", Types::Float, self, {slope});
}
at::Tensor& leakyReluOut(const at::Tensor& self, const c10::Scalar& slope, at::Tensor& out) {
  return LeakyRelu::out("leaky_relu", Types::Float, self, {slope}, out);
}

// elu's parameters as the lowering takes them: {alpha * scale, scale, input_scale}.
Scalars eluParams(const c10::Scalar& alpha, const c10::Scalar& scale, const c10::Scalar& inputScale) {
  return {c10::Scalar(alpha.toDouble() * scale.toDouble()), scale, inputScale};
}
using Elu = Act<Activation::Elu>;
at::Tensor elu(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale, const c10::Scalar& is) {
  return Elu::functional("elu", Types::Float, self, eluParams(alpha, scale, is));
}
at::Tensor& elu_(at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale, const c10::Scalar& is) {
  return Elu::inplace("elu_", Types::Float, self, eluParams(alpha, scale, is));
}
at::Tensor& eluOut(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale, const c10::Scalar& is,
                   at::Tensor& out) {
  return Elu::out("elu", Types::Float, self, eluParams(alpha, scale, is), out);
}

using Softplus = Act<Activation::Softplus>;
at::Tensor softplus(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& th) {
  return Softplus::functional("softplus", Types::Float, self, {beta, th});
}
at::Tensor& softplusOut(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& th, at::Tensor& out) {
  return Softplus::out("softplus", Types::Float, self, {beta, th}, out);
}

// hardtanh keeps integer limits integral (no type promotion), as CPU does.
Scalars hardtanhLimits(const at::Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  if (!c10::isIntegralType(self.scalar_type(), false)) return {lo, hi};
  int64_t l = lo.toLong(), h = hi.toLong();
  TORCH_CHECK(self.scalar_type() != at::kByte || (l >= 0 && h >= 0),
              "cannot do hardtanh on an unsigned type with negative limits");
  return {c10::Scalar(l), c10::Scalar(h)};
}
using Hardtanh = Act<Activation::Hardtanh>;
at::Tensor hardtanh(const at::Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi) {
  return Hardtanh::functional("hardtanh", Types::NumericNoBool, self, hardtanhLimits(self, lo, hi));
}
at::Tensor& hardtanh_(at::Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi) {
  return Hardtanh::inplace("hardtanh_", Types::NumericNoBool, self, hardtanhLimits(self, lo, hi));
}
at::Tensor& hardtanhOut(const at::Tensor& self, const c10::Scalar& lo, const c10::Scalar& hi, at::Tensor& out) {
  return Hardtanh::out("hardtanh", Types::NumericNoBool, self, hardtanhLimits(self, lo, hi), out);
}

// Parameterless float activations: functional, in-place and out= by name.
template <Activation K>
struct Plain {
  static constexpr const char* name() {
    return K == Activation::Hardsigmoid ? "hardsigmoid" : K == Activation::Hardswish ? "hardswish" : "mish";
  }
  static at::Tensor functional(const at::Tensor& self) { return Act<K>::functional(name(), Types::Float, self, {}); }
  static at::Tensor& inplace(at::Tensor& self) { return Act<K>::inplace(name(), Types::Float, self, {}); }
  static at::Tensor& out(const at::Tensor& self, at::Tensor& out) {
    return Act<K>::out(name(), Types::Float, self, {}, out);
  }
};

std::tuple<at::Tensor&, at::Tensor&> logSigmoidForwardOut(const at::Tensor& self, at::Tensor& output,
                                                          at::Tensor& buffer) {
  Act<Activation::LogSigmoid>::out("log_sigmoid_forward", Types::Float, self, {}, output);
  // The buffer only feeds CPU's backward; tpu's backward recomputes from self.
  at::native::resize_output(buffer, self.sizes());
  return {output, buffer};
}
std::tuple<at::Tensor, at::Tensor> logSigmoidForward(const at::Tensor& self) {
  at::Tensor output = Act<Activation::LogSigmoid>::functional("log_sigmoid_forward", Types::Float, self, {});
  return {output, at::empty_like(self)};
}

// ---- backward ops ----------------------------------------------------------

template <ActivationGrad K>
struct Grad {
  static void run(const char* name, const Arg& g, const Arg& x, const Scalars& p, const at::Tensor& out,
                  c10::ScalarType result) {
    runPointwise(TPU_OP(name), withScalars({g, x}, p), out, opmathType(result),
            [](hlo::Builder& b, std::vector<hlo::Value>& v) {
              return lowering::activationGrad(b, K, v[0], v[1], std::span<const hlo::Value>(v).subspan(2));
            });
  }
  static at::Tensor functional(const char* name, Types t, const at::Tensor& grad, const at::Tensor& self,
                               const Scalars& p) {
    Arg g = Arg::of(grad), x = Arg::of(self);
    auto result = resultType({&g, &x});
    checkTypes(name, t, result);
    at::Tensor out = emptyPointwise({&g, &x}, broadcastShape({&g, &x}), (g.isTensor() ? grad : self).options().dtype(result));
    run(name, g, x, p, out, result);
    return out;
  }
  static at::Tensor& out(const char* name, Types t, const at::Tensor& grad, const at::Tensor& self,
                         const Scalars& p, at::Tensor& out) {
    Arg g = Arg::of(grad), x = Arg::of(self);
    auto result = resultType({&g, &x});
    checkTypes(name, t, result);
    prepareOut(name, out, broadcastShape({&g, &x}), result);
    run(name, g, x, p, out, result);
    return out;
  }
};

at::Tensor geluBackward(const at::Tensor& g, const at::Tensor& x, c10::string_view a) {
  return geluTanh(a) ? Grad<ActivationGrad::GeluTanh>::functional("gelu_backward", Types::Float, g, x, {})
                     : Grad<ActivationGrad::Gelu>::functional("gelu_backward", Types::Float, g, x, {});
}
at::Tensor& geluBackwardOut(const at::Tensor& g, const at::Tensor& x, c10::string_view a, at::Tensor& out) {
  return geluTanh(a) ? Grad<ActivationGrad::GeluTanh>::out("gelu_backward", Types::Float, g, x, {}, out)
                     : Grad<ActivationGrad::Gelu>::out("gelu_backward", Types::Float, g, x, {}, out);
}

// Backward ops of the form (grad_output, self) -> grad_input.
template <ActivationGrad K>
struct PlainGrad {
  static constexpr const char* name() {
    switch (K) {
      case ActivationGrad::Silu: return "silu_backward";
      case ActivationGrad::Sigmoid: return "sigmoid_backward";
      case ActivationGrad::Tanh: return "tanh_backward";
      case ActivationGrad::Hardsigmoid: return "hardsigmoid_backward";
      case ActivationGrad::Hardswish: return "hardswish_backward";
      case ActivationGrad::Mish: return "mish_backward";
      default: return "log_sigmoid_backward";
    }
  }
  static at::Tensor functional(const at::Tensor& g, const at::Tensor& x) {
    return Grad<K>::functional(name(), Types::Float, g, x, {});
  }
  static at::Tensor& out(const at::Tensor& g, const at::Tensor& x, at::Tensor& out) {
    return Grad<K>::out(name(), Types::Float, g, x, {}, out);
  }
};

at::Tensor logSigmoidBackward(const at::Tensor& g, const at::Tensor& x, const at::Tensor&) {
  return PlainGrad<ActivationGrad::LogSigmoid>::functional(g, x);
}
at::Tensor& logSigmoidBackwardOut(const at::Tensor& g, const at::Tensor& x, const at::Tensor&, at::Tensor& out) {
  return PlainGrad<ActivationGrad::LogSigmoid>::out(g, x, out);
}

using ThresholdGrad = Grad<ActivationGrad::Threshold>;
at::Tensor thresholdBackward(const at::Tensor& g, const at::Tensor& x, const c10::Scalar& th) {
  return ThresholdGrad::functional("threshold_backward", Types::NumericNoBool, g, x, {th});
}
at::Tensor& thresholdBackwardOut(const at::Tensor& g, const at::Tensor& x, const c10::Scalar& th, at::Tensor& out) {
  return ThresholdGrad::out("threshold_backward", Types::NumericNoBool, g, x, {th}, out);
}

void checkLeakyReluBackward(const c10::Scalar& slope, bool selfIsResult) {
  TORCH_CHECK(!selfIsResult || slope.toDouble() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, "
              "please call out-of-place version instead. File an issue at https://github.com/pytorch/pytorch if you "
              "do require supporting in-place leakRelu backward calculation with negative slope");
}
using LeakyReluGrad = Grad<ActivationGrad::LeakyRelu>;
at::Tensor leakyReluBackward(const at::Tensor& g, const at::Tensor& x, const c10::Scalar& slope, bool isResult) {
  checkLeakyReluBackward(slope, isResult);
  return LeakyReluGrad::functional("leaky_relu_backward", Types::Float, g, x, {slope});
}
at::Tensor& leakyReluBackwardOut(const at::Tensor& g, const at::Tensor& x, const c10::Scalar& slope, bool isResult,
                                 at::Tensor& out) {
  checkLeakyReluBackward(slope, isResult);
  return LeakyReluGrad::out("leaky_relu_backward", Types::Float, g, x, {slope}, out);
}

void checkEluBackward(const c10::Scalar& alpha, bool isResult) {
  TORCH_CHECK(!isResult || alpha.toDouble() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, "
              "please call out-of-place version instead.");
}
at::Tensor eluBackward(const at::Tensor& g, const c10::Scalar& alpha, const c10::Scalar& scale,
                       const c10::Scalar& is, bool isResult, const at::Tensor& x) {
  checkEluBackward(alpha, isResult);
  Scalars p = eluParams(alpha, scale, is);
  return isResult ? Grad<ActivationGrad::EluResult>::functional("elu_backward", Types::Float, g, x, p)
                  : Grad<ActivationGrad::Elu>::functional("elu_backward", Types::Float, g, x, p);
}
at::Tensor& eluBackwardOut(const at::Tensor& g, const c10::Scalar& alpha, const c10::Scalar& scale,
                           const c10::Scalar& is, bool isResult, const at::Tensor& x, at::Tensor& out) {
  checkEluBackward(alpha, isResult);
  Scalars p = eluParams(alpha, scale, is);
  return isResult ? Grad<ActivationGrad::EluResult>::out("elu_backward", Types::Float, g, x, p, out)
                  : Grad<ActivationGrad::Elu>::out("elu_backward", Types::Float, g, x, p, out);
}

using SoftplusGrad = Grad<ActivationGrad::Softplus>;
at::Tensor softplusBackward(const at::Tensor& g, const at::Tensor& x, const c10::Scalar& beta,
                            const c10::Scalar& th) {
  return SoftplusGrad::functional("softplus_backward", Types::Float, g, x, {beta, th});
}
at::Tensor& softplusBackwardOut(const at::Tensor& g, const at::Tensor& x, const c10::Scalar& beta,
                                const c10::Scalar& th, at::Tensor& out) {
  return SoftplusGrad::out("softplus_backward", Types::Float, g, x, {beta, th}, out);
}

using HardtanhGrad = Grad<ActivationGrad::Hardtanh>;
at::Tensor hardtanhBackward(const at::Tensor& g, const at::Tensor& x, const c10::Scalar& lo, const c10::Scalar& hi) {
  return HardtanhGrad::functional("hardtanh_backward", Types::Float, g, x, {lo, hi});
}
at::Tensor& hardtanhBackwardOut(const at::Tensor& g, const at::Tensor& x, const c10::Scalar& lo,
                                const c10::Scalar& hi, at::Tensor& out) {
  return HardtanhGrad::out("hardtanh_backward", Types::Float, g, x, {lo, hi}, out);
}

// ---- glu -------------------------------------------------------------------

int64_t gluDim(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ",
              self.size(d));
  return d;
}

void runGlu(const at::Tensor& self, int64_t dim, const at::Tensor& out) {
  if (out.numel() == 0) return;
  hlo::DType compute = toHlo(opmathType(self.scalar_type()));
  TPU_OP("aten::glu").in(self).attr(dim).out(out).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::glu(b, b.convert(in[0], compute), dim)};
  });
}
at::Tensor& gluOut(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  int64_t d = gluDim(self, dim);
  checkTypes("glu", Types::Float, self.scalar_type());
  std::vector<int64_t> shape = self.sizes().vec();
  shape[d] /= 2;
  prepareOut("glu", out, shape, self.scalar_type());
  runGlu(self, d, out);
  return out;
}
at::Tensor glu(const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options());
  return gluOut(self, dim, out);
}

at::Tensor& gluBackwardOut(const at::Tensor& grad, const at::Tensor& self, int64_t dim, at::Tensor& out) {
  int64_t d = gluDim(self, dim);
  checkTypes("glu_backward", Types::Float, self.scalar_type());
  std::vector<int64_t> half = self.sizes().vec();
  half[d] /= 2;
  TORCH_CHECK(grad.sizes().equals(half), "glu_backward: grad_output of shape ", grad.sizes(),
              " does not match the halved input shape ", c10::IntArrayRef(half));
  prepareOut("glu_backward", out, self.sizes(), self.scalar_type());
  if (out.numel() == 0) return out;
  hlo::DType compute = toHlo(opmathType(self.scalar_type()));
  TPU_OP("aten::glu_backward").in(grad).in(self).attr(d).out(out).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::gluGrad(b, b.convert(in[0], compute), b.convert(in[1], compute), d)};
  });
  return out;
}
at::Tensor gluBackward(const at::Tensor& grad, const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options());
  return gluBackwardOut(grad, self, dim, out);
}

// ---- ternary ops -------------------------------------------------------------

enum class Ternary { Lerp, Addcmul, Addcdiv };

template <Ternary K>
struct TernaryOp {
  static constexpr const char* name() {
    return K == Ternary::Lerp ? "lerp" : K == Ternary::Addcmul ? "addcmul" : "addcdiv";
  }
  // The result dtype, after the checks CPU makes.
  static c10::ScalarType check(const Arg& self, const Arg& a, const Arg& w) {
    TORCH_CHECK(self.isTensor(), name(), ": expected self to be a tpu tensor");
    if constexpr (K == Ternary::Lerp) {
      c10::ScalarType t = self.tensor.scalar_type();
      TORCH_CHECK(!a.isTensor() || a.tensor.scalar_type() == t, "expected dtype ", self.tensor.dtype(),
                  " for `end` but got dtype ", a.tensor.dtype());
      TORCH_CHECK(!w.isTensor() || w.tensor.scalar_type() == t, "expected dtype ", self.tensor.dtype(),
                  " for `weight` but got dtype ", w.tensor.dtype());
      // Complex is fine: the lowering compares |weight| with 0.5, as CPU.
      if (!c10::isComplexType(t))
        checkTypes(w.isTensor() ? "lerp_kernel_tensor" : "lerp_kernel_scalar", Types::Float, t);
      return t;
    } else {
      if constexpr (K == Ternary::Addcdiv) {
        auto integral = [](const Arg& x) {
          return c10::isIntegralType(x.isTensor() ? x.tensor.scalar_type() : x.scalar.type(), true);
        };
        TORCH_CHECK(!(integral(a) && integral(w)),
                    "Integer division with addcdiv is no longer supported, and in a future  ",
                    "release addcdiv will perform a true division of tensor1 and tensor2. ",
                    "The historic addcdiv behavior can be implemented as ",
                    "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) ",
                    "for integer inputs and as ",
                    "(input + value * tensor1 / tensor2) for float inputs. ",
                    "The future addcdiv behavior is just the latter implementation: ",
                    "(input + value * tensor1 / tensor2), for all dtypes.");
      }
      c10::ScalarType t = resultType({&self, &a, &w});
      if (!c10::isComplexType(t))  // complex: the lowering is plain complex arithmetic
        checkTypes(K == Ternary::Addcmul ? "addcmul_cpu_out" : "addcdiv_cpu", Types::NumericNoBool, t);
      return t;
    }
  }
  // Lerp: (self, end, weight); addcmul/addcdiv: (self, tensor1, tensor2, value).
  static void run(const std::vector<Arg>& args, const at::Tensor& out, c10::ScalarType result) {
    runPointwise(TPU_OP(name()), args, out, opmathType(result), [](hlo::Builder& b, std::vector<hlo::Value>& v) {
      if constexpr (K == Ternary::Lerp) return lowering::lerp(b, v[0], v[1], v[2]);
      else if constexpr (K == Ternary::Addcmul) return lowering::addcmul(b, v[0], v[1], v[2], v[3]);
      else return lowering::addcdiv(b, v[0], v[1], v[2], v[3]);
    });
  }
  static std::vector<Arg> args(const Arg& self, const Arg& a, const Arg& w, const std::optional<c10::Scalar>& v) {
    std::vector<Arg> all{self, a, w};
    if (v) all.push_back(Arg::of(*v));
    return all;
  }
  static at::Tensor functional(const Arg& self, const Arg& a, const Arg& w, std::optional<c10::Scalar> v) {
    auto result = check(self, a, w);
    at::Tensor out = emptyPointwise({&self, &a, &w}, broadcastShape({&self, &a, &w}), self.tensor.options().dtype(result));
    run(args(self, a, w, v), out, result);
    return out;
  }
  static at::Tensor& inplace(at::Tensor& self, const Arg& a, const Arg& w, std::optional<c10::Scalar> v) {
    Arg x = Arg::of(self);
    auto result = check(x, a, w);
    checkInplace(name(), self, broadcastShape({&x, &a, &w}), result);
    run(args(x, a, w, v), self, result);
    return self;
  }
  static at::Tensor& out(const Arg& self, const Arg& a, const Arg& w, std::optional<c10::Scalar> v,
                         at::Tensor& out) {
    auto result = check(self, a, w);
    prepareOut(name(), out, broadcastShape({&self, &a, &w}), result);
    run(args(self, a, w, v), out, result);
    return out;
  }
};

using Lerp = TernaryOp<Ternary::Lerp>;
at::Tensor lerpScalar(const at::Tensor& s, const at::Tensor& e, const c10::Scalar& w) {
  return Lerp::functional(Arg::of(s), Arg::of(e), Arg::of(w), std::nullopt);
}
at::Tensor& lerpScalar_(at::Tensor& s, const at::Tensor& e, const c10::Scalar& w) {
  return Lerp::inplace(s, Arg::of(e), Arg::of(w), std::nullopt);
}
at::Tensor& lerpScalarOut(const at::Tensor& s, const at::Tensor& e, const c10::Scalar& w, at::Tensor& out) {
  return Lerp::out(Arg::of(s), Arg::of(e), Arg::of(w), std::nullopt, out);
}
at::Tensor lerpTensor(const at::Tensor& s, const at::Tensor& e, const at::Tensor& w) {
  return Lerp::functional(Arg::of(s), Arg::of(e), Arg::of(w), std::nullopt);
}
at::Tensor& lerpTensor_(at::Tensor& s, const at::Tensor& e, const at::Tensor& w) {
  return Lerp::inplace(s, Arg::of(e), Arg::of(w), std::nullopt);
}
at::Tensor& lerpTensorOut(const at::Tensor& s, const at::Tensor& e, const at::Tensor& w, at::Tensor& out) {
  return Lerp::out(Arg::of(s), Arg::of(e), Arg::of(w), std::nullopt, out);
}

template <Ternary K>
struct Addc {
  static at::Tensor functional(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b,
                               const c10::Scalar& v) {
    return TernaryOp<K>::functional(Arg::of(s), Arg::of(a), Arg::of(b), v);
  }
  static at::Tensor& inplace(at::Tensor& s, const at::Tensor& a, const at::Tensor& b, const c10::Scalar& v) {
    return TernaryOp<K>::inplace(s, Arg::of(a), Arg::of(b), v);
  }
  static at::Tensor& out(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b, const c10::Scalar& v,
                         at::Tensor& out) {
    return TernaryOp<K>::out(Arg::of(s), Arg::of(a), Arg::of(b), v, out);
  }
};

// ---- floor_divide ------------------------------------------------------------

struct FloorDivide {
  static c10::ScalarType check(const Arg& x, const Arg& y) {
    auto result = resultType({&x, &y});
    checkTypes("div_floor_cpu", Types::NumericNoBool, result);
    return result;
  }
  static void run(const Arg& x, const Arg& y, const at::Tensor& out, c10::ScalarType result) {
    runPointwise(TPU_OP("aten::floor_divide"), {&x, &y}, out, opmathType(result),
                 [](hlo::Builder& b, std::vector<hlo::Value>& v) { return lowering::floorDivide(b, v[0], v[1]); });
  }
  static at::Tensor functional(const at::Tensor& a, const at::Tensor& b) {
    Arg x = Arg::of(a), y = Arg::of(b);
    auto result = check(x, y);
    at::Tensor out = emptyPointwise({&x, &y}, broadcastShape({&x, &y}), (x.isTensor() ? a : b).options().dtype(result));
    run(x, y, out, result);
    return out;
  }
  static at::Tensor& inplace(at::Tensor& a, const at::Tensor& b) {
    Arg x = Arg::of(a), y = Arg::of(b);
    auto result = check(x, y);
    checkInplace("floor_divide_", a, broadcastShape({&x, &y}), result);
    run(x, y, a, result);
    return a;
  }
  static at::Tensor& out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
    Arg x = Arg::of(a), y = Arg::of(b);
    auto result = check(x, y);
    prepareOut("floor_divide", out, broadcastShape({&x, &y}), result);
    run(x, y, out, result);
    return out;
  }
};

}  // namespace

#define TPU_PLAIN_ACT(name, K)                       \
  m.impl(name, &Plain<Activation::K>::functional);   \
  m.impl(name "_", &Plain<Activation::K>::inplace);  \
  m.impl(name ".out", &Plain<Activation::K>::out);

#define TPU_PLAIN_GRAD(name, K)                                      \
  m.impl(name, &PlainGrad<ActivationGrad::K>::functional);           \
  m.impl(name ".grad_input", &PlainGrad<ActivationGrad::K>::out);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gelu", gelu);
  m.impl("gelu_", gelu_);
  m.impl("gelu.out", geluOut);
  m.impl("threshold", threshold);
  m.impl("threshold_", threshold_);
  m.impl("threshold.out", thresholdOut);
  m.impl("leaky_relu", leakyRelu);
  m.impl("leaky_relu_", leakyRelu_);
  m.impl("leaky_relu.out", leakyReluOut);
  m.impl("elu", elu);
  m.impl("elu_", elu_);
  m.impl("elu.out", eluOut);
  m.impl("softplus", softplus);
  m.impl("softplus.out", softplusOut);
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh_", hardtanh_);
  m.impl("hardtanh.out", hardtanhOut);
  TPU_PLAIN_ACT("hardsigmoid", Hardsigmoid)
  TPU_PLAIN_ACT("hardswish", Hardswish)
  TPU_PLAIN_ACT("mish", Mish)
  m.impl("log_sigmoid_forward", logSigmoidForward);
  m.impl("log_sigmoid_forward.output", logSigmoidForwardOut);
  m.impl("glu", glu);
  m.impl("glu.out", gluOut);

  m.impl("gelu_backward", geluBackward);
  m.impl("gelu_backward.grad_input", geluBackwardOut);
  TPU_PLAIN_GRAD("silu_backward", Silu)
  TPU_PLAIN_GRAD("sigmoid_backward", Sigmoid)
  TPU_PLAIN_GRAD("tanh_backward", Tanh)
  TPU_PLAIN_GRAD("hardsigmoid_backward", Hardsigmoid)
  m.impl("hardswish_backward", &PlainGrad<ActivationGrad::Hardswish>::functional);
  m.impl("mish_backward", &PlainGrad<ActivationGrad::Mish>::functional);
  m.impl("log_sigmoid_backward", logSigmoidBackward);
  m.impl("log_sigmoid_backward.grad_input", logSigmoidBackwardOut);
  m.impl("threshold_backward", thresholdBackward);
  m.impl("threshold_backward.grad_input", thresholdBackwardOut);
  m.impl("leaky_relu_backward", leakyReluBackward);
  m.impl("leaky_relu_backward.grad_input", leakyReluBackwardOut);
  m.impl("elu_backward", eluBackward);
  m.impl("elu_backward.grad_input", eluBackwardOut);
  m.impl("softplus_backward", softplusBackward);
  m.impl("softplus_backward.grad_input", softplusBackwardOut);
  m.impl("hardtanh_backward", hardtanhBackward);
  m.impl("hardtanh_backward.grad_input", hardtanhBackwardOut);
  m.impl("glu_backward", gluBackward);
  m.impl("glu_backward.grad_input", gluBackwardOut);

  m.impl("lerp.Scalar", lerpScalar);
  m.impl("lerp_.Scalar", lerpScalar_);
  m.impl("lerp.Scalar_out", lerpScalarOut);
  m.impl("lerp.Tensor", lerpTensor);
  m.impl("lerp_.Tensor", lerpTensor_);
  m.impl("lerp.Tensor_out", lerpTensorOut);
  m.impl("addcmul", &Addc<Ternary::Addcmul>::functional);
  m.impl("addcmul_", &Addc<Ternary::Addcmul>::inplace);
  m.impl("addcmul.out", &Addc<Ternary::Addcmul>::out);
  m.impl("addcdiv", &Addc<Ternary::Addcdiv>::functional);
  m.impl("addcdiv_", &Addc<Ternary::Addcdiv>::inplace);
  m.impl("addcdiv.out", &Addc<Ternary::Addcdiv>::out);
  m.impl("floor_divide", &FloorDivide::functional);
  m.impl("floor_divide_.Tensor", &FloorDivide::inplace);
  m.impl("floor_divide.out", &FloorDivide::out);
}

}  // namespace tpu::aten
