// Sorting and order statistics: sort (stable), topk, kthvalue, median and
// nanmedian (full and per dim), cummax/cummin, logcumsumexp, searchsorted and
// bucketize, isin, unique (_unique2, _unique, unique_consecutive), and small
// ops built on existing kernels: equal, vdot, trace, take, put_, index_copy.
//
// unique reads the number of distinct values from the device (a sync), as its
// result shape depends on the data. NaN sorts as the largest value, ties keep
// their input order (stable), as on CPU.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Sort.h"

namespace tpu::aten {
namespace {

// Sorting works on numbers: bool sorts as uint8 (the runtime converts results back).
hlo::Value sortable(hlo::Builder& b, hlo::Value v) {
  v = v.rank() == 0 ? b.reshape(v, {1}) : v;
  return v.dtype() == hlo::DType::Pred ? b.convert(v, hlo::DType::U8) : v;
}

void prepare(at::Tensor& out, c10::IntArrayRef shape, c10::ScalarType t, const char* op) {
  TORCH_CHECK(out.scalar_type() == t, op, ": expected out tensor to have dtype ", t, ", but got ", out.scalar_type());
  at::native::resize_output(out, shape);
}

std::vector<int64_t> reducedShape(const at::Tensor& self, int64_t dim, bool keepdim) {
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() == 0) return shape;
  if (keepdim) shape[dim] = 1;
  else shape.erase(shape.begin() + dim);
  return shape;
}

// ---- sort / topk -----------------------------------------------------------------

std::tuple<at::Tensor&, at::Tensor&> sortOut(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                            bool descending, at::Tensor& values, at::Tensor& indices) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  prepare(values, self.sizes(), self.scalar_type(), "sort");
  prepare(indices, self.sizes(), at::kLong, "sort");
  if (self.numel() == 0) return {values, indices};
  at::assert_no_partial_overlap(values, self);  // CPU copies self into values first
  TPU_OP("aten::sort").in(self).attr(dim).attr(descending).out(values).out(indices).run(
      [&](hlo::Builder& b, Values in, Values) {
        auto [v, i] = lowering::sortAlong(b, sortable(b, in[0]), dim, descending);
        return ValueList{v, i};
      });
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> sortStable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                              bool descending) {
  at::Tensor v = at::empty_like(self), i = at::empty(self.sizes(), self.options().dtype(at::kLong));
  sortOut(self, stable, dim, descending, v, i);
  return {v, i};
}

std::tuple<at::Tensor&, at::Tensor&> topkOut(const at::Tensor& self, c10::SymInt symK, int64_t dim, bool largest,
                                            bool sorted, at::Tensor& values, at::Tensor& indices) {
  int64_t k = symK.expect_int();
  dim = at::maybe_wrap_dim(dim, self.dim());
  int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  TORCH_CHECK(k >= 0 && k <= n, "selected index k out of range");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[dim] = k;
  prepare(values, shape, self.scalar_type(), "topk");
  prepare(indices, shape, at::kLong, "topk");
  if (values.numel() == 0) return {values, indices};
  TPU_OP("aten::topk").in(self).attr(dim).attr(largest).attr(k).out(values).out(indices).run(
      [&](hlo::Builder& b, Values in, Values) {
        hlo::Value x = sortable(b, in[0]);
        auto [v, i] = lowering::sortAlong(b, x, dim, largest);
        std::vector<int64_t> zeros(x.rank(), 0), ones(x.rank(), 1), limit = x.shape();
        limit[dim] = k;
        return ValueList{b.slice(v, zeros, limit, ones), b.slice(i, zeros, limit, ones)};
      });
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest,
                                        bool sorted) {
  at::Tensor v = at::empty({0}, self.options()), i = at::empty({0}, self.options().dtype(at::kLong));
  topkOut(self, k, dim, largest, sorted, v, i);
  return {v, i};
}

// ---- kthvalue / median / nanmedian: a sorted row, one position per row -----------

enum class Pick { Kth, Median, NanMedian };

