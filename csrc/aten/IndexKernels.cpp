// Indexing kernels: index_select, gather, scatter (src/value/reduce/add and
// scatter_reduce.two), index_add, index_fill, advanced indexing (index.Tensor,
// _index_put_impl_), nonzero, masked_select and embedding_dense_backward.
//
// Negative indices wrap where PyTorch wraps them (advanced indexing,
// index_fill). Out-of-range indices are never silent: each kernel also
// returns an "any index out of range" flag computed in the same program
// (Op::checksIndices); the runtime raises CPU's error type for the op
// (RuntimeError for gather, scatter and index_add, else IndexError) naming it at
// the next synchronization (at the op itself in debug mode). Like CUDA, strict
// mode raises late; XLA's clamped result is never observable before that.
// nonzero, masked_select and bool-mask indexing read one count from the
// device (a sync), as their result shape depends on the data.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Elementwise.h"
#include "csrc/lowering/Index.h"

namespace tpu::aten {
namespace {

using lowering::Reduce;
using OptTensorList = c10::List<std::optional<at::Tensor>>;

void prepareExactOut(at::Tensor& out, c10::IntArrayRef shape, c10::ScalarType t) {
  TORCH_CHECK(out.scalar_type() == t, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(t),
              ", but got ", out.dtype(), " instead");
  at::native::resize_output(out, shape);
}

// 0-dim values take part in dim-wise rules as 1-element vectors.
hlo::Value atLeast1d(hlo::Builder& b, hlo::Value v) { return v.rank() == 0 ? b.reshape(v, {1}) : v; }

// ---- nonzero / masked_select ----------------------------------------------------

// The number of nonzero elements of `t`; reads one integer from the device.
int64_t nonzeroCount(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  at::Tensor count = at::empty({}, t.options().dtype(at::kLong));
  TPU_OP("aten::count_nonzero").in(t).out(count).run([](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::countNonzero(b, in[0])};
  });
  return count.item<int64_t>();
}

at::Tensor& nonzeroOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  int64_t count = nonzeroCount(self);
  at::native::resize_output(out, {count, self.dim()});
  if (out.numel() == 0) return out;
  TPU_OP("aten::nonzero").in(self).out(out).run([count](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::nonzero(b, in[0], count)};
  });
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzeroOut(self, out);
}

at::Tensor& nonzeroStaticOut(const at::Tensor& self, c10::SymInt symSize, int64_t fill, at::Tensor& out) {
  int64_t size = symSize.expect_int();
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero_static: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  at::native::resize_output(out, {size, self.dim()});
  if (out.numel() == 0) return out;
  if (self.numel() == 0) return out.fill_(fill);
  TPU_OP("aten::nonzero_static").in(self).scalar(fill, at::kLong).out(out).run([size](hlo::Builder& b, Values in, Values s) {
    return ValueList{lowering::nonzeroStatic(b, in[0], size, s[0])};
  });
  return out;
}

at::Tensor nonzeroStatic(const at::Tensor& self, c10::SymInt size, int64_t fill) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzeroStaticOut(self, size, fill, out);
}

// No host sync: the positions come from a device sort. Like CUDA, a source
// with fewer elements than the mask has ones is not detected.
at::Tensor& maskedScatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter_: expected self and source to have same dtypes but got", self.scalar_type(), " and ",
              source.scalar_type());
  TORCH_CHECK(mask.scalar_type() == at::kBool || mask.scalar_type() == at::kByte,
              "masked_scatter_ only supports boolean masks, but got mask with dtype ", mask.scalar_type());
  checkInplace("masked_scatter_", self, at::infer_size(self.sizes(), mask.sizes()), self.scalar_type());
  if (self.numel() == 0 || source.numel() == 0) return self;
  at::Tensor m = mask.expand(self.sizes());
  TPU_OP("aten::masked_scatter_").in(self).in(m).in(source).out(self).run([](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::maskedScatter(b, in[0], in[1], in[2])};
  });
  return self;
}

