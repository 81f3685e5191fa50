// Shape and data-movement kernels: cat, tril/triu, constant_pad_nd, flip,
// roll, where, clamp*, masked_fill_, and the range factories' out= kernels
// (arange, linspace, eye). Values that may change per call (clamp bounds,
// fill values, the tril diagonal, roll shifts, range start/step) are device
// operands; only shapes and dims are baked into programs.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/RangeUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorShape.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Shape.h"

namespace tpu::aten {
namespace {

void prepareExactOut(at::Tensor& out, c10::IntArrayRef shape, c10::ScalarType t) {
  TORCH_CHECK(out.scalar_type() == t, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(t),
              ", but got ", out.dtype(), " instead");
  at::native::resize_output(out, shape);
}

// ---- cat -------------------------------------------------------------------

struct CatPlan {
  std::vector<at::Tensor> inputs;  // non-empty inputs, in order
  std::vector<int64_t> shape;
  int64_t dim = 0;
  c10::ScalarType dtype;
  c10::MemoryFormat format = c10::MemoryFormat::Contiguous;
};

CatPlan planCat(const at::ITensorListRef& list, int64_t dim) {
  auto tensors = list.materialize();
  TORCH_CHECK_VALUE(!tensors.empty(), "torch.cat(): expected a non-empty list of Tensors");
  at::native::check_cat_no_zero_dim(tensors);
  CatPlan plan;
  at::native::ResultTypeState state;
  for (const at::Tensor& t : tensors) state = at::native::update_result_type_state(t, state);
  plan.dtype = at::native::result_type(state);
  const at::Tensor* first = nullptr;
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.device() == tensors[0].get().device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                tensors[0].get().device(), " and ", t.device(), "!");
    if (!at::native::cat_should_skip_tensor(t) && !first) first = &t;
  }
  if (!first) {
    plan.shape = {0};
    return plan;
  }
  plan.dim = at::maybe_wrap_dim(dim, first->dim());
  plan.shape = first->sizes().vec();
  plan.shape[plan.dim] = 0;
  plan.format = first->suggest_memory_format();
  int64_t i = 0;
  for (const at::Tensor& t : tensors) {
    if (!at::native::cat_should_skip_tensor(t)) {
      at::native::check_cat_shape_except_dim(*first, t, plan.dim, i);
      plan.shape[plan.dim] += t.size(plan.dim);
      if (t.suggest_memory_format() != plan.format) plan.format = c10::MemoryFormat::Contiguous;
      if (t.numel() > 0) plan.inputs.push_back(t);
    }
    ++i;
  }
  return plan;
}

void runCat(const CatPlan& plan, const at::Tensor& out) {
  if (out.numel() == 0) return;
  Op op = TPU_OP("aten::cat");
  for (const at::Tensor& t : plan.inputs) op.in(t);
  hlo::DType t = toHlo(plan.dtype);
  op.attr(plan.dim).attr(static_cast<int64_t>(plan.dtype)).out(out).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::concat(b, in, plan.dim, t)};
  });
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  CatPlan plan = planCat(tensors, dim);
  const at::Tensor& like = *tensors.begin();
  at::Tensor out = at::empty(plan.shape, like.options().dtype(plan.dtype).memory_format(plan.format));
  runCat(plan, out);
  return out;
}

at::Tensor& catOut(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  CatPlan plan = planCat(tensors, dim);
  TORCH_CHECK_TYPE(c10::canCast(plan.dtype, out.scalar_type()),
                   "torch.cat(): input types can't be cast to the desired output type ", out.scalar_type());
  for (const at::Tensor& t : plan.inputs) at::assert_no_overlap(out, t);
  at::native::resize_output(out, plan.shape);
  runCat(plan, out);
  return out;
}

// ---- tril / triu -------------------------------------------------------------

