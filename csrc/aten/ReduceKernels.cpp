// Reductions: sum/nansum/mean/prod, amax/amin, max/min (full and with indices),
// aminmax, argmax/argmin, any/all, var/std (+mean), vector norms, logsumexp,
// count_nonzero, and the scans cumsum/cumprod. Each op has one rule that
// writes into a given output; functional and in-place variants allocate or
// reuse that output and call it.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Reduce.h"

namespace tpu::aten {
namespace {

using lowering::ReduceOp;
using DimList = at::OptionalIntArrayRef;

// ---- shapes and dtypes -------------------------------------------------------

struct Reduced {
  std::vector<int64_t> dims;   // reduced dims of self, sorted
  std::vector<int64_t> shape;  // result shape (keepdim applied)
};

// `dim` None or empty reduces every dim (unless emptyMeansNone, as any/all do).
Reduced reduced(const at::Tensor& self, DimList dim, bool keepdim, bool emptyMeansNone = false) {
  int64_t nd = self.dim();
  std::vector<bool> mask(std::max<int64_t>(nd, 1), false);
  if (!dim.has_value() || (dim->empty() && !emptyMeansNone)) {
    std::fill(mask.begin(), mask.end(), true);
  } else {
    for (int64_t d : *dim) {
      int64_t w = at::maybe_wrap_dim(d, nd);
      TORCH_CHECK(!mask[w], "dim ", w, " appears multiple times in the list of dims");
      mask[w] = true;
    }
  }
  Reduced r;
  for (int64_t i = 0; i < nd; ++i) {
    if (mask[i]) {
      r.dims.push_back(i);
      if (keepdim) r.shape.push_back(1);
    } else {
      r.shape.push_back(self.size(i));
    }
  }
  return r;
}

Reduced reducedOne(const at::Tensor& self, int64_t dim, bool keepdim) {
  int64_t d = dim;
  return reduced(self, at::IntArrayRef(&d, 1), keepdim);
}

bool allDims(DimList dim) { return !dim.has_value() || dim->empty(); }

// Reductions without an identity (max, argmax, ...) reject empty reduced dims.
void checkHasIdentity(const char* op, const at::Tensor& self, DimList dim, const Reduced& r, bool indexError,
                      const char* hint = " Specify the reduction dim with the 'dim' argument.") {
  if (self.numel() != 0) return;
  if (allDims(dim)) {
    if (indexError) TORCH_CHECK_INDEX(false, op, "(): Expected reduction dim to be specified for input.numel() == 0.");
    TORCH_CHECK(false, op, "(): Expected reduction dim to be specified for input.numel() == 0.", hint);
  }
  for (int64_t d : r.dims)
    TORCH_CHECK_INDEX(self.size(d) != 0, op, "(): Expected reduction dim ", d, " to have non-zero size.");
}

c10::ScalarType sumType(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype) return *dtype;
  return c10::isIntegralType(self.scalar_type(), true) ? c10::kLong : self.scalar_type();
}

// out= of structured reductions: the result dtype is `dtype` when given, else out's.
c10::ScalarType outType(const at::Tensor& out, std::optional<c10::ScalarType> dtype) {
  c10::ScalarType t = dtype.value_or(out.scalar_type());
  TORCH_CHECK(out.scalar_type() == t, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(t),
              ", but got ", out.dtype(), " instead");
  return t;
}

void checkOutDtype(const at::Tensor& out, c10::ScalarType t) { outType(out, t); }

at::Tensor allocate(const at::Tensor& self, c10::IntArrayRef shape, c10::ScalarType t) {
  return at::empty(shape, self.options().dtype(t));
}

// ---- runners -------------------------------------------------------------------

// out = reduce(op, self as `compute`, dims), plus runtime scalars (NormP: p).
void runReduce(const char* name, const at::Tensor& self, const std::vector<int64_t>& dims, ReduceOp op,
               c10::ScalarType compute, const at::Tensor& out, const c10::Scalar* p = nullptr) {
  bool complexOk = op == ReduceOp::Sum || op == ReduceOp::Prod || op == ReduceOp::Mean || op == ReduceOp::Any ||
                   op == ReduceOp::All || op == ReduceOp::CountNonzero;
  TORCH_CHECK_NOT_IMPLEMENTED(complexOk || (!self.is_complex() && !c10::isComplexType(compute)), "\"", name,
                              "\" is not implemented for '", self.scalar_type(), "' on tpu");
  if (out.numel() == 0) return;
  hlo::DType ct = toHlo(compute);
  Op o = TPU_OP(name);
  o.in(self).attr(static_cast<int64_t>(op)).attr(static_cast<int64_t>(compute)).attrs(dims);
  if (p) o.scalar(*p, compute);
  o.out(out).run([&](hlo::Builder& b, Values in, Values ops) {
    return ValueList{lowering::reduce(b, op, b.convert(in[0], ct), dims, ops)};
  });
}

// values/indices of the max (min) of self along `dim` (all dims flattened when dim < 0).
void runArgReduce(const char* name, bool isMax, const at::Tensor& self, int64_t dim, const at::Tensor* values,
                  const at::Tensor& indices) {
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "\"", name, "\" is not implemented for '", self.scalar_type(),
                              "' on tpu");
  if (indices.numel() == 0) return;
  Op o = TPU_OP(name);
  o.in(self).attr(isMax).attr(dim);
  if (values) o.out(*values);
  o.out(indices).run([&](hlo::Builder& b, Values in, Values) {
    hlo::Value x = in[0];
    if (x.dtype() == hlo::DType::Pred) x = b.convert(x, hlo::DType::U8);
    if (dim < 0) x = b.reshape(x, {x.type.numel()});  // flattened (or a 0-dim tensor)
    auto [v, i] = lowering::argReduce(b, isMax, x, dim < 0 ? 0 : dim);
    return values ? ValueList{v, i} : ValueList{i};
  });
}