// values/indices at the picked position of each row of self along dim (dim < 0: all elements flattened).
void runPick(Pick kind, const at::Tensor& self, int64_t dim, int64_t k, at::Tensor* values, at::Tensor* indices) {
  const at::Tensor& any = values ? *values : *indices;
  if (any.numel() == 0) return;
  Op op = TPU_OP("aten::order_statistic");
  op.in(self).attr(static_cast<int64_t>(kind)).attr(dim).attr(k);
  if (values) op.out(*values);
  if (indices) op.out(*indices);
  op.run([&](hlo::Builder& b, Values in, Values) {
    hlo::Value x = sortable(b, in[0]);
    int64_t d = dim;
    if (d < 0) {
      x = b.reshape(x, {x.type.numel()});
      d = 0;
    }
    int64_t n = x.shape()[d];
    auto [v, idx] = lowering::sortAlong(b, x, d, false);
    hlo::Shape kept = x.shape();
    kept[d] = 1;
    hlo::Type posType{hlo::DType::S64, kept};
    hlo::Value pos;
    if (kind == Pick::Kth) {
      pos = b.full(posType, static_cast<double>(k - 1));
    } else {
      // NaNs sort last: median is NaN (the first NaN) when there is one; nanmedian skips them.
      hlo::Value nans = lowering::nanCount(b, x, d);
      hlo::Value valid = b.sub(b.full(posType, static_cast<double>(n)), nans);
      if (kind == Pick::Median) {
        pos = b.select(b.compare(hlo::Cmp::GT, nans, b.full(posType, 0)), valid, b.full(posType, (n - 1) / 2));
      } else {
        hlo::Value mid = b.div(b.sub(valid, b.full(posType, 1)), b.full(posType, 2));
        pos = b.select(b.compare(hlo::Cmp::EQ, valid, b.full(posType, 0)), b.full(posType, 0), mid);
      }
    }
    ValueList r;
    if (values) r.push_back(lowering::pickAlong(b, v, pos, d));
    if (indices) r.push_back(lowering::pickAlong(b, idx, pos, d));
    return r;
  });
}

std::tuple<at::Tensor&, at::Tensor&> pickDimOut(Pick kind, const char* name, const at::Tensor& self, int64_t k,
                                               int64_t dim, bool keepdim, at::Tensor& values, at::Tensor& indices) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  if (kind == Pick::Kth) {
    TORCH_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ", dim);
  } else {
    TORCH_CHECK_INDEX(n > 0, name, "(): Expected reduction dim ", dim, " to have non-zero size.");
  }
  auto shape = reducedShape(self, dim, keepdim);
  prepare(values, shape, self.scalar_type(), name);
  prepare(indices, shape, at::kLong, name);
  runPick(kind, self, self.dim() == 0 ? 0 : dim, k, &values, &indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> kthvalueOut(const at::Tensor& self, c10::SymInt k, int64_t dim, bool keepdim,
                                                at::Tensor& values, at::Tensor& indices) {
  return pickDimOut(Pick::Kth, "kthvalue", self, k.expect_int(), dim, keepdim, values, indices);
}
std::tuple<at::Tensor&, at::Tensor&> medianDimOut(const at::Tensor& self, int64_t dim, bool keepdim,
                                                 at::Tensor& values, at::Tensor& indices) {
  return pickDimOut(Pick::Median, "median", self, 0, dim, keepdim, values, indices);
}
std::tuple<at::Tensor&, at::Tensor&> nanmedianDimOut(const at::Tensor& self, int64_t dim, bool keepdim,
                                                    at::Tensor& values, at::Tensor& indices) {
  return pickDimOut(Pick::NanMedian, "nanmedian", self, 0, dim, keepdim, values, indices);
}

template <Pick K>
at::Tensor medianAll(const at::Tensor& self) {
  at::Tensor out = at::empty({}, self.options());
  if (self.numel() == 0) return out.fill_(std::numeric_limits<double>::quiet_NaN());
  runPick(K, self, -1, 0, &out, nullptr);
  return out;
}

std::tuple<at::Tensor, at::Tensor> mode(const at::Tensor& self, int64_t dim, bool keepdim) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(self.dim() == 0 || self.size(dim) > 0, "mode(): Expected reduction dim ", dim,
                    " to have non-zero size.");
  auto shape = reducedShape(self, dim, keepdim);
  at::Tensor values = at::empty(shape, self.options()), indices = at::empty(shape, self.options().dtype(at::kLong));
  if (values.numel() == 0) return {values, indices};
  TPU_OP("aten::mode").in(self).attr(dim).out(values).out(indices).run([&](hlo::Builder& b, Values in, Values) {
    auto [v, i] = lowering::modeAlong(b, sortable(b, in[0]), self.dim() == 0 ? 0 : dim);
    return ValueList{v, i};
  });
  return {values, indices};
}

// ---- scans -------------------------------------------------------------------------