at::Tensor& maskedSelectOut(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(mask.scalar_type() == at::kBool || mask.scalar_type() == at::kByte,
              "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "masked_select(): self and result must have the same scalar type");
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  at::Tensor x = self.expand(shape), m = mask.expand(shape);
  int64_t count = nonzeroCount(m);
  at::native::resize_output(out, {count});
  if (count == 0) return out;
  TPU_OP("aten::masked_select").in(x).in(m).out(out).run([count](hlo::Builder& b, Values in, Values) {
    return ValueList{lowering::maskedSelect(b, in[0], in[1], count)};
  });
  return out;
}

at::Tensor maskedSelect(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor out = at::empty({0}, self.options());
  return maskedSelectOut(self, mask, out);
}

// ---- index_select ------------------------------------------------------------------

std::vector<int64_t> indexSelectShape(const at::Tensor& self, int64_t& dim, const at::Tensor& index) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (self.dim() == 0) return {};
  TORCH_CHECK(self.size(dim) > 0 || index.numel() == 0, "index_select(): self indexing axis dim should be positive");
  auto shape = self.sizes().vec();
  shape[dim] = index.numel();
  return shape;
}

void runIndexSelect(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& out) {
  if (out.numel() == 0) return;
  TPU_OP("aten::index_select").in(self).in(index).attr(dim).checksIndices().out(out).run(
      [dim](hlo::Builder& b, Values in, Values) {
        hlo::Value x = atLeast1d(b, in[0]);
        hlo::Value idx = b.reshape(in[1], {in[1].type.numel()});
        return ValueList{lowering::indexSelect(b, x, idx, dim), lowering::anyOutOfRange(b, idx, 0, x.shape()[dim])};
      });
}

at::Tensor indexSelect(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty(indexSelectShape(self, dim, index), self.options());
  runIndexSelect(self, dim, index, out);
  return out;
}

at::Tensor& indexSelectOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  auto shape = indexSelectShape(self, dim, index);
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "index_select(): self and result must have the same scalar type");
  at::assert_no_overlap(out, self);
  at::native::resize_output(out, shape);
  runIndexSelect(self, dim, index, out);
  return out;
}

// ---- gather ---------------------------------------------------------------------------

int64_t checkGather(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  if (index.numel() == 0) return wrapped;
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "gather(): Expected dtype int32/int64 for index");
  at::native::gather_shape_check(self, wrapped, index);
  TORCH_CHECK(self.dim() == 0 || self.size(wrapped) > 0, "index 0 is out of bounds for dimension ", wrapped,
              " with size 0");
  return wrapped;
}

void runGather(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& out) {
  if (out.numel() == 0) return;
  TPU_OP("aten::gather").in(self).in(index).attr(dim).checksIndices(runtime::ErrorKind::Runtime).out(out).run(
      [dim](hlo::Builder& b, Values in, Values) {
        hlo::Value x = atLeast1d(b, in[0]), idx = atLeast1d(b, in[1]);
        return ValueList{lowering::gatherDim(b, x, idx, dim), lowering::anyOutOfRange(b, idx, 0, x.shape()[dim])};
      });
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparseGrad) {
  dim = checkGather(self, dim, index);
  at::Tensor out = at::empty(index.sizes(), self.options());
  runGather(self, dim, index, out);
  return out;
}

at::Tensor& gatherOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparseGrad, at::Tensor& out) {
  dim = checkGather(self, dim, index);
  prepareExactOut(out, index.sizes(), self.scalar_type());
  at::assert_no_overlap(out, self);
  runGather(self, dim, index, out);
  return out;
}

// ---- scatter family -------------------------------------------------------------------

Reduce legacyReduce(c10::string_view reduce) {
  if (reduce == "add") return Reduce::Add;
  TORCH_CHECK(reduce == "multiply", "reduce argument must be either add or multiply.");
  return Reduce::Mul;
}

// scatter_reduce.two: (reduction, is mean)
std::pair<Reduce, bool> twoReduce(c10::string_view reduce) {
  if (reduce == "sum") return {Reduce::Add, false};
  if (reduce == "prod") return {Reduce::Mul, false};
  if (reduce == "mean") return {Reduce::Add, true};
  if (reduce == "amax") return {Reduce::Max, false};
  if (reduce == "amin") return {Reduce::Min, false};
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
}