// ---- sum / nansum / prod / mean ------------------------------------------------

template <ReduceOp K>
struct SumLike {
  static constexpr const char* name() { return K == ReduceOp::Prod ? "prod" : K == ReduceOp::NanSum ? "nansum" : "sum"; }
  static at::Tensor& into(const at::Tensor& self, const Reduced& r, c10::ScalarType result, at::Tensor& out) {
    at::native::resize_output(out, r.shape);
    runReduce(name(), self, r.dims, K, opmathType(result), out);
    return out;
  }
  static at::Tensor dims(const at::Tensor& self, DimList dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
    Reduced r = reduced(self, dim, keepdim);
    at::Tensor out = allocate(self, r.shape, sumType(self, dtype));
    return into(self, r, out.scalar_type(), out);
  }
  static at::Tensor& dimsOut(const at::Tensor& self, DimList dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                             at::Tensor& out) {
    return into(self, reduced(self, dim, keepdim), outType(out, dtype), out);
  }
  static at::Tensor full(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
    return dims(self, std::nullopt, false, dtype);
  }
  static at::Tensor& fullOut(const at::Tensor& self, std::optional<c10::ScalarType> dtype, at::Tensor& out) {
    return dimsOut(self, std::nullopt, false, dtype, out);
  }
  static at::Tensor one(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
    Reduced r = reducedOne(self, dim, keepdim);
    at::Tensor out = allocate(self, r.shape, sumType(self, dtype));
    return into(self, r, out.scalar_type(), out);
  }
  static at::Tensor& oneOut(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                            at::Tensor& out) {
    return into(self, reducedOne(self, dim, keepdim), outType(out, dtype), out);
  }
};

c10::ScalarType meanType(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  // As CPU: without a dtype, integers would promote to Long, which mean rejects.
  c10::ScalarType t = dtype ? *dtype : sumType(self, std::nullopt);
  TORCH_CHECK(c10::isFloatingType(t) || c10::isComplexType(t), "mean(): could not infer output dtype. ",
              dtype ? "Optional" : "Input",
              " dtype must be either a floating point or complex dtype. Got: ", t);
  return t;
}