template <bool Upper>
struct Triangle {
  static constexpr const char* name = Upper ? "triu" : "tril";
  static void run(const at::Tensor& self, int64_t diagonal, const at::Tensor& out) {
    TORCH_CHECK(self.dim() >= 2, name, ": input tensor must have at least 2 dimensions");
    if (out.numel() == 0) return;
    TPU_OP(Upper ? "aten::triu" : "aten::tril")
        .in(self)
        .scalar(diagonal, c10::kLong)
        .out(out)
        .run([](hlo::Builder& b, Values in, Values s) { return ValueList{lowering::triangle(b, in[0], s[0], Upper)}; });
  }
  static at::Tensor functional(const at::Tensor& self, c10::SymInt diagonal) {
    TORCH_CHECK(self.dim() >= 2, name, ": input tensor must have at least 2 dimensions");
    at::Tensor out = at::empty(self.sizes(), self.options());
    run(self, diagonal.expect_int(), out);
    return out;
  }
  static at::Tensor& inplace(at::Tensor& self, c10::SymInt diagonal) {
    run(self, diagonal.expect_int(), self);
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, c10::SymInt diagonal, at::Tensor& out) {
    TORCH_CHECK(self.dim() >= 2, name, ": input tensor must have at least 2 dimensions");
    prepareExactOut(out, self.sizes(), self.scalar_type());
    run(self, diagonal.expect_int(), out);
    return out;
  }
};

// ---- constant_pad_nd, flip, roll ------------------------------------------------

at::Tensor constantPadNd(const at::Tensor& self, c10::SymIntArrayRef symPad, const c10::Scalar& value) {
  auto pad = C10_AS_INTARRAYREF_SLOW(symPad);
  TORCH_CHECK(pad.size() % 2 == 0, "Length of pad must be even but instead it equals ", pad.size());
  int64_t rank = self.dim(), nPadded = static_cast<int64_t>(pad.size() / 2);
  TORCH_CHECK(nPadded <= rank, "Length of pad should be no more than twice the number of dimensions of the input. Pad length is ",
              pad.size(), " while the input has ", rank, " dimensions.");
  std::vector<int64_t> lo(rank, 0), hi(rank, 0), shape = self.sizes().vec();
  for (int64_t i = 0; i < nPadded; ++i) {
    int64_t d = rank - 1 - i;
    lo[d] = pad[2 * i];
    hi[d] = pad[2 * i + 1];
    int64_t size = shape[d] + lo[d] + hi[d];
    TORCH_CHECK(size >= 0, "The input size ", shape[d], ", plus negative padding ", lo[d], " and ", hi[d],
                " resulted in a negative output size, which is invalid. Check dimension ", d, " of your input.");
    shape[d] = size;
  }
  at::Tensor out = at::empty(shape, self.options().memory_format(self.suggest_memory_format()));
  if (out.numel() == 0) return out;
  if (self.numel() == 0) return out.fill_(value);
  TPU_OP("aten::constant_pad_nd")
      .in(self)
      .scalar(value, self.scalar_type())
      .attrs(lo)
      .attrs(hi)
      .out(out)
      .run([&](hlo::Builder& b, Values in, Values s) { return ValueList{lowering::constantPad(b, in[0], s[0], lo, hi)}; });
  return out;
}

at::Tensor flip(const at::Tensor& self, c10::IntArrayRef dims) {
  auto bits = at::dim_list_to_bitset(dims, self.dim());
  std::vector<int64_t> reversed;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (bits[d] && self.size(d) > 1) reversed.push_back(d);
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);  // CPU's layout (fuzz seed 875)
  if (out.numel() == 0) return out;
  TPU_OP("aten::flip").in(self).attrs(reversed).out(out).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{b.reverse(in[0], reversed)};
  });
  return out;
}

at::Tensor roll(const at::Tensor& self, c10::SymIntArrayRef symShifts, c10::IntArrayRef dimsIn) {
  auto shifts = C10_AS_INTARRAYREF_SLOW(symShifts);
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  bool flatten = dimsIn.empty();
  TORCH_CHECK(!flatten || shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dimsIn.size());
  TORCH_CHECK(flatten || shifts.size() == dimsIn.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dimsIn.size());
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(self.suggest_memory_format()));
  if (out.numel() == 0) return out;
  std::vector<int64_t> dims, sizes;
  if (flatten) {
    dims.push_back(0);
    sizes.push_back(self.numel());
  } else {
    for (int64_t d : dimsIn) {
      dims.push_back(at::maybe_wrap_dim(d, self.dim()));
      sizes.push_back(self.size(dims.back()));
    }
  }
  Op op = TPU_OP("aten::roll");
  op.in(self).attr(flatten).attrs(dims);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t n = sizes[i], s = ((shifts[i] % n) + n) % n;
    op.scalar((n - s) % n, c10::kLong);
  }
  op.out(out).run([&](hlo::Builder& b, Values in, Values s) {
    hlo::Value x = in[0];
    if (flatten) x = b.reshape(x, {x.type.numel()});
    return ValueList{lowering::roll(b, x, s, dims)};
  });
  return out;
}