struct ScatterSpec {
  const at::Tensor* src = nullptr;  // or a scalar value
  c10::Scalar value;
  Reduce reduce = Reduce::Replace;
  bool includeSelf = true;
  bool mean = false;
};

int64_t checkScatter(const at::Tensor& self, int64_t dim, const at::Tensor& index, const ScatterSpec& s) {
  int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  std::optional<at::Tensor> src = s.src ? std::optional<at::Tensor>(*s.src) : std::nullopt;
  at::native::scatter_gather_dtype_check("scatter", self, index, src);
  at::native::scatter_shape_check(self, wrapped, index, src);
  return wrapped;
}

void runScatter(const at::Tensor& self, int64_t dim, const at::Tensor& index, const ScatterSpec& s,
                const at::Tensor& out) {
  if (index.numel() == 0 || out.numel() == 0) {
    if (!out.is_same(self)) out.copy_(self);
    return;
  }
  // As CPU (the in-place form included): the written tensor shares no element with index or src.
  at::assert_no_overlap(out, index);
  if (s.src) at::assert_no_overlap(out, *s.src);
  auto compute = s.reduce == Reduce::Replace ? valueType(self.scalar_type()) : opmathType(self.scalar_type());
  hlo::DType t = toHlo(compute);
  Op op = TPU_OP("aten::scatter");
  op.in(self).in(index);
  if (s.src) op.in(*s.src);
  else op.scalar(s.value, compute);
  op.attr(dim).attr(static_cast<int64_t>(s.reduce)).attr(s.includeSelf).attr(s.mean).attr(s.src != nullptr);
  bool hasSrc = s.src != nullptr;
  op.checksIndices(runtime::ErrorKind::Runtime).out(out).run([&](hlo::Builder& b, Values in, Values ops) {
    hlo::Value x = b.convert(atLeast1d(b, in[0]), t);
    hlo::Value idx = b.convert(atLeast1d(b, in[1]), hlo::DType::S64);
    hlo::Value upd = hasSrc ? b.convert(atLeast1d(b, in[2]), t) : b.broadcast(ops[0], idx.shape());
    hlo::Type idxType{t, idx.shape()};
    if (!s.includeSelf) {
      hlo::Value init = b.broadcast(lowering::reduceIdentity(b, s.mean ? Reduce::Add : s.reduce, t), idx.shape());
      x = lowering::scatterDim(b, x, idx, init, dim, Reduce::Replace);
    }
    hlo::Value r = lowering::scatterDim(b, x, idx, upd, dim, s.reduce);
    if (s.mean) {
      hlo::Value count = b.full(x.type, s.includeSelf ? 1 : 0);
      count = lowering::scatterDim(b, count, idx, b.full(idxType, 1), dim, Reduce::Add);
      count = b.select(b.compare(hlo::Cmp::EQ, count, b.scalarLike(count, 0)), b.scalarLike(count, 1), count);
      r = lowering::binary(b, hlo::isFloat(t) ? lowering::Binary::Div : lowering::Binary::DivFloor, r, count);
    }
    return ValueList{r, lowering::anyOutOfRange(b, idx, 0, x.shape()[dim])};
  });
}

at::Tensor scatterFunctional(const at::Tensor& self, int64_t dim, const at::Tensor& index, const ScatterSpec& s) {
  dim = checkScatter(self, dim, index, s);
  at::Tensor out = at::empty(self.sizes(), self.options());
  runScatter(self, dim, index, s, out);
  return out;
}
at::Tensor& scatterInplace(at::Tensor& self, int64_t dim, const at::Tensor& index, const ScatterSpec& s) {
  dim = checkScatter(self, dim, index, s);
  runScatter(self, dim, index, s, self);
  return self;
}
at::Tensor& scatterOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const ScatterSpec& s,
                       at::Tensor& out) {
  dim = checkScatter(self, dim, index, s);
  prepareExactOut(out, self.sizes(), self.scalar_type());
  runScatter(self, dim, index, s, out);
  return out;
}