at::Tensor& meanInto(const at::Tensor& self, const Reduced& r, c10::ScalarType result, at::Tensor& out) {
  at::native::resize_output(out, r.shape);
  runReduce("mean", self, r.dims, ReduceOp::Mean, opmathType(result), out);
  return out;
}
at::Tensor mean(const at::Tensor& self, DimList dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
  c10::ScalarType t = meanType(self, dtype);
  Reduced r = reduced(self, dim, keepdim);
  at::Tensor out = allocate(self, r.shape, t);
  return meanInto(self, r, t, out);
}
at::Tensor& meanOut(const at::Tensor& self, DimList dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                    at::Tensor& out) {
  meanType(self, dtype);
  return meanInto(self, reduced(self, dim, keepdim), outType(out, dtype), out);
}

// ---- amax / amin / max / min / aminmax / argmax / argmin --------------------------

template <bool IsMax>
struct Extremum {
  static constexpr const char* name() { return IsMax ? "amax" : "amin"; }
  static at::Tensor& into(const at::Tensor& self, DimList dim, bool keepdim, at::Tensor& out) {
    TORCH_CHECK(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to match, but got ",
                self.scalar_type(), " for input's dtype and ", out.scalar_type(), " for out's dtype.");
    Reduced r = reduced(self, dim, keepdim);
    checkHasIdentity(name(), self, dim, r, false);
    at::native::resize_output(out, r.shape);
    runReduce(name(), self, r.dims, IsMax ? ReduceOp::Max : ReduceOp::Min, valueType(self.scalar_type()), out);
    return out;
  }
  static at::Tensor functional(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
    at::Tensor out = at::empty({0}, self.options());
    return into(self, dim, keepdim, out);
  }
  static at::Tensor& out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
    return into(self, dim, keepdim, out);
  }
  // max() / min(): full reduction, no indices.
  static at::Tensor& fullInto(const at::Tensor& self, at::Tensor& out) {
    Reduced r = reduced(self, std::nullopt, false);
    checkHasIdentity(IsMax ? "max" : "min", self, std::nullopt, r, false);
    at::native::resize_output(out, r.shape);
    runReduce(IsMax ? "max" : "min", self, r.dims, IsMax ? ReduceOp::Max : ReduceOp::Min, valueType(self.scalar_type()), out);
    return out;
  }
  static at::Tensor full(const at::Tensor& self) {
    at::Tensor out = at::empty({}, self.options());
    return fullInto(self, out);
  }
  static at::Tensor& fullOut(const at::Tensor& self, at::Tensor& out) {
    TORCH_CHECK(c10::canCast(self.scalar_type(), out.scalar_type()),
                "Expected canCast(self.dtype(), out.dtype()) to be true, but got false.");
    return fullInto(self, out);
  }
  // max.dim / min.dim: values and the first index of the extremum.
  static std::tuple<at::Tensor&, at::Tensor&> dimInto(const at::Tensor& self, int64_t dim, bool keepdim,
                                                      at::Tensor& values, at::Tensor& indices) {
    const char* op = IsMax ? "max" : "min";
    int64_t d = at::maybe_wrap_dim(dim, self.dim());
    Reduced r = reducedOne(self, d, keepdim);
    checkHasIdentity(op, self, at::IntArrayRef(&d, 1), r, true);
    checkOutDtype(values, self.scalar_type());
    checkOutDtype(indices, c10::kLong);
    at::native::resize_output(values, r.shape);
    at::native::resize_output(indices, r.shape);
    runArgReduce(op, IsMax, self, self.dim() == 0 ? -1 : d, &values, indices);
    return {values, indices};
  }
  static std::tuple<at::Tensor, at::Tensor> dimFunctional(const at::Tensor& self, int64_t dim, bool keepdim) {
    at::Tensor values = at::empty({0}, self.options()), indices = at::empty({0}, self.options().dtype(c10::kLong));
    dimInto(self, dim, keepdim, values, indices);
    return {values, indices};
  }
  static std::tuple<at::Tensor&, at::Tensor&> dimOut(const at::Tensor& self, int64_t dim, bool keepdim,
                                                     at::Tensor& values, at::Tensor& indices) {
    return dimInto(self, dim, keepdim, values, indices);
  }
  // argmax / argmin: dim None flattens.
  static at::Tensor& argInto(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
    const char* op = IsMax ? "argmax" : "argmin";
    TORCH_CHECK(self.scalar_type() != c10::kBool, op, "(): does not support bool input");
    checkOutDtype(out, c10::kLong);
    Reduced r;
    int64_t d = -1;
    if (dim) {
      d = at::maybe_wrap_dim(*dim, self.dim());
      r = reducedOne(self, d, keepdim);
      checkHasIdentity(op, self, at::IntArrayRef(&d, 1), r, true);
      if (self.dim() == 0) d = -1;
    } else {
      r = reduced(self, std::nullopt, keepdim);
      checkHasIdentity(op, self, std::nullopt, r, true);
    }
    at::native::resize_output(out, r.shape);
    runArgReduce(op, IsMax, self, d, nullptr, out);
    return out;
  }
  static at::Tensor arg(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
    at::Tensor out = at::empty({0}, self.options().dtype(c10::kLong));
    return argInto(self, dim, keepdim, out);
  }
  static at::Tensor& argOut(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
    return argInto(self, dim, keepdim, out);
  }
};

