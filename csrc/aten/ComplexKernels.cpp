// Complex-number ops: the dtype-reinterpreting views (view_as_real / view_as_complex: metadata only; the
// runtime's reinterpretFlat splits or joins (re, im) pairs when a view's dtype differs from its storage's
// buffer), complex / polar construction, angle and conj_physical. The conj bit itself is PyTorch's (a
// view flag); copy_ resolves it (Copy.cpp) and the Conjugate fallback resolves it for every other op.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include <cmath>

#include "Elementwise.h"

namespace tpu::aten {
namespace {

using hlo::Value;

// ---- complex(real, imag) / polar(abs, angle) ---------------------------------------------

void checkParts(const char* op, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "Expected object of scalar type ", a.scalar_type(),
              " but got scalar type ", b.scalar_type(), " for second argument");
  TORCH_CHECK(a.scalar_type() == c10::kFloat || a.scalar_type() == c10::kDouble || a.scalar_type() == c10::kHalf,
              "Expected both inputs to be Half, Float or Double tensors but got ", a.scalar_type(), " and ",
              b.scalar_type());
  TORCH_CHECK(a.scalar_type() != c10::kHalf, op, ": complex32 (chalf) is not supported on tpu");
  TORCH_CHECK(out.scalar_type() == c10::toComplexType(a.scalar_type()), "Expected object of scalar type ",
              c10::toComplexType(a.scalar_type()), " but got scalar type ", out.scalar_type(),
              " for argument 'out'");
}

template <bool Polar>
at::Tensor& partsOut(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  const char* op = Polar ? "polar" : "complex";
  checkParts(op, a, b, out);
  at::native::resize_output(out, at::infer_size(a.sizes(), b.sizes()));
  if (out.numel() == 0) return out;
  std::vector<int64_t> shape = out.sizes().vec();
  TPU_OP(Polar ? "aten::polar" : "aten::complex").in(a).in(b).out(out).run([&](hlo::Builder& bb, Values in, Values) {
    Value x = lowering::broadcastTo(bb, in[0], shape), y = lowering::broadcastTo(bb, in[1], shape);
    if (!Polar) return ValueList{bb.complex(x, y)};
    // abs * (cos(angle), sin(angle))
    return ValueList{bb.complex(bb.mul(x, bb.unary("cosine", y)), bb.mul(x, bb.unary("sine", y)))};
  });
  return out;
}

// ---- angle ------------------------------------------------------------------------------

// angle(z) = atan2(im, re); of a real x: pi for x < 0, 0 otherwise, NaN kept (CPU's formula).
at::Tensor& angleOut(const at::Tensor& self, at::Tensor& out) {
  c10::ScalarType result = c10::isIntegralType(self.scalar_type(), true) ? defaultFloat()
                                                                          : c10::toRealValueType(self.scalar_type());
  TORCH_CHECK(out.scalar_type() == result || c10::canCast(result, out.scalar_type()), "angle: result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  hlo::DType rt = toHlo(opmathType(result));
  Op op = TPU_OP("aten::angle");
  op.in(self).attr(static_cast<int64_t>(result)).out(out).run([&](hlo::Builder& b, Values in, Values) {
    Value x = in[0];
    if (hlo::isComplex(x.dtype())) return ValueList{b.binary("atan2", b.imagPart(x), b.realPart(x))};
    Value f = b.convert(x, rt);
    Value pi = b.scalarLike(f, M_PI), zero = b.scalarLike(f, 0);
    Value r = b.select(b.compare(hlo::Cmp::LT, f, zero), pi, zero);
    return ValueList{b.select(b.compare(hlo::Cmp::NE, f, f), f, r)};
  });
  return out;
}

at::Tensor angle(const at::Tensor& self) {
  c10::ScalarType result = c10::isIntegralType(self.scalar_type(), true) ? defaultFloat()
                                                                          : c10::toRealValueType(self.scalar_type());
  Arg x = Arg::of(self);
  at::Tensor out = emptyPointwise({&x}, self.sizes(), self.options().dtype(result));
  return angleOut(self, out);
}

// ---- conj_physical ---------------------------------------------------------------------

at::Tensor& conjPhysicalOut(const at::Tensor& self, at::Tensor& out) {
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  TORCH_CHECK(c10::canCast(self.scalar_type(), out.scalar_type()), "conj_physical: result type ",
              self.scalar_type(), " can't be cast to the desired output type ", out.scalar_type());
  TPU_OP("aten::conj_physical").in(self).out(out).run([&](hlo::Builder& b, Values in, Values) {
    Value x = in[0];
    if (!hlo::isComplex(x.dtype())) return ValueList{x};
    return ValueList{b.complex(b.realPart(x), b.neg(b.imagPart(x)))};
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("complex.out", &partsOut<false>);
  m.impl("polar.out", &partsOut<true>);
  m.impl("angle", angle);
  m.impl("angle.out", angleOut);
  m.impl("conj_physical.out", conjPhysicalOut);
}

}  // namespace tpu::aten