ScatterSpec srcSpec(const at::Tensor& src, Reduce r = Reduce::Replace) {
  ScatterSpec s;
  s.src = &src;
  s.reduce = r;
  return s;
}
ScatterSpec valueSpec(const c10::Scalar& v, Reduce r = Reduce::Replace) {
  ScatterSpec s;
  s.value = v;
  s.reduce = r;
  return s;
}
ScatterSpec twoSpec(const at::Tensor& src, c10::string_view reduce, bool includeSelf) {
  auto [r, mean] = twoReduce(reduce);
  ScatterSpec s = srcSpec(src, r);
  s.includeSelf = includeSelf;
  s.mean = mean;
  return s;
}

using T = at::Tensor;
using SV = c10::string_view;
T scatterSrc(const T& self, int64_t dim, const T& index, const T& src) {
  return scatterFunctional(self, dim, index, srcSpec(src));
}
T& scatterSrc_(T& self, int64_t dim, const T& index, const T& src) { return scatterInplace(self, dim, index, srcSpec(src)); }
T& scatterSrcOut(const T& self, int64_t dim, const T& index, const T& src, T& out) {
  return scatterOut(self, dim, index, srcSpec(src), out);
}
T scatterValue(const T& self, int64_t dim, const T& index, const c10::Scalar& v) {
  return scatterFunctional(self, dim, index, valueSpec(v));
}
T& scatterValue_(T& self, int64_t dim, const T& index, const c10::Scalar& v) {
  return scatterInplace(self, dim, index, valueSpec(v));
}
T& scatterValueOut(const T& self, int64_t dim, const T& index, const c10::Scalar& v, T& out) {
  return scatterOut(self, dim, index, valueSpec(v), out);
}
T scatterReduce(const T& self, int64_t dim, const T& index, const T& src, SV reduce) {
  return scatterFunctional(self, dim, index, srcSpec(src, legacyReduce(reduce)));
}
T& scatterReduce_(T& self, int64_t dim, const T& index, const T& src, SV reduce) {
  return scatterInplace(self, dim, index, srcSpec(src, legacyReduce(reduce)));
}
T& scatterReduceOut(const T& self, int64_t dim, const T& index, const T& src, SV reduce, T& out) {
  return scatterOut(self, dim, index, srcSpec(src, legacyReduce(reduce)), out);
}
T scatterValueReduce(const T& self, int64_t dim, const T& index, const c10::Scalar& v, SV reduce) {
  return scatterFunctional(self, dim, index, valueSpec(v, legacyReduce(reduce)));
}
T& scatterValueReduce_(T& self, int64_t dim, const T& index, const c10::Scalar& v, SV reduce) {
  return scatterInplace(self, dim, index, valueSpec(v, legacyReduce(reduce)));
}
T& scatterValueReduceOut(const T& self, int64_t dim, const T& index, const c10::Scalar& v, SV reduce, T& out) {
  return scatterOut(self, dim, index, valueSpec(v, legacyReduce(reduce)), out);
}
T scatterAdd(const T& self, int64_t dim, const T& index, const T& src) {
  return scatterFunctional(self, dim, index, srcSpec(src, Reduce::Add));
}
T& scatterAdd_(T& self, int64_t dim, const T& index, const T& src) {
  return scatterInplace(self, dim, index, srcSpec(src, Reduce::Add));
}
T& scatterAddOut(const T& self, int64_t dim, const T& index, const T& src, T& out) {
  return scatterOut(self, dim, index, srcSpec(src, Reduce::Add), out);
}
T scatterReduceTwo(const T& self, int64_t dim, const T& index, const T& src, SV reduce, bool includeSelf) {
  return scatterFunctional(self, dim, index, twoSpec(src, reduce, includeSelf));
}
T& scatterReduceTwo_(T& self, int64_t dim, const T& index, const T& src, SV reduce, bool includeSelf) {
  return scatterInplace(self, dim, index, twoSpec(src, reduce, includeSelf));
}
T& scatterReduceTwoOut(const T& self, int64_t dim, const T& index, const T& src, SV reduce, bool includeSelf, T& out) {
  return scatterOut(self, dim, index, twoSpec(src, reduce, includeSelf), out);
}

// ---- index_add / index_fill -------------------------------------------------------------