std::tuple<at::Tensor&, at::Tensor&> aminmaxInto(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                 at::Tensor& mn, at::Tensor& mx) {
  Reduced r;
  if (dim) {
    int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    r = reducedOne(self, d, keepdim);
    for (int64_t k : r.dims)
      TORCH_CHECK_INDEX(self.size(k) != 0, "aminmax: Expected reduction dim ", k, " to have non-zero size.");
  } else {
    r = reduced(self, std::nullopt, keepdim);
    TORCH_CHECK(self.numel() > 0,
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
  }
  checkOutDtype(mn, self.scalar_type());
  checkOutDtype(mx, self.scalar_type());
  at::native::resize_output(mn, r.shape);
  at::native::resize_output(mx, r.shape);
  if (mn.numel() == 0) return {mn, mx};
  TPU_OP("aminmax").in(self).attrs(r.dims).out(mn).out(mx).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::reduce(b, ReduceOp::Min, in[0], r.dims),
                     lowering::reduce(b, ReduceOp::Max, in[0], r.dims)};
  });
  return {mn, mx};
}
std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor mn = at::empty({0}, self.options()), mx = at::empty({0}, self.options());
  aminmaxInto(self, dim, keepdim, mn, mx);
  return {mn, mx};
}
std::tuple<at::Tensor&, at::Tensor&> aminmaxOut(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                at::Tensor& mn, at::Tensor& mx) {
  return aminmaxInto(self, dim, keepdim, mn, mx);
}

// ---- any / all -------------------------------------------------------------------

template <bool IsAny>
struct AnyAll {
  static constexpr const char* name() { return IsAny ? "any" : "all"; }
  static at::Tensor& into(const at::Tensor& self, const Reduced& r, at::Tensor& out) {
    TORCH_CHECK(out.scalar_type() == c10::kBool || out.scalar_type() == c10::kByte, name(),
                " only supports bool tensor for result, got: ", out.scalar_type());
    at::native::resize_output(out, r.shape);
    runReduce(name(), self, r.dims, IsAny ? ReduceOp::Any : ReduceOp::All, self.scalar_type(), out);
    return out;
  }
  static at::Tensor alloc(const at::Tensor& self, const Reduced& r) {
    return allocate(self, r.shape, self.scalar_type() == c10::kByte ? c10::kByte : c10::kBool);
  }
  static at::Tensor dims(const at::Tensor& self, DimList dim, bool keepdim) {
    Reduced r = reduced(self, dim, keepdim, true);
    at::Tensor out = alloc(self, r);
    return into(self, r, out);
  }
  static at::Tensor& dimsOut(const at::Tensor& self, DimList dim, bool keepdim, at::Tensor& out) {
    return into(self, reduced(self, dim, keepdim, true), out);
  }
  static at::Tensor one(const at::Tensor& self, int64_t dim, bool keepdim) {
    Reduced r = reducedOne(self, dim, keepdim);
    at::Tensor out = alloc(self, r);
    return into(self, r, out);
  }
  static at::Tensor& oneOut(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
    return into(self, reducedOne(self, dim, keepdim), out);
  }
  static at::Tensor full(const at::Tensor& self) { return dims(self, std::nullopt, false); }
  static at::Tensor& fullOut(const at::Tensor& self, at::Tensor& out) {
    return dimsOut(self, std::nullopt, false, out);
  }
};