template <bool IsMax>
void cumExtremeHelper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (self.numel() == 0) return;
  TPU_OP("aten::cummax_cummin").in(self).attr(dim).attr(IsMax).out(values).out(indices).run(
      [&](hlo::Builder& b, Values in, Values) {
        auto [v, i] = lowering::cumExtreme(b, sortable(b, in[0]), self.dim() == 0 ? 0 : dim, IsMax);
        return ValueList{v, i};
      });
}

at::Tensor& logcumsumexpOut(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  hlo::DType ct = toHlo(opmathType(out.scalar_type()));
  TPU_OP("aten::_logcumsumexp").in(self).attr(dim).out(out).run([&](hlo::Builder& b, Values in, Values) {
    hlo::Value x = b.convert(in[0], ct);
    if (x.rank() == 0) x = b.reshape(x, {1});
    return ValueList{lowering::logcumsumexp(b, x, self.dim() == 0 ? 0 : dim)};
  });
  return out;
}
at::Tensor logcumsumexp(const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty_like(self);
  return logcumsumexpOut(self, dim, out);
}

// ---- searchsorted / bucketize / isin ---------------------------------------------------

at::Tensor& searchsortedOut(const at::Tensor& seq, const at::Tensor& self, bool outInt32, bool right,
                            std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter,
                            at::Tensor& out) {
  if (side) {
    TORCH_CHECK(*side == "left" || *side == "right", "torch.searchsorted(): side can only be 'left' or 'right' but got ",
                *side);
    TORCH_CHECK(!right || *side == "right", "torch.searchsorted(): side and right can't be set to opposites, got side "
                "of left while right was True");
    right = *side == "right";
  }
  TORCH_CHECK(seq.dim() == 1 || (seq.dim() == self.dim() && seq.sizes().slice(0, seq.dim() - 1).equals(
                                                                  self.sizes().slice(0, self.dim() - 1))),
              "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
              "tensor and input value tensor must match, but we got boundaries tensor ", seq.sizes(),
              " and input value tensor ", self.sizes());
  c10::ScalarType t = outInt32 ? at::kInt : at::kLong;
  prepare(out, self.sizes(), t, "searchsorted");
  if (out.numel() == 0) return out;
  at::Tensor s = seq;
  if (sorter.has_value() && sorter->defined()) s = seq.gather(-1, *sorter);
  c10::ScalarType common = at::result_type(s, self);
  hlo::DType ct = toHlo(common), ot = toHlo(t);
  TPU_OP("aten::searchsorted").in(s).in(self).attr(right).attr(static_cast<int64_t>(common)).out(out).run(
      [&](hlo::Builder& b, Values in, Values) {
        return ValueList{lowering::searchSorted(b, b.convert(in[0], ct), b.convert(in[1], ct), right, ot)};
      });
  return out;
}
at::Tensor searchsorted(const at::Tensor& seq, const at::Tensor& self, bool outInt32, bool right,
                        std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  at::Tensor out = at::empty({0}, self.options().dtype(outInt32 ? at::kInt : at::kLong));
  return searchsortedOut(seq, self, outInt32, right, side, sorter, out);
}
at::Tensor& bucketizeOut(const at::Tensor& self, const at::Tensor& boundaries, bool outInt32, bool right,
                         at::Tensor& out) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return searchsortedOut(boundaries, self, outInt32, right, std::nullopt, std::nullopt, out);
}
at::Tensor bucketize(const at::Tensor& self, const at::Tensor& boundaries, bool outInt32, bool right) {
  at::Tensor out = at::empty({0}, self.options().dtype(outInt32 ? at::kInt : at::kLong));
  return bucketizeOut(self, boundaries, outInt32, right, out);
}

at::Tensor& isinOut(const at::Tensor& elements, const at::Tensor& test, bool assumeUnique, bool invert,
                    at::Tensor& out) {
  prepare(out, elements.sizes(), at::kBool, "isin");
  if (out.numel() == 0) return out;
  if (test.numel() == 0) return out.fill_(invert);
  c10::ScalarType common = at::result_type(elements, test);
  hlo::DType ct = toHlo(common);
  TPU_OP("aten::isin").in(elements).in(test).attr(invert).attr(static_cast<int64_t>(common)).out(out).run(
      [&](hlo::Builder& b, Values in, Values) {
        return ValueList{lowering::isin(b, b.convert(in[0], ct), b.convert(in[1], ct), invert)};
      });
  return out;
}
at::Tensor isin(const at::Tensor& elements, const at::Tensor& test, bool assumeUnique, bool invert) {
  at::Tensor out = at::empty(elements.sizes(), elements.options().dtype(at::kBool));
  return isinOut(elements, test, assumeUnique, invert, out);
}
at::Tensor& isinTensorScalarOut(const at::Tensor& elements, const c10::Scalar& test, bool assumeUnique, bool invert,
                                at::Tensor& out) {
  return isinOut(elements, at::scalar_tensor(test, elements.options().dtype(at::result_type(elements, test))),
                 assumeUnique, invert, out);
}
at::Tensor isinTensorScalar(const at::Tensor& elements, const c10::Scalar& test, bool assumeUnique, bool invert) {
  at::Tensor out = at::empty(elements.sizes(), elements.options().dtype(at::kBool));
  return isinTensorScalarOut(elements, test, assumeUnique, invert, out);
}