int64_t checkIndexAdd(const T& self, int64_t dim, const T& index, const T& source) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_add_(): Index is supposed to be a vector, but got dim: ", index.dim(),
                    " with type: ", index.scalar_type(), " and size: ", index.sizes());
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_add_(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_add_(): self (", self.scalar_type(), ") and source (",
              source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source.dim(), "index_add_(): Indexing dim ", dim,
              " is out of bounds of the source tensor with dim ", source.dim());
  int64_t expected = source.dim() == 0 ? 1 : source.size(dim);
  TORCH_CHECK(index.numel() == expected, "index_add_(): Number of indices (", index.numel(),
              ") should be equal to source.size(dim): (", expected, "), for dim: ", dim);
  if (self.dim() > 0 && source.dim() > 0) {
    bool match = self.dim() == source.dim();
    for (int64_t d = 0; match && d < self.dim(); ++d) match = d == dim || self.size(d) == source.size(d);
    TORCH_CHECK(match, "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = ",
                self.sizes(), " source.shape = ", source.sizes());
  }
  return dim;
}

void runIndexAdd(const T& self, int64_t dim, const T& index, const T& source, const c10::Scalar& alpha, const T& out) {
  if (index.numel() == 0 || out.numel() == 0) {
    if (!out.is_same(self)) out.copy_(self);
    return;
  }
  at::assert_no_overlap(out, index);  // as CPU's index_add
  at::assert_no_overlap(out, source);
  auto compute = opmathType(self.scalar_type());
  hlo::DType t = toHlo(compute);
  TPU_OP("aten::index_add")
      .in(self)
      .in(index)
      .in(source)
      .scalar(alpha, compute)
      .attr(dim)
      .checksIndices(runtime::ErrorKind::Runtime)
      .out(out)
      .run([&](hlo::Builder& b, Values in, Values s) {
        hlo::Value x = b.convert(atLeast1d(b, in[0]), t);
        hlo::Value idx = b.reshape(in[1], {in[1].type.numel()});
        hlo::Shape srcShape = x.shape();
        srcShape[dim] = idx.shape()[0];
        hlo::Value src = b.reshape(b.convert(in[2], t), srcShape);
        src = lowering::binary(b, lowering::Binary::Mul, src, b.broadcast(s[0], srcShape));
        return ValueList{lowering::indexScatter(b, x, idx, src, dim, Reduce::Add),
                         lowering::anyOutOfRange(b, idx, 0, x.shape()[dim])};
      });
}

T indexAdd(const T& self, int64_t dim, const T& index, const T& source, const c10::Scalar& alpha) {
  dim = checkIndexAdd(self, dim, index, source);
  T out = at::empty(self.sizes(), self.options());
  runIndexAdd(self, dim, index, source, alpha, out);
  return out;
}
T& indexAdd_(T& self, int64_t dim, const T& index, const T& source, const c10::Scalar& alpha) {
  dim = checkIndexAdd(self, dim, index, source);
  runIndexAdd(self, dim, index, source, alpha, self);
  return self;
}
T& indexAddOut(const T& self, int64_t dim, const T& index, const T& source, const c10::Scalar& alpha, T& out) {
  dim = checkIndexAdd(self, dim, index, source);
  prepareExactOut(out, self.sizes(), self.scalar_type());
  runIndexAdd(self, dim, index, source, alpha, out);
  return out;
}

void runIndexFill(T& self, int64_t dim, const T& index, const Arg& value) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_fill_(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  if (index.numel() == 0 || self.numel() == 0) return;
  Op op = TPU_OP("aten::index_fill_");
  op.in(self).in(index);
  if (value.isTensor()) op.in(value.tensor);
  else op.scalar(value.scalar, self.scalar_type());
  int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  op.attr(dim).attr(value.isTensor()).checksIndices().out(self).run([&](hlo::Builder& b, Values in, Values s) {
    hlo::Value x = atLeast1d(b, in[0]);
    hlo::Value raw = b.reshape(in[1], {in[1].type.numel()});
    hlo::Value idx = lowering::wrapIndex(b, raw, size);
    hlo::Shape shape = x.shape();
    shape[dim] = idx.shape()[0];
    hlo::Value v = b.convert(value.isTensor() ? in[2] : s[0], x.dtype());
    return ValueList{lowering::indexScatter(b, x, idx, b.broadcast(v, shape), dim, Reduce::Replace),
                     lowering::anyOutOfRange(b, raw, -size, size)};
  });
}