// ---- var / std -------------------------------------------------------------------

template <bool IsStd>
struct VarStd {
  static void check(const at::Tensor& self) {
    TORCH_CHECK(c10::isFloatingType(self.scalar_type()), "std and var only support floating point and complex dtypes");
  }
  // Writes var (std) and, when given, the mean.
  static void run(const at::Tensor& self, DimList dim, const std::optional<c10::Scalar>& correction, bool keepdim,
                  at::Tensor& out, at::Tensor* meanOut) {
    if (self.is_complex()) return runComplex(self, dim, correction, keepdim, out, meanOut);
    check(self);
    Reduced r = reduced(self, dim, keepdim);
    c10::Scalar c = correction.value_or(1);
    int64_t n = 1;
    for (int64_t d : r.dims) n *= self.size(d);
    if (static_cast<double>(n) - c.toDouble() <= 0)
      TORCH_WARN(IsStd ? "std" : "var", "(): degrees of freedom is <= 0. Correction should be strictly less than the "
                 "reduction factor (input numel divided by output numel).");
    at::native::resize_output(out, r.shape);
    if (meanOut) at::native::resize_output(*meanOut, r.shape);
    if (out.numel() == 0) return;
    c10::ScalarType compute = opmathType(self.scalar_type());
    hlo::DType ct = toHlo(compute);
    Op o = TPU_OP(IsStd ? "std" : "var");
    o.in(self).scalar(c, compute).attr(static_cast<int64_t>(compute)).attrs(r.dims).attr(meanOut != nullptr).out(out);
    if (meanOut) o.out(*meanOut);
    o.run([&](hlo::Builder& b, Values in, Values ops) {
      auto [var, mean] = lowering::varMean(b, b.convert(in[0], ct), r.dims, ops[0]);
      if (IsStd) var = b.unary("sqrt", var);
      return meanOut ? ValueList{var, mean} : ValueList{var};
    });
  }
  // var(z) = E|z - mean|^2 = var(re) + var(im) (same correction); a real result, as CPU.
  static void runComplex(const at::Tensor& self, DimList dim, const std::optional<c10::Scalar>& correction,
                         bool keepdim, at::Tensor& out, at::Tensor* meanOut) {
    at::Tensor z = self.resolve_conj();
    at::Tensor vr = at::empty({0}, z.options().dtype(c10::toRealValueType(z.scalar_type())));
    at::Tensor vi = at::empty({0}, vr.options());
    VarStd<false>::run(at::real(z), dim, correction, keepdim, vr, nullptr);
    VarStd<false>::run(at::imag(z), dim, correction, keepdim, vi, nullptr);
    at::Tensor v = vr.add_(vi);
    if (IsStd) v.sqrt_();
    at::native::resize_output(out, v.sizes());
    out.copy_(v);
    if (meanOut) {
      at::Tensor m = at::mean(z, dim, keepdim);
      at::native::resize_output(*meanOut, m.sizes());
      meanOut->copy_(m);
    }
  }
  static at::Tensor functional(const at::Tensor& self, DimList dim, const std::optional<c10::Scalar>& correction,
                               bool keepdim) {
    at::Tensor out = at::empty({0}, self.options().dtype(c10::toRealValueType(self.scalar_type())));
    run(self, dim, correction, keepdim, out, nullptr);
    return out;
  }
  static at::Tensor& out(const at::Tensor& self, DimList dim, const std::optional<c10::Scalar>& correction,
                         bool keepdim, at::Tensor& out) {
    TORCH_CHECK(c10::canCast(self.scalar_type(), out.scalar_type()), IsStd ? "std" : "var", ": result type ",
                self.scalar_type(), " can't be cast to the desired output type ", out.scalar_type());
    run(self, dim, correction, keepdim, out, nullptr);
    return out;
  }
  static std::tuple<at::Tensor, at::Tensor> withMean(const at::Tensor& self, DimList dim,
                                                     const std::optional<c10::Scalar>& correction, bool keepdim) {
    at::Tensor out = at::empty({0}, self.options().dtype(c10::toRealValueType(self.scalar_type())));
    at::Tensor m = at::empty({0}, self.options());
    run(self, dim, correction, keepdim, out, &m);
    return {out, m};
  }
};