// ---- unique: the number of runs is read from the device, then the values built -----------

// dim >= 0: unique (sort) or unique_consecutive of the slices along dim.
std::tuple<at::Tensor, at::Tensor, at::Tensor> uniqueImpl(const at::Tensor& self, bool sort, bool returnInverse,
                                                          bool returnCounts, int64_t dim = -1) {
  auto runsOf = [&](hlo::Builder& b, hlo::Value x) {
    hlo::Value v = x.dtype() == hlo::DType::Pred ? b.convert(x, hlo::DType::U8) : x;
    if (dim >= 0) return sort ? lowering::runsAlongSorted(b, v, dim) : lowering::runsAlong(b, v, dim);
    return lowering::runs(b, sortable(b, x), sort);
  };
  int64_t n = dim >= 0 ? self.size(dim) : self.numel();
  at::Tensor count = at::empty({}, self.options().dtype(at::kLong));
  if (n > 0) {
    TPU_OP("aten::unique.count").in(self).attr(sort).attr(dim).out(count).run([&](hlo::Builder& b, Values in, Values) {
      lowering::Runs r = runsOf(b, in[0]);
      hlo::Value ones = b.convert(r.first, hlo::DType::S64);
      hlo::Value zero = b.constantInt(hlo::DType::S64, 0);
      return ValueList{b.reduce({&ones, 1}, {&zero, 1}, {0}, [](hlo::Builder& rb, std::span<const hlo::Value> a) {
        return std::vector<hlo::Value>{rb.add(a[0], a[1])};
      })[0]};
    });
  }
  int64_t k = n > 0 ? count.item<int64_t>() : 0;
  std::vector<int64_t> vshape{k}, ishape = self.sizes().vec();
  if (dim >= 0) {
    vshape = self.sizes().vec();
    vshape[dim] = k;
    ishape = {n};
  }
  at::Tensor values = at::empty(vshape, self.options());
  at::Tensor inverse = at::empty(returnInverse ? c10::IntArrayRef(ishape) : c10::IntArrayRef{0},
                                 self.options().dtype(at::kLong));
  at::Tensor counts = at::empty({returnCounts ? k : 0}, self.options().dtype(at::kLong));
  if (n == 0) return {values, inverse, counts};
  Op op = TPU_OP("aten::unique.values");
  op.in(self).attr(sort).attr(dim).attr(k).attr(returnInverse).attr(returnCounts).out(values);
  if (returnInverse) op.out(inverse);
  if (returnCounts) op.out(counts);
  op.run([&](hlo::Builder& b, Values in, Values) {
    lowering::Runs r = runsOf(b, in[0]);
    auto [u, inv, cnt] = lowering::uniqueFromRuns(b, r, k);
    if (dim >= 0) {
      // Rows [k, rest] back to the input's layout with dim of size k.
      std::vector<int64_t> moved{k}, perm(self.dim());
      for (int64_t i = 0; i < self.dim(); ++i)
        if (i != dim) moved.push_back(self.size(i));
      u = b.reshape(u, moved);
      for (int64_t i = 0, j = 1; i < self.dim(); ++i) perm[i] = i == dim ? 0 : j++;
      u = b.transpose(u, perm);
    }
    ValueList out{u};
    if (returnInverse) out.push_back(inv);
    if (returnCounts) out.push_back(cnt);
    return out;
  });
  return {values, inverse, counts};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool sorted, bool returnInverse,
                                                       bool returnCounts) {
  // Sorted output either way (sorted=False leaves the order unspecified).
  return uniqueImpl(self, true, returnInverse, returnCounts);
}
std::tuple<at::Tensor, at::Tensor> uniqueOld(const at::Tensor& self, bool sorted, bool returnInverse) {
  auto [v, i, c] = uniqueImpl(self, true, returnInverse, false);
  return {v, i};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> uniqueDim(const at::Tensor& self, int64_t dim, bool sorted,
                                                         bool returnInverse, bool returnCounts) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.dim() > 0, "unique_dim: expected a tensor with at least one dimension");
  int64_t rest = self.size(d) ? self.numel() / self.size(d) : 0;
  // One sort operand per element of a slice: bounded so the program stays small.
  TORCH_CHECK_NOT_IMPLEMENTED(rest <= 256, "unique(dim=", dim, ") on tpu supports slices of at most 256 elements, got ",
                              rest, "; move the tensor to the CPU for this call");
  return uniqueImpl(self, true, returnInverse, returnCounts, d);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> uniqueConsecutive(const at::Tensor& self, bool returnInverse,
                                                                 bool returnCounts, std::optional<int64_t> dim) {
  if (!dim.has_value()) return uniqueImpl(self, false, returnInverse, returnCounts);
  int64_t d = at::maybe_wrap_dim(*dim, self.dim());
  TORCH_CHECK(self.dim() > 0, "unique_consecutive: dim requires a tensor with at least one dimension");
  return uniqueImpl(self, false, returnInverse, returnCounts, d);
}