T& indexFillScalar(T& self, int64_t dim, const T& index, const c10::Scalar& value) {
  runIndexFill(self, dim, index, Arg::of(value));
  return self;
}
T& indexFillTensor(T& self, int64_t dim, const T& index, const T& value) {
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  runIndexFill(self, dim, index, Arg::of(value));
  return self;
}

// ---- advanced indexing ---------------------------------------------------------------------

struct IndexPlan {
  std::vector<at::Tensor> indices;  // on self's device, expanded to `batch`
  std::vector<int64_t> dims;        // the dims they index, ascending
  std::vector<int64_t> batch, shape;
};

IndexPlan planIndex(const T& self, const OptTensorList& list) {
  TORCH_CHECK_INDEX(list.size() <= static_cast<size_t>(self.dim()), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", list.size(), ")");
  at::native::checkIndexTensorTypes(list, /*allow_int=*/true);
  std::vector<T> expanded = at::native::expandTensors(self, list, /*ensure_same_device=*/true);
  TORCH_CHECK_INDEX(expanded.size() <= static_cast<size_t>(self.dim()), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", expanded.size(), ")");
  IndexPlan plan;
  std::vector<T> defined;
  for (size_t d = 0; d < expanded.size(); ++d) {
    if (!expanded[d].defined()) continue;
    plan.dims.push_back(static_cast<int64_t>(d));
    defined.push_back(expanded[d]);
  }
  try {
    for (const T& t : defined) plan.batch = at::infer_size(plan.batch, t.sizes());
  } catch (const std::exception&) {
    std::ostringstream shapes;
    for (size_t i = 0; i < defined.size(); ++i) shapes << (i ? ", " : "") << defined[i].sizes();
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                      shapes.str());
  }
  int64_t batchNumel = c10::multiply_integers(plan.batch);
  for (size_t i = 0; i < defined.size(); ++i) {
    int64_t d = plan.dims[i];
    TORCH_CHECK_INDEX(self.size(d) > 0 || batchNumel == 0, "index is out of bounds for dimension ", d,
                      " with size 0");
    plan.indices.push_back(defined[i].expand(plan.batch));
  }
  if (!plan.dims.empty()) plan.shape = lowering::advancedIndexShape(self.sizes().vec(), plan.batch, plan.dims);
  return plan;
}

// The wrapped indices in[1..] of x = in[0] into `idx`; returns the pred
// "some index is outside [-size, size)".
hlo::Value checkedIndices(hlo::Builder& b, Values in, const std::vector<int64_t>& dims, std::vector<hlo::Value>& idx) {
  hlo::Value oob = b.constantInt(hlo::DType::Pred, 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t size = in[0].shape()[dims[i]];
    idx.push_back(lowering::wrapIndex(b, in[1 + i], size));
    oob = b.binary("or", oob, lowering::anyOutOfRange(b, in[1 + i], -size, size));
  }
  return oob;
}

void runIndex(const T& self, const IndexPlan& plan, const T& out) {
  if (out.numel() == 0) return;
  Op op = TPU_OP("aten::index.Tensor");
  op.in(self);
  for (const T& i : plan.indices) op.in(i);
  op.attrs(plan.dims).checksIndices().out(out).run([&](hlo::Builder& b, Values in, Values) {
    std::vector<hlo::Value> idx;
    hlo::Value oob = checkedIndices(b, in, plan.dims, idx);
    return ValueList{lowering::advancedIndex(b, in[0], idx, plan.dims), oob};
  });
}

T index(const T& self, const OptTensorList& indices) {
  IndexPlan plan = planIndex(self, indices);
  if (plan.dims.empty()) return self.clone();
  T out = at::empty(plan.shape, self.options());
  runIndex(self, plan, out);
  return out;
}