// ---- where -------------------------------------------------------------------

void runWhere(const Arg& cond, const Arg& x, const Arg& y, const at::Tensor& out, c10::ScalarType result) {
  runPointwise(TPU_OP("aten::where"), {&cond, &x, &y}, out, result, [](hlo::Builder& b, std::vector<hlo::Value>& v) {
    hlo::Value pred = v[0].dtype() == hlo::DType::Pred ? v[0] : b.compare(hlo::Cmp::NE, v[0], b.scalarLike(v[0], 0));
    return b.select(pred, v[1], v[2]);
  });
}

void checkCondition(const at::Tensor& cond) {
  TORCH_CHECK(cond.scalar_type() == c10::kBool || cond.scalar_type() == c10::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", cond.scalar_type());
}

at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  checkCondition(condition);
  Arg c = Arg::of(condition), x = Arg::of(self), y = Arg::of(other);
  auto result = resultType({&x, &y});
  const at::Tensor& like = x.isTensor() ? self : y.isTensor() ? other : condition;
  at::Tensor out = emptyPointwise({&c, &x, &y}, broadcastShape({&c, &x, &y}), like.options().dtype(result));
  runWhere(c, x, y, out, result);
  return out;
}

at::Tensor& whereOut(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  checkCondition(condition);
  Arg c = Arg::of(condition), x = Arg::of(self), y = Arg::of(other);
  auto result = resultType({&x, &y});
  TORCH_CHECK(out.scalar_type() == result, "Expected out type to be ", result, " but got ", out.scalar_type());
  at::native::resize_output(out, broadcastShape({&c, &x, &y}));
  runWhere(c, x, y, out, result);
  return out;
}

// ---- clamp, clamp_min, clamp_max ------------------------------------------------

struct Bounds {
  std::optional<Arg> lo, hi;
};

void runClamp(const Arg& self, const Bounds& bounds, const at::Tensor& out, c10::ScalarType result) {
  if (out.numel() == 0) return;
  int64_t has = (bounds.lo ? 1 : 0) | (bounds.hi ? 2 : 0);
  Op op = TPU_OP("aten::clamp");
  op.attr(has);
  Arg none = Arg::of(c10::Scalar(0));
  const Arg& lo = bounds.lo ? *bounds.lo : none;
  const Arg& hi = bounds.hi ? *bounds.hi : none;
  runPointwise(op, {&self, &lo, &hi}, out, opmathType(result), [has](hlo::Builder& b, std::vector<hlo::Value>& v) {
    std::optional<hlo::Value> lo, hi;
    if (has & 1) lo = v[1];
    if (has & 2) hi = v[2];
    return lowering::clamp(b, v[0], lo, hi);
  });
}

c10::ScalarType clampResult(const Arg& self, const Bounds& bounds) {
  TORCH_CHECK(bounds.lo || bounds.hi, "torch.clamp: At least one of 'min' or 'max' must not be None");
  if (bounds.lo && bounds.hi) return resultType({&self, &*bounds.lo, &*bounds.hi});
  if (bounds.lo) return resultType({&self, &*bounds.lo});
  return resultType({&self, &*bounds.hi});
}

std::vector<int64_t> clampShape(const Arg& self, const Bounds& bounds) {
  const Arg* lo = bounds.lo ? &*bounds.lo : &self;
  const Arg* hi = bounds.hi ? &*bounds.hi : &self;
  return broadcastShape({&self, lo, hi});
}

at::Tensor clampFunctional(const at::Tensor& self, const Bounds& bounds) {
  Arg x = Arg::of(self);
  auto result = clampResult(x, bounds);
  const Arg* lo = bounds.lo ? &*bounds.lo : &x;
  const Arg* hi = bounds.hi ? &*bounds.hi : &x;
  at::Tensor out = emptyPointwise({&x, lo, hi}, clampShape(x, bounds), self.options().dtype(result));
  runClamp(x, bounds, out, result);
  return out;
}
at::Tensor& clampInplace(at::Tensor& self, const Bounds& bounds) {
  Arg x = Arg::of(self);
  auto result = clampResult(x, bounds);
  checkInplace("clamp_", self, clampShape(x, bounds), result);
  runClamp(x, bounds, self, result);
  return self;
}
at::Tensor& clampOut(const at::Tensor& self, const Bounds& bounds, at::Tensor& out) {
  Arg x = Arg::of(self);
  auto result = clampResult(x, bounds);
  prepareOut("clamp", out, clampShape(x, bounds), result);
  runClamp(x, bounds, out, result);
  return out;
}