// ---- small ops composed of existing kernels ------------------------------------------------

bool equal(const at::Tensor& self, const at::Tensor& other) {
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  at::Tensor flag = at::empty({}, self.options().dtype(at::kBool));
  c10::ScalarType common = at::result_type(self, other);
  hlo::DType ct = toHlo(common);
  TPU_OP("aten::equal").in(self).in(other).attr(static_cast<int64_t>(common)).out(flag).run(
      [&](hlo::Builder& b, Values in, Values) {
        hlo::Value eq = b.compare(hlo::Cmp::EQ, b.convert(in[0], ct), b.convert(in[1], ct));
        hlo::Value t = b.constant(hlo::DType::Pred, 1);
        std::vector<int64_t> dims;
        for (int64_t i = 0; i < eq.rank(); ++i) dims.push_back(i);
        return ValueList{b.reduce({&eq, 1}, {&t, 1}, dims, [](hlo::Builder& rb, std::span<const hlo::Value> a) {
          return std::vector<hlo::Value>{rb.binary("and", a[0], a[1])};
        })[0]};
      });
  return flag.item<bool>();
}

// TransformerEncoder's sparsity fast path asks whether every row of its padding mask (true: a token) is
// left-aligned, tokens then padding, before anything else of that path (torch registers it for CPU and CUDA
// only). Left-aligned: no true after a false, i.e. mask[:, j + 1] <= mask[:, j]. The same checks as CPU's.
bool nestedTensorFromMaskLeftAligned(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "_nested_tensor_from_mask_left_aligned: expected mask to be of type "
              "Bool, but got ", mask.scalar_type(), " instead.");
  TORCH_CHECK(mask.dim() == 2, "_nested_tensor_from_mask_left_aligned: padding mask should be 2D");
  TORCH_CHECK(t.dim() == 3, "_nested_tensor_from_mask_left_aligned: input should be a 3D tensor, N * L * D");
  TORCH_CHECK(t.size(0) == mask.size(0) && t.size(1) == mask.size(1),
              "_nested_tensor_from_mask_left_aligned: mask size should match input size");
  if (mask.size(1) < 2 || mask.numel() == 0) return true;
  return at::le(mask.slice(1, 1), mask.slice(1, 0, -1)).all().item<bool>();
}

// vdot(a, b) = sum(conj(a) * b).
at::Tensor vdot(const at::Tensor& self, const at::Tensor& other) {
  return at::dot(self.is_complex() ? self.conj() : self, other);
}

at::Tensor trace(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  return at::sum(self.diagonal());
}

// take/put's flat index: negative ones count from the end (valid ones are in [-numel, numel)); the
// rest stay out of range, so index_select/index_put flag them.
at::Tensor flatIndex(const at::Tensor& index, int64_t numel) {
  at::Tensor flat = index.reshape({-1});
  return at::where(flat < 0, flat + numel, flat);
}

at::Tensor& takeOut(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0, "take(): tried to take from an empty tensor");
  prepare(out, index.sizes(), self.scalar_type(), "take");
  if (index.numel() == 0) return out;
  IndexErrorScope scope("aten::take", runtime::ErrorKind::Index);
  out.copy_(self.reshape({-1}).index_select(0, flatIndex(index, self.numel())).view(index.sizes()));
  return out;
}
at::Tensor take(const at::Tensor& self, const at::Tensor& index) {
  at::Tensor out = at::empty(index.sizes(), self.options());
  return takeOut(self, index, out);
}