// ---- vector norms ----------------------------------------------------------------

ReduceOp normKind(double ord) {
  if (ord == 0) return ReduceOp::Norm0;
  if (ord == 1) return ReduceOp::Norm1;
  if (ord == 2) return ReduceOp::Norm2;
  if (ord == INFINITY) return ReduceOp::NormInf;
  if (ord == -INFINITY) return ReduceOp::NormNegInf;
  return ReduceOp::NormP;
}

at::Tensor& vectorNormInto(const at::Tensor& self, const c10::Scalar& ord, DimList dim, bool keepdim,
                           c10::ScalarType result, at::Tensor& out) {
  // The norm of a complex vector is the norm of its moduli (a real result).
  if (self.is_complex()) return vectorNormInto(self.abs(), ord, dim, keepdim, result, out);
  TORCH_CHECK(c10::isFloatingType(self.scalar_type()),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
  TORCH_CHECK(c10::promoteTypes(self.scalar_type(), result) == result, "linalg.vector_norm: the dtype of the input (",
              self.scalar_type(), ") should be convertible without narrowing to the specified dtype (", result, ")");
  TORCH_CHECK(!ord.isComplex(), "linalg.vector_norm: Expected a non-complex scalar as the order of norm.");
  double p = ord.toDouble();
  Reduced r = reduced(self, dim, keepdim);
  if (self.numel() == 0 && (p < 0 || p == INFINITY)) {
    TORCH_CHECK(!allDims(dim), "linalg.vector_norm cannot compute the ", ord,
                " norm on an empty tensor because the operation does not have an identity");
    for (int64_t d : r.dims)
      TORCH_CHECK(self.size(d) != 0, "linalg.vector_norm cannot compute the ", ord, " norm on the dimension ", d,
                  "because this dimension is empty and the operation does not have an identity");
  }
  at::native::resize_output(out, r.shape);
  ReduceOp kind = normKind(p);
  runReduce("linalg_vector_norm", self, r.dims, kind, opmathType(result), out, kind == ReduceOp::NormP ? &ord : nullptr);
  return out;
}

at::Tensor vectorNorm(const at::Tensor& self, const c10::Scalar& ord, DimList dim, bool keepdim,
                      std::optional<c10::ScalarType> dtype) {
  c10::ScalarType t = dtype.value_or(self.scalar_type());
  at::Tensor out = at::empty({0}, self.options().dtype(c10::toRealValueType(t)));
  return vectorNormInto(dtype && self.is_complex() ? self.to(t) : self, ord, dim, keepdim, out.scalar_type(), out);
}
at::Tensor& vectorNormOut(const at::Tensor& self, const c10::Scalar& ord, DimList dim, bool keepdim,
                          std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  c10::ScalarType t = dtype.value_or(self.scalar_type());
  checkOutDtype(out, c10::toRealValueType(t));
  return vectorNormInto(dtype && self.is_complex() ? self.to(t) : self, ord, dim, keepdim, out.scalar_type(), out);
}
// torch.norm's aten::norm overloads: the same rule with p defaulting to 2.
at::Tensor normDimDtype(const at::Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim,
                        bool keepdim, c10::ScalarType dtype) {
  return vectorNorm(self, p.value_or(2), dim, keepdim, dtype);
}
at::Tensor normDim(const at::Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim) {
  return vectorNorm(self, p.value_or(2), dim, keepdim, std::nullopt);
}
at::Tensor& normDtypeOut(const at::Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim,
                         bool keepdim, c10::ScalarType dtype, at::Tensor& out) {
  return vectorNormOut(self, p.value_or(2), dim, keepdim, dtype, out);
}
at::Tensor& normOut(const at::Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                    at::Tensor& out) {
  return vectorNormOut(self, p.value_or(2), dim, keepdim, std::nullopt, out);
}

// ---- logsumexp / count_nonzero -----------------------------------------------------

// Complex: CPU's composite, shifted by the max of the real parts (0 where that is infinite).
at::Tensor& logsumexpComplex(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  TORCH_CHECK(out.is_complex(), "logsumexp(): Expected floating point type for result tensor, but got: ",
              out.scalar_type());
  at::Tensor z = self.resolve_conj();
  at::Tensor m = at::amax(at::real(z), dim, /*keepdim=*/true);
  m.masked_fill_(m.abs() == INFINITY, 0);
  at::Tensor s = at::sum((z - m).exp(), dim, /*keepdim=*/true).log_().add_(m);
  if (!keepdim) s = dim.empty() ? s.reshape({}) : s.squeeze(dim);
  at::native::resize_output(out, s.sizes());
  out.copy_(s);
  return out;
}

at::Tensor& logsumexpOut(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  if (self.is_complex()) return logsumexpComplex(self, dim, keepdim, out);
  TORCH_CHECK(c10::isFloatingType(out.scalar_type()),
              "logsumexp(): Expected floating point type for result tensor, but got: ", out.scalar_type());
  Reduced r = reduced(self, dim, keepdim);
  at::native::resize_output(out, r.shape);
  runReduce("logsumexp", self, r.dims, ReduceOp::LogSumExp, opmathType(out.scalar_type()), out);
  return out;
}
at::Tensor logsumexp(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  c10::ScalarType t = c10::isIntegralType(self.scalar_type(), true) ? defaultFloat() : self.scalar_type();
  at::Tensor out = at::empty({0}, self.options().dtype(t));
  return logsumexpOut(self, dim, keepdim, out);
}

at::Tensor countNonzero(const at::Tensor& self, at::IntArrayRef dim) {
  Reduced r = reduced(self, dim, false);
  at::Tensor out = allocate(self, r.shape, c10::kLong);
  runReduce("count_nonzero", self, r.dims, ReduceOp::CountNonzero, self.scalar_type(), out);
  return out;
}

// ---- cumsum / cumprod ----------------------------------------------------------------

template <ReduceOp K>
struct Scan {
  static constexpr const char* name() { return K == ReduceOp::Sum ? "cumsum" : "cumprod"; }
  static at::Tensor& into(const at::Tensor& self, int64_t dim, c10::ScalarType result, at::Tensor& out) {
    int64_t d = at::maybe_wrap_dim(dim, self.dim());
    if (!out.is_same(self)) at::native::resize_output(out, self.sizes());
    if (out.numel() == 0) return out;
    at::assert_no_partial_overlap(out, self);  // as CPU: out may be self, not part of it
    c10::ScalarType compute = opmathType(result);
    hlo::DType ct = toHlo(compute);
    TPU_OP(name()).in(self).attr(d).attr(static_cast<int64_t>(compute)).out(out).run(
        [&](hlo::Builder& b, Values in, Values) {
          hlo::Value x = b.convert(in[0], ct);
          if (x.rank() == 0) return ValueList{x};
          return ValueList{lowering::scan(b, K, x, d)};
        });
    return out;
  }
  static at::Tensor functional(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
    at::Tensor out = at::empty({0}, self.options().dtype(sumType(self, dtype)));
    return into(self, dim, out.scalar_type(), out);
  }
  static at::Tensor& inplace(at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
    TORCH_CHECK(!dtype || *dtype == self.scalar_type(), "Bad in-place call: input tensor dtype ", self.dtype(),
                " and output tensor dtype ", c10::scalarTypeToTypeMeta(*dtype), " should match");
    return into(self, dim, self.scalar_type(), self);
  }
  static at::Tensor& out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype, at::Tensor& out) {
    return into(self, dim, outType(out, dtype), out);
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using Sum = SumLike<ReduceOp::Sum>;
  using NanSum = SumLike<ReduceOp::NanSum>;
  using Prod = SumLike<ReduceOp::Prod>;
  m.impl("sum", &Sum::full);
  m.impl("sum.dim_IntList", &Sum::dims);
  m.impl("sum.IntList_out", &Sum::dimsOut);
  m.impl("nansum", &NanSum::dims);
  m.impl("nansum.out", &NanSum::dimsOut);
  m.impl("prod", &Prod::full);
  m.impl("prod.dim_int", &Prod::one);
  m.impl("prod.int_out", &Prod::oneOut);
  m.impl("mean.dim", mean);
  m.impl("mean.out", meanOut);

  using Max = Extremum<true>;
  using Min = Extremum<false>;
  m.impl("amax", &Max::functional);
  m.impl("amax.out", &Max::out);
  m.impl("amin", &Min::functional);
  m.impl("amin.out", &Min::out);
  m.impl("max", &Max::full);
  m.impl("max.unary_out", &Max::fullOut);
  m.impl("min", &Min::full);
  m.impl("min.unary_out", &Min::fullOut);
  m.impl("max.dim", &Max::dimFunctional);
  m.impl("max.dim_max", &Max::dimOut);
  m.impl("min.dim", &Min::dimFunctional);
  m.impl("min.dim_min", &Min::dimOut);
  m.impl("argmax", &Max::arg);
  m.impl("argmax.out", &Max::argOut);
  m.impl("argmin", &Min::arg);
  m.impl("argmin.out", &Min::argOut);
  m.impl("aminmax", aminmax);
  m.impl("aminmax.out", aminmaxOut);

  using Any = AnyAll<true>;
  using All = AnyAll<false>;
  m.impl("any", &Any::full);
  m.impl("any.all_out", &Any::fullOut);
  m.impl("any.dim", &Any::one);
  m.impl("any.out", &Any::oneOut);
  m.impl("any.dims", &Any::dims);
  m.impl("any.dims_out", &Any::dimsOut);
  m.impl("all", &All::full);
  m.impl("all.all_out", &All::fullOut);
  m.impl("all.dim", &All::one);
  m.impl("all.out", &All::oneOut);
  m.impl("all.dims", &All::dims);
  m.impl("all.dims_out", &All::dimsOut);

  m.impl("var.correction", &VarStd<false>::functional);
  m.impl("var.correction_out", &VarStd<false>::out);
  m.impl("var_mean.correction", &VarStd<false>::withMean);
  m.impl("std.correction", &VarStd<true>::functional);
  m.impl("std.correction_out", &VarStd<true>::out);
  m.impl("std_mean.correction", &VarStd<true>::withMean);

  m.impl("linalg_vector_norm", vectorNorm);
  m.impl("linalg_vector_norm.out", vectorNormOut);
  m.impl("norm.ScalarOpt_dim_dtype", normDimDtype);
  m.impl("norm.ScalarOpt_dim", normDim);
  m.impl("norm.dtype_out", normDtypeOut);
  m.impl("norm.out", normOut);

  m.impl("logsumexp", logsumexp);
  m.impl("logsumexp.out", logsumexpOut);
  m.impl("count_nonzero.dim_IntList", countNonzero);

  m.impl("cumsum", &Scan<ReduceOp::Sum>::functional);
  m.impl("cumsum_", &Scan<ReduceOp::Sum>::inplace);
  m.impl("cumsum.out", &Scan<ReduceOp::Sum>::out);
  m.impl("cumprod", &Scan<ReduceOp::Prod>::functional);
  m.impl("cumprod_", &Scan<ReduceOp::Prod>::inplace);
  m.impl("cumprod.out", &Scan<ReduceOp::Prod>::out);
}

}  // namespace tpu::aten