std::optional<Arg> argOf(const std::optional<c10::Scalar>& s) {
  return s ? std::optional<Arg>(Arg::of(*s)) : std::nullopt;
}
std::optional<Arg> argOf(const std::optional<at::Tensor>& t) {
  return t && t->defined() ? std::optional<Arg>(Arg::of(*t)) : std::nullopt;
}

using OptScalar = std::optional<c10::Scalar>;
using OptTensor = std::optional<at::Tensor>;

at::Tensor clampS(const at::Tensor& self, const OptScalar& lo, const OptScalar& hi) {
  return clampFunctional(self, {argOf(lo), argOf(hi)});
}
at::Tensor& clampS_(at::Tensor& self, const OptScalar& lo, const OptScalar& hi) {
  return clampInplace(self, {argOf(lo), argOf(hi)});
}
at::Tensor& clampSOut(const at::Tensor& self, const OptScalar& lo, const OptScalar& hi, at::Tensor& out) {
  return clampOut(self, {argOf(lo), argOf(hi)}, out);
}
at::Tensor clampT(const at::Tensor& self, const OptTensor& lo, const OptTensor& hi) {
  return clampFunctional(self, {argOf(lo), argOf(hi)});
}
at::Tensor& clampT_(at::Tensor& self, const OptTensor& lo, const OptTensor& hi) {
  return clampInplace(self, {argOf(lo), argOf(hi)});
}
at::Tensor& clampTOut(const at::Tensor& self, const OptTensor& lo, const OptTensor& hi, at::Tensor& out) {
  return clampOut(self, {argOf(lo), argOf(hi)}, out);
}

// clamp_min (Max = false) and clamp_max (Max = true), Scalar or Tensor bound.
template <bool Max, class B>
struct ClampOne {
  static Bounds bounds(const B& v) {
    Bounds b;
    (Max ? b.hi : b.lo) = Arg::of(v);
    return b;
  }
  static at::Tensor functional(const at::Tensor& self, const B& v) { return clampFunctional(self, bounds(v)); }
  static at::Tensor& inplace(at::Tensor& self, const B& v) { return clampInplace(self, bounds(v)); }
  static at::Tensor& out(const at::Tensor& self, const B& v, at::Tensor& out) {
    return clampOut(self, bounds(v), out);
  }
};

// ---- masked_fill_ ----------------------------------------------------------------

void checkMask(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  checkInplace("masked_fill_", self, at::infer_size(self.sizes(), mask.sizes()), self.scalar_type());
  at::assert_no_partial_overlap(self, mask);
}

at::Tensor& maskedFillScalar(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value) {
  checkMask(self, mask);
  if (self.numel() == 0) return self;
  TPU_OP("aten::masked_fill_")
      .in(self)
      .in(mask)
      .scalar(value, self.scalar_type())
      .out(self)
      .run([](hlo::Builder& b, Values in, Values s) { return ValueList{lowering::maskedFill(b, in[0], in[1], s[0])}; });
  return self;
}

at::Tensor& maskedFillTensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  if (value.device().is_cpu()) return maskedFillScalar(self, mask, value.item());
  checkMask(self, mask);
  if (self.numel() == 0) return self;
  TPU_OP("aten::masked_fill_.Tensor")
      .in(self)
      .in(mask)
      .in(value)
      .out(self)
      .run([](hlo::Builder& b, Values in, Values) { return ValueList{lowering::maskedFill(b, in[0], in[1], in[2])}; });
  return self;
}

// ---- arange, linspace, eye -------------------------------------------------------

at::Tensor& arangeOut(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step, at::Tensor& out) {
  int64_t size = out.scalar_type() == c10::kLong ? at::native::compute_arange_size<int64_t>(start, end, step)
                                                 : at::native::compute_arange_size<double>(start, end, step);
  if (out.numel() != size) {
    if (out.numel() > 0)
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ", out.numel(),
                 " which does not match the computed number of elements ", size,
                 ". Note that this may occur as a result of rounding error. The out tensor will be resized to a "
                 "tensor of shape (",
                 size, ",).");
    out.resize_({size});
  }
  if (size == 0) return out;
  auto compute = c10::isIntegralType(out.scalar_type(), true) ? c10::kLong : opmathType(out.scalar_type());
  TPU_OP("aten::arange")
      .scalar(start, compute)
      .scalar(step, compute)
      .out(out)
      .run([size](hlo::Builder& b, Values, Values s) { return ValueList{lowering::arange(b, s[0], s[1], size)}; });
  return out;
}