at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "put_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "put_(): self and source expected to have the same dtype, "
              "but got self.dtype = ", self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK(index.numel() == source.numel(), "put_(): Expected source and index to have the same number of "
              "elements, but got source.numel() = ", source.numel(), ", index.numel() = ", index.numel());
  if (index.numel() == 0) return self;
  IndexErrorScope scope("aten::put_", runtime::ErrorKind::Index);
  at::Tensor idx = flatIndex(index, self.numel());
  at::Tensor flat = self.is_contiguous() ? self.view({-1}) : self.reshape({-1});
  c10::List<std::optional<at::Tensor>> indices;
  indices.push_back(idx);
  flat.index_put_(indices, source.reshape({-1}), accumulate);
  if (!self.is_contiguous()) self.copy_(flat.view(self.sizes()));
  return self;
}

at::Tensor& indexCopyOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                         at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() < 2, "index_copy_(): Index should have dimension 1 or 0 (got ", index.dim(), ")");
  TORCH_CHECK(index.scalar_type() == at::kLong, "index_copy_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_copy_(): self and source expected to have the same "
              "dtype, but got (self) ", self.scalar_type(), " and (source) ", source.scalar_type());
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0) return out;
  IndexErrorScope scope("aten::index_copy", runtime::ErrorKind::Index);
  c10::List<std::optional<at::Tensor>> indices;
  for (int64_t i = 0; i < dim; ++i) indices.push_back(std::nullopt);
  // index_put would wrap a negative index; index_copy raises for it, as CPU does.
  at::Tensor flat = index.reshape({-1});
  indices.push_back(at::where(flat < 0, c10::Scalar(self.dim() == 0 ? 1 : self.size(dim)), flat));
  at::Tensor src = self.dim() == 0 ? source.reshape({-1}) : source;
  if (self.dim() == 0) out.view({1}).index_put_(indices, src);
  else out.index_put_(indices, src.dim() == 0 ? src.reshape({1}) : src);
  return out;
}
at::Tensor indexCopy(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  at::Tensor out = at::empty_like(self);
  return indexCopyOut(self, dim, index, source, out);
}
at::Tensor& indexCopy_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  return indexCopyOut(self, dim, index, source, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.stable", sortStable);
  m.impl("sort.values_stable", sortOut);
  m.impl("topk", topk);
  m.impl("topk.values", topkOut);
  m.impl("kthvalue.values", kthvalueOut);
  m.impl("median", medianAll<Pick::Median>);
  m.impl("median.dim_values", medianDimOut);
  m.impl("nanmedian", medianAll<Pick::NanMedian>);
  m.impl("nanmedian.dim_values", nanmedianDimOut);
  m.impl("mode", mode);
  m.impl("_cummax_helper", cumExtremeHelper<true>);
  m.impl("_cummin_helper", cumExtremeHelper<false>);
  m.impl("_logcumsumexp", logcumsumexp);
  m.impl("_logcumsumexp.out", logcumsumexpOut);
  m.impl("searchsorted.Tensor", searchsorted);
  m.impl("searchsorted.Tensor_out", searchsortedOut);
  m.impl("bucketize.Tensor", bucketize);
  m.impl("bucketize.Tensor_out", bucketizeOut);
  m.impl("isin.Tensor_Tensor", isin);
  m.impl("isin.Tensor_Tensor_out", isinOut);
  m.impl("isin.Tensor_Scalar", isinTensorScalar);
  m.impl("isin.Tensor_Scalar_out", isinTensorScalarOut);
  m.impl("_unique2", unique2);
  m.impl("_unique", uniqueOld);
  m.impl("unique_consecutive", uniqueConsecutive);
  m.impl("unique_dim", uniqueDim);
  m.impl("equal", equal);
  m.impl("_nested_tensor_from_mask_left_aligned", nestedTensorFromMaskLeftAligned);
  m.impl("vdot", vdot);
  m.impl("trace", trace);
  m.impl("take", take);
  m.impl("take.out", takeOut);
  m.impl("put_", put_);
  m.impl("index_copy", indexCopy);
  m.impl("index_copy_", indexCopy_);
  m.impl("index_copy.out", indexCopyOut);
}

}  // namespace tpu::aten