T& indexOut(const T& self, const OptTensorList& indices, T& out) {
  IndexPlan plan = planIndex(self, indices);
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "index_out: self (", self.scalar_type(), ") and result (",
              out.scalar_type(), ") must have the same scalar type");
  at::assert_no_overlap(out, self);
  if (plan.dims.empty()) {
    at::native::resize_output(out, self.sizes());
    return out.copy_(self);
  }
  at::native::resize_output(out, plan.shape);
  runIndex(self, plan, out);
  return out;
}

// A single bool mask with one value: a masked fill (or add), no sync needed.
// Returns the mask broadcastable to self, or an undefined tensor.
T singleMask(const T& self, const OptTensorList& list) {
  int64_t before = 0;
  T mask;
  for (const std::optional<T>& i : list) {
    if (!i.has_value() || !i->defined()) {
      if (!mask.defined()) ++before;
      continue;
    }
    if ((i->scalar_type() != at::kBool && i->scalar_type() != at::kByte) || i->device() != self.device() ||
        mask.defined())
      return T();
    mask = *i;
  }
  if (!mask.defined() || mask.dim() == 0) return T();
  for (int64_t j = 0; j < mask.dim(); ++j) {
    int64_t d = before + j;
    TORCH_CHECK_INDEX(d < self.dim() && mask.size(j) == self.size(d), "The shape of the mask ", mask.sizes(),
                      " at index ", j, " does not match the shape of the indexed tensor ", self.sizes(),
                      " at index ", d);
  }
  std::vector<int64_t> shape(before, 1);
  for (int64_t s : mask.sizes()) shape.push_back(s);
  while (static_cast<int64_t>(shape.size()) < self.dim()) shape.push_back(1);
  return mask.to(at::kBool).view(shape);
}

void runMaskedPut(T& self, const T& mask, const T& value, bool accumulate) {
  if (self.numel() == 0) return;
  Op op = TPU_OP("aten::index_put_.mask");
  op.in(self).in(mask);
  if (value.device().is_cpu()) op.scalar(value.item(), self.scalar_type());
  else op.in(value.reshape({}));
  bool onHost = value.device().is_cpu();
  op.attr(accumulate).attr(onHost).out(self).run([&](hlo::Builder& b, Values in, Values s) {
    hlo::Value v = b.convert(onHost ? s[0] : in[2], in[0].dtype());
    if (accumulate) v = lowering::binary(b, lowering::Binary::Add, in[0], b.broadcast(v, in[0].shape()));
    return ValueList{lowering::where(b, in[1], v, in[0])};
  });
}

