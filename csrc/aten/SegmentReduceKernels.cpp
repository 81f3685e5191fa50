// segment_reduce (+ _segment_reduce_backward) composed of tpu ops with CPU's rules: segments along
// axis = lengths.dim() - 1 given by lengths or offsets, `initial` taking part in the reduction, empty
// segments holding initial or the identity (mean: NaN), max/min propagating NaN, the max/min gradient
// shared by the tied elements and prod's gradient exact when the segment holds a zero. Each position's
// segment comes from an upper-bound search in the cumulative lengths; positions past the last segment
// go to one extra segment that is dropped.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <cmath>

namespace tpu::aten {
namespace {

using OptTensor = std::optional<at::Tensor>;
bool has(const OptTensor& t) { return t.has_value() && t->defined(); }

struct Segments {
  int64_t axis, count;  // segment axis, number of segments S
  at::Tensor lengths;   // (outer..., S) int64
  at::Tensor idx;       // data-shaped int64 segment per element, S past the end
};

Segments segments(const char* op, const at::Tensor& data, c10::string_view reduce, const OptTensor& lengths,
                  const OptTensor& indices, const OptTensor& offsets, int64_t axis) {
  TORCH_CHECK(reduce == "sum" || reduce == "mean" || reduce == "max" || reduce == "min" || reduce == "prod", op,
              ": unsupported reduction given! ", reduce);
  TORCH_CHECK(!has(indices), op, ": indices based reduction is not supported yet.");
  TORCH_CHECK(has(lengths) || has(offsets), op, ": Either lengths or offsets must be defined");
  TORCH_CHECK(at::isFloatingType(data.scalar_type()), op, ": expected a floating-point data tensor, got ",
              data.scalar_type());
  Segments s;
  if (has(lengths)) {
    s.lengths = lengths->to(at::kLong);
  } else {
    at::Tensor o = offsets->to(at::kLong);
    int64_t n = o.size(-1);
    TORCH_CHECK(n >= 1, op, ": offsets must hold at least one entry");
    s.lengths = o.narrow(-1, 1, n - 1) - o.narrow(-1, 0, n - 1);
  }
  axis = at::maybe_wrap_dim(axis, data.dim());
  TORCH_CHECK(axis == s.lengths.dim() - 1, op, ": Expected axis to be the last dimension of lengths but got ", axis,
              ".");
  for (int64_t d = 0; d < axis; ++d) {
    TORCH_CHECK(s.lengths.size(d) == data.size(d), op, ": Expected lengths' leading dimensions to match data's, got "
                "lengths ", s.lengths.sizes(), " and data ", data.sizes());
  }
  s.axis = axis;
  s.count = s.lengths.size(-1);
  int64_t n = data.size(axis);
  at::Tensor cum = s.lengths.cumsum(-1).contiguous();
  std::vector<int64_t> posShape(axis + 1, 1);
  posShape[axis] = n;
  std::vector<int64_t> outer(data.sizes().begin(), data.sizes().begin() + axis);
  outer.push_back(n);
  at::Tensor pos = at::arange(n, cum.options()).view(posShape).expand(outer).contiguous();
  at::Tensor seg = at::searchsorted(cum, pos, false, true);  // (outer..., N) in [0, S]
  std::vector<int64_t> view = outer;
  view.resize(data.dim(), 1);
  s.idx = seg.view(view).expand(data.sizes()).contiguous();
  return s;
}

// `t` (data-shaped per segment, S + 1 segments along axis) read back at each element's segment.
at::Tensor atElements(const Segments& s, const at::Tensor& perSegment) { return perSegment.gather(s.axis, s.idx); }

// Pads a per-segment tensor with one (dropped) segment for elements past the end.
at::Tensor padSegment(const Segments& s, const at::Tensor& t, double v) {
  std::vector<int64_t> shape = t.sizes().vec();
  shape[s.axis] = 1;
  return at::cat({t, at::full(shape, v, t.options())}, s.axis);
}

// lengths broadcast against a per-segment tensor of data's rank.
at::Tensor lengthsLike(const Segments& s, const at::Tensor& t) {
  std::vector<int64_t> v = s.lengths.sizes().vec();
  v.resize(t.dim(), 1);
  return s.lengths.view(v).expand(t.sizes());
}

at::Tensor segmentReduce(const at::Tensor& data, c10::string_view reduce, const OptTensor& lengths,
                         const OptTensor& indices, const OptTensor& offsets, int64_t axis, bool,
                         const std::optional<c10::Scalar>& initial) {
  Segments s = segments("segment_reduce()", data, reduce, lengths, indices, offsets, axis);
  double init = initial ? initial->toDouble()
                : reduce == "max" ? -INFINITY
                : reduce == "min" ? INFINITY
                : reduce == "prod" ? 1.0
                                   : 0.0;
  std::vector<int64_t> shape = data.sizes().vec();
  shape[s.axis] = s.count + 1;
  const char* how = reduce == "max" ? "amax" : reduce == "min" ? "amin" : reduce == "prod" ? "prod" : "sum";
  at::Tensor out = at::full(shape, init, data.options()).scatter_reduce(s.axis, s.idx, data, how, true);
  out = out.narrow(s.axis, 0, s.count);
  if (reduce == "mean") {
    at::Tensor len = lengthsLike(s, out);
    at::Tensor mean = out / len.clamp_min(1).to(out.scalar_type());
    out = at::where(len > 0, mean, initial ? out : at::full({}, NAN, out.options()));
  }
  return out.contiguous();
}

at::Tensor segmentReduceBackward(const at::Tensor& grad, const at::Tensor& output, const at::Tensor& data,
                                 c10::string_view reduce, const OptTensor& lengths, const OptTensor& offsets,
                                 int64_t axis, const std::optional<c10::Scalar>& initial) {
  Segments s = segments("_segment_reduce_backward", data, reduce, lengths, std::nullopt, offsets, axis);
  at::Tensor g = atElements(s, padSegment(s, grad, 0));
  if (reduce == "sum") return g;
  at::Tensor zero = at::zeros({}, data.options());
  if (reduce == "mean") {
    at::Tensor len = atElements(s, padSegment(s, lengthsLike(s, grad).to(data.scalar_type()), 1));
    return g / len;
  }
  at::Tensor out = atElements(s, padSegment(s, output, 0));
  std::vector<int64_t> shape = data.sizes().vec();
  shape[s.axis] = s.count + 1;
  if (reduce == "max" || reduce == "min") {
    at::Tensor hit = (data == out) | data.isnan();
    at::Tensor count = at::zeros(shape, data.options()).scatter_add(s.axis, s.idx, hit.to(data.scalar_type()));
    return at::where(hit, g / atElements(s, count).clamp_min(1), zero);
  }
  // prod: grad * output / x, or for a zero x the product of the segment's other elements (0 if it holds
  // another zero), initial included.
  at::Tensor isZero = data == 0;
  at::Tensor zeros = at::zeros(shape, data.options()).scatter_add(s.axis, s.idx, isZero.to(data.scalar_type()));
  double init = initial ? initial->toDouble() : 1.0;
  at::Tensor nonzeroProd = at::full(shape, init, data.options())
                               .scatter_reduce(s.axis, s.idx, at::where(isZero, at::ones({}, data.options()), data),
                                               "prod", true);
  at::Tensor others = at::where(atElements(s, zeros) == 1, atElements(s, nonzeroProd), zero);
  at::Tensor safe = at::where(isZero, at::ones({}, data.options()), data);
  return at::where(isZero, g * others, g * out / safe);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("segment_reduce", segmentReduce);
  m.impl("_segment_reduce_backward", segmentReduceBackward);
}

}  // namespace tpu::aten