at::Tensor& linspaceOut(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  auto t = out.scalar_type();
  if (c10::isComplexType(t)) {
    // start + k * step is linear in each part: the real and imaginary parts are real linspaces.
    auto part = [&](bool imag) {
      c10::complex<double> a = start.toComplexDouble(), e = end.toComplexDouble();
      return at::linspace(imag ? a.imag() : a.real(), imag ? e.imag() : e.real(), steps,
                          out.options().dtype(c10::toRealValueType(t)));
    };
    out.copy_(at::complex(part(false), part(true)));
    return out;
  }
  TPU_OP("aten::linspace")
      .scalar(start, t)
      .scalar(end, t)
      .scalar(c10::Scalar(std::max<int64_t>(steps - 1, 1)), at::kDouble)
      .out(out)
      .run([steps](hlo::Builder& b, Values, Values s) {
        return ValueList{lowering::linspace(b, s[0], s[1], steps, s[2])};
      });
  return out;
}

at::Tensor& eyeMOut(c10::SymInt symN, c10::SymInt symM, at::Tensor& out) {
  int64_t n = symN.expect_int(), m = symM.expect_int();
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  out.resize_({n, m});
  if (out.numel() == 0) return out;
  TPU_OP("aten::eye").out(out).run([n, m](hlo::Builder& b, Values, Values) { return ValueList{lowering::eye(b, n, m)}; });
  return out;
}

at::Tensor& eyeOut(c10::SymInt n, at::Tensor& out) { return eyeMOut(n, n, out); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat", cat);
  m.impl("cat.out", catOut);
  m.impl("tril", &Triangle<false>::functional);
  m.impl("tril_", &Triangle<false>::inplace);
  m.impl("tril.out", &Triangle<false>::out);
  m.impl("triu", &Triangle<true>::functional);
  m.impl("triu_", &Triangle<true>::inplace);
  m.impl("triu.out", &Triangle<true>::out);
  m.impl("constant_pad_nd", constantPadNd);
  m.impl("flip", flip);
  m.impl("roll", roll);
  m.impl("where.self", where);
  m.impl("where.self_out", whereOut);
  m.impl("clamp", clampS);
  m.impl("clamp_", clampS_);
  m.impl("clamp.out", clampSOut);
  m.impl("clamp.Tensor", clampT);
  m.impl("clamp_.Tensor", clampT_);
  m.impl("clamp.Tensor_out", clampTOut);
  m.impl("clamp_min", &ClampOne<false, c10::Scalar>::functional);
  m.impl("clamp_min_", &ClampOne<false, c10::Scalar>::inplace);
  m.impl("clamp_min.out", &ClampOne<false, c10::Scalar>::out);
  m.impl("clamp_min.Tensor", &ClampOne<false, at::Tensor>::functional);
  m.impl("clamp_min_.Tensor", &ClampOne<false, at::Tensor>::inplace);
  m.impl("clamp_min.Tensor_out", &ClampOne<false, at::Tensor>::out);
  m.impl("clamp_max", &ClampOne<true, c10::Scalar>::functional);
  m.impl("clamp_max_", &ClampOne<true, c10::Scalar>::inplace);
  m.impl("clamp_max.out", &ClampOne<true, c10::Scalar>::out);
  m.impl("clamp_max.Tensor", &ClampOne<true, at::Tensor>::functional);
  m.impl("clamp_max_.Tensor", &ClampOne<true, at::Tensor>::inplace);
  m.impl("clamp_max.Tensor_out", &ClampOne<true, at::Tensor>::out);
  m.impl("masked_fill_.Scalar", maskedFillScalar);
  m.impl("masked_fill_.Tensor", maskedFillTensor);
  m.impl("arange.start_out", arangeOut);
  m.impl("linspace.out", linspaceOut);
  m.impl("eye.out", eyeOut);
  m.impl("eye.m_out", eyeMOut);
}

}  // namespace tpu::aten