T& indexPutImpl(T& self, const OptTensorList& indices, const T& values, bool accumulate, bool unsafe) {
  TORCH_CHECK_INDEX(indices.size() <= static_cast<size_t>(self.dim()), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  TORCH_CHECK(self.scalar_type() == values.scalar_type(),
              "Index put requires the source and destination dtypes match, got ", self.scalar_type(),
              " for the destination and ", values.scalar_type(), " for the source.");
  if (values.numel() == 1) {
    T mask = singleMask(self, indices);
    if (mask.defined()) {
      runMaskedPut(self, mask, values, accumulate);
      return self;
    }
  }
  IndexPlan plan = planIndex(self, indices);
  T vals = values.device() == self.device() ? values : values.to(self.device());
  if (plan.dims.empty()) {
    TORCH_CHECK(at::is_expandable_to(vals.sizes(), self.sizes()), "shape mismatch: value tensor of shape ",
                vals.sizes(), " cannot be broadcast to indexing result of shape ", self.sizes());
    return accumulate ? self.add_(vals) : self.copy_(vals);
  }
  TORCH_CHECK(at::is_expandable_to(vals.sizes(), plan.shape), "shape mismatch: value tensor of shape ", vals.sizes(),
              " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(plan.shape));
  if (c10::multiply_integers(plan.shape) == 0) return self;
  at::assert_no_overlap(self, vals);
  for (const T& i : plan.indices) at::assert_no_overlap(self, i);
  Op op = TPU_OP("aten::_index_put_impl_");
  op.in(self);
  for (const T& i : plan.indices) op.in(i);
  op.in(vals.expand(plan.shape)).attrs(plan.dims).attr(accumulate).checksIndices().out(self).run(
      [&](hlo::Builder& b, Values in, Values) {
        std::vector<hlo::Value> idx;
        hlo::Value oob = checkedIndices(b, in, plan.dims, idx);
        return ValueList{lowering::advancedIndexPut(b, in[0], idx, plan.dims, in[1 + plan.dims.size()],
                                                    accumulate ? Reduce::Add : Reduce::Replace),
                         oob};
      });
  return self;
}

// ---- embedding backward --------------------------------------------------------------------

T embeddingDenseBackward(const T& grad, const T& indices, c10::SymInt numWeightsSym, c10::SymInt paddingIdxSym,
                         bool scaleGradByFreq) {
  at::checkScalarTypes("embedding_backward", at::TensorArg(indices, "indices", 2), {at::kLong, at::kInt});
  int64_t numWeights = numWeightsSym.expect_int(), paddingIdx = paddingIdxSym.expect_int();
  int64_t width = grad.dim() == 0 ? 1 : grad.size(-1);
  T out = at::empty({numWeights, width}, grad.options());
  if (out.numel() == 0) return out;
  if (indices.numel() == 0) return out.zero_();
  TORCH_CHECK(grad.numel() == indices.numel() * width, "embedding_backward: grad has ", grad.numel(),
              " elements, expected ", indices.numel() * width);
  hlo::DType t = toHlo(opmathType(grad.scalar_type()));
  TPU_OP("aten::embedding_dense_backward")
      .in(grad)
      .in(indices)
      .attr(paddingIdx)
      .attr(scaleGradByFreq)
      .out(out)
      .run([&](hlo::Builder& b, Values in, Values) {
        int64_t n = in[1].type.numel();
        hlo::Value g = b.reshape(b.convert(in[0], t), {n, width});
        hlo::Value idx = b.reshape(in[1], {n});
        return ValueList{lowering::embeddingBackward(b, g, idx, numWeights, paddingIdx, scaleGradByFreq)};
      });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", nonzero);
  m.impl("nonzero.out", nonzeroOut);
  m.impl("nonzero_static", nonzeroStatic);
  m.impl("nonzero_static.out", nonzeroStaticOut);
  m.impl("masked_scatter_", maskedScatter_);
  m.impl("masked_select", maskedSelect);
  m.impl("masked_select.out", maskedSelectOut);
  m.impl("index_select", indexSelect);
  m.impl("index_select.out", indexSelectOut);
  m.impl("gather", gather);
  m.impl("gather.out", gatherOut);
  m.impl("scatter.src", scatterSrc);
  m.impl("scatter_.src", scatterSrc_);
  m.impl("scatter.src_out", scatterSrcOut);
  m.impl("scatter.value", scatterValue);
  m.impl("scatter_.value", scatterValue_);
  m.impl("scatter.value_out", scatterValueOut);
  m.impl("scatter.reduce", scatterReduce);
  m.impl("scatter_.reduce", scatterReduce_);
  m.impl("scatter.reduce_out", scatterReduceOut);
  m.impl("scatter.value_reduce", scatterValueReduce);
  m.impl("scatter_.value_reduce", scatterValueReduce_);
  m.impl("scatter.value_reduce_out", scatterValueReduceOut);
  m.impl("scatter_add", scatterAdd);
  m.impl("scatter_add_", scatterAdd_);
  m.impl("scatter_add.out", scatterAddOut);
  m.impl("scatter_reduce.two", scatterReduceTwo);
  m.impl("scatter_reduce_.two", scatterReduceTwo_);
  m.impl("scatter_reduce.two_out", scatterReduceTwoOut);
  m.impl("index_add", indexAdd);
  m.impl("index_add_", indexAdd_);
  m.impl("index_add.out", indexAddOut);
  m.impl("index_fill_.int_Scalar", indexFillScalar);
  m.impl("index_fill_.int_Tensor", indexFillTensor);
  m.impl("index.Tensor", index);
  m.impl("index.Tensor_out", indexOut);
  m.impl("_index_put_impl_", indexPutImpl);
  m.impl("embedding_dense_backward", embeddingDenseBackward);
}

}  // namespace tpu::aten
