#include "Pool.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "Index.h"

namespace tpu::lowering {
namespace {

using hlo::Cmp;
using hlo::DType;

Value isNan(Builder& b, Value x) {
  if (!hlo::isFloat(x.dtype())) return b.full(hlo::Type{DType::Pred, x.shape()}, 0);
  return b.compare(Cmp::NE, x, x);
}

// Chooses between candidate (v, i) pairs: a NaN wins (the later one: larger index), else the larger value,
// else the earlier index. Commutative, so the combination order does not matter.
std::pair<Value, Value> pickMax(Builder& b, Value va, Value ia, Value vb, Value ib) {
  Value na = isNan(b, va), nb = isNan(b, vb);
  Value bothNan = b.binary("and", na, nb);
  Value takeB = b.select(bothNan, b.compare(Cmp::GT, ib, ia),
                         b.select(na, b.full(hlo::Type{DType::Pred, va.shape()}, 0),
                                  b.select(nb, b.full(hlo::Type{DType::Pred, va.shape()}, 1),
                                           b.binary("or", b.compare(Cmp::GT, vb, va),
                                                    b.binary("and", b.compare(Cmp::EQ, vb, va),
                                                             b.compare(Cmp::LT, ib, ia))))));
  return {b.select(takeB, vb, va), b.select(takeB, ib, ia)};
}

// Per pooled dim: padding so that every window of the output fits.
struct Geometry {
  std::vector<int64_t> lo, hi, out;
};

Geometry geometry(const hlo::Shape& shape, const PoolParams& p) {
  size_t nd = p.kernel.size(), lead = shape.size() - nd;
  Geometry g;
  for (size_t i = 0; i < nd; ++i) {
    int64_t in = shape[lead + i];
    int64_t o = poolOutputSize(in, p.kernel[i], p.padding[i], p.stride[i], p.dilation[i], p.ceilMode);
    int64_t need = (o - 1) * p.stride[i] + p.dilation[i] * (p.kernel[i] - 1) + 1;
    g.lo.push_back(p.padding[i]);
    g.hi.push_back(std::max<int64_t>(need - in - p.padding[i], 0));
    g.out.push_back(o);
  }
  return g;
}

// The strided slice of the padded `x` that kernel offset `offs` reads for every output.
Value window(Builder& b, Value xp, const std::vector<int64_t>& offs, const Geometry& g, const PoolParams& p) {
  size_t nd = offs.size(), lead = xp.rank() - nd;
  std::vector<int64_t> start(xp.rank(), 0), limit = xp.shape(), strides(xp.rank(), 1);
  for (size_t i = 0; i < nd; ++i) {
    start[lead + i] = offs[i] * p.dilation[i];
    limit[lead + i] = start[lead + i] + (g.out[i] - 1) * p.stride[i] + 1;
    strides[lead + i] = p.stride[i];
  }
  return b.slice(xp, start, limit, strides);
}

// Calls f(offsets) for every kernel offset.
template <class F>
void forEachOffset(const std::vector<int64_t>& kernel, F f) {
  std::vector<int64_t> o(kernel.size(), 0);
  while (true) {
    f(o);
    size_t i = kernel.size();
    while (i > 0) {
      if (++o[i - 1] < kernel[i - 1]) break;
      o[i - 1] = 0;
      --i;
    }
    if (i == 0) return;
  }
}

// Sum over every window of the (already padded) `xp`: one reduce_window with the kernel as its window over
// the pooled dims, cut to the `out` windows pooling asks for. (One strided slice and add per kernel offset
// instead made HLO proportional to the kernel's volume: EfficientNet's AvgPool2d(hidden_dim, ceil_mode=True)
// at hidden_dim 128 was 16384 slices, and XLA:CPU did not finish compiling it in minutes.)
Value windowSum(Builder& b, Value xp, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                const std::vector<int64_t>& out) {
  size_t nd = kernel.size(), lead = xp.rank() - nd;
  std::vector<int64_t> window(xp.rank(), 1), strides(xp.rank(), 1);
  std::vector<std::pair<int64_t, int64_t>> none(xp.rank(), {0, 0});
  for (size_t i = 0; i < nd; ++i) {
    window[lead + i] = kernel[i];
    strides[lead + i] = stride[i];
  }
  Value init = b.constant(xp.dtype(), 0);
  Value sum = b.reduceWindow({&xp, 1}, {&init, 1}, window, strides, none,
                             [](Builder& r, std::span<const Value> a) { return std::vector<Value>{r.add(a[0], a[1])}; })[0];
  // The padded input may hold more whole windows than the output has (padding reaches past the last one).
  std::vector<int64_t> start(xp.rank(), 0), limit = sum.shape(), ones(xp.rank(), 1);
  bool cut = false;
  for (size_t i = 0; i < nd; ++i) {
    cut |= limit[lead + i] != out[i];
    limit[lead + i] = out[i];
  }
  return cut ? b.slice(sum, start, limit, ones) : sum;
}

Value padLast(Builder& b, Value x, Value v, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  size_t nd = lo.size(), lead = x.rank() - nd;
  std::vector<int64_t> l(x.rank(), 0), h(x.rank(), 0), in(x.rank(), 0);
  for (size_t i = 0; i < nd; ++i) {
    l[lead + i] = lo[i];
    h[lead + i] = hi[i];
  }
  return b.pad(x, v, l, h, in);
}

// Flat position (S64) of every element of the pooled plane, broadcast to x's shape.
Value planeIndex(Builder& b, const hlo::Shape& shape, size_t nd) {
  size_t lead = shape.size() - nd;
  hlo::Type t{DType::S64, shape};
  Value idx = b.full(t, 0);
  int64_t mul = 1;
  for (size_t i = nd; i-- > 0;) {
    idx = b.add(idx, b.mul(b.iota(t, static_cast<int64_t>(lead + i)), b.full(t, static_cast<double>(mul))));
    mul *= shape[lead + i];
  }
  return idx;
}

Value lowest(Builder& b, DType t) {
  if (hlo::isFloat(t)) return b.constant(t, -INFINITY);
  switch (t) {
    case DType::U8: return b.constantInt(t, 0);
    case DType::S8: return b.constantInt(t, -128);
    case DType::S16: return b.constantInt(t, -32768);
    case DType::S32: return b.constantInt(t, INT32_MIN);
    default: return b.constantInt(t, INT64_MIN);
  }
}

// Averaging matrix [out, in] of adaptive pooling: rows average [floor(o*in/out), ceil((o+1)*in/out)).
Value adaptiveMatrix(Builder& b, int64_t out, int64_t in, DType t) {
  hlo::Type it{DType::S64, {out, in}};
  Value o = b.iota(it, 0), i = b.iota(it, 1);
  Value inC = b.full(it, static_cast<double>(in)), outC = b.full(it, static_cast<double>(out));
  Value start = b.div(b.mul(o, inC), outC);
  Value end = b.div(b.add(b.mul(b.add(o, b.full(it, 1)), inC), b.sub(outC, b.full(it, 1))), outC);
  Value inside = b.binary("and", b.compare(Cmp::GE, i, start), b.compare(Cmp::LT, i, end));
  Value w = b.div(b.convert(inside, t), b.convert(b.sub(end, start), t));
  return w;
}

// Contracts dim `d` of x with m [newSize, oldSize] (transposed: [oldSize, newSize]), keeping dim order.
Value contractDim(Builder& b, Value x, int64_t d, Value m, bool transposed) {
  Value r = b.dotGeneral(x, m, {}, {}, {d}, {transposed ? 0 : 1}, x.dtype());
  // dot_general puts the new dim last: move it back to d.
  std::vector<int64_t> perm;
  int64_t rank = x.rank();
  for (int64_t i = 0, j = 0; i < rank; ++i) perm.push_back(i == d ? rank - 1 : j++);
  return b.transpose(r, perm);
}

}  // namespace

int64_t poolOutputSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceilMode) {
  int64_t num = in + 2 * pad - dilation * (k - 1) - 1 + (ceilMode ? stride - 1 : 0);
  int64_t o = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceilMode && (o - 1) * stride >= in + pad) --o;
  return o;
}

std::pair<Value, Value> maxPool(Builder& b, Value x, const PoolParams& p) {
  size_t nd = p.kernel.size();
  Geometry g = geometry(x.shape(), p);
  Value xp = padLast(b, x, lowest(b, x.dtype()), g.lo, g.hi);
  Value ip = padLast(b, planeIndex(b, x.shape(), nd), b.constantInt(DType::S64, -1), g.lo, g.hi);
  std::optional<Value> bv, bi;
  forEachOffset(p.kernel, [&](const std::vector<int64_t>& o) {
    Value v = window(b, xp, o, g, p), i = window(b, ip, o, g, p);
    if (!bv) {
      bv = v;
      bi = i;
      return;
    }
    auto [nv, ni] = pickMax(b, *bv, *bi, v, i);
    bv = nv;
    bi = ni;
  });
  return {*bv, *bi};
}

Value avgPool(Builder& b, Value x, const PoolParams& p, bool countIncludePad, int64_t divisorOverride) {
  size_t nd = p.kernel.size(), lead = x.rank() - nd;
  Geometry g = geometry(x.shape(), p);
  for (int64_t d : p.dilation)
    if (d != 1) throw std::logic_error("avg pooling has no dilation");
  Value xp = padLast(b, x, b.constant(x.dtype(), 0), g.lo, g.hi);
  Value sum = windowSum(b, xp, p.kernel, p.stride, g.out);
  if (divisorOverride != 0) return b.div(sum, b.scalarLike(sum, static_cast<double>(divisorOverride)));
  // Divisor per output (same for every batch element): count ones over the windows of a mask that is 1 on the
  // input (or on input + padding) and 0 elsewhere.
  hlo::Shape plane(x.shape().begin() + lead, x.shape().end());
  Value ones = b.full(hlo::Type{x.dtype(), plane}, 1);
  Value mask = padLast(b, ones, b.constant(x.dtype(), 0), g.lo, g.hi);
  if (countIncludePad) {
    // Padding counts, the extra ceil-mode margin beyond it does not.
    std::vector<int64_t> extra(nd);
    for (size_t i = 0; i < nd; ++i) extra[i] = g.hi[i] - std::min(g.hi[i], p.padding[i]);
    std::vector<int64_t> padOnly(nd);
    for (size_t i = 0; i < nd; ++i) padOnly[i] = std::min(g.hi[i], p.padding[i]);
    Value inner = padLast(b, ones, b.constant(x.dtype(), 1), g.lo, padOnly);
    mask = padLast(b, inner, b.constant(x.dtype(), 0), std::vector<int64_t>(nd, 0), extra);
  }
  Value count = windowSum(b, mask, p.kernel, p.stride, g.out);
  std::vector<int64_t> dims;
  for (size_t i = 0; i < nd; ++i) dims.push_back(static_cast<int64_t>(lead + i));
  return b.div(sum, b.broadcastInDim(count, sum.shape(), dims));
}

Value avgPoolBackward(Builder& b, Value g, const std::vector<int64_t>& inShape, const PoolParams& p,
                      bool countIncludePad, int64_t divisorOverride) {
  size_t nd = p.kernel.size(), lead = g.rank() - nd;
  Geometry geo = geometry(inShape, p);
  // The forward's divisor: pool a tensor of ones and divide.
  hlo::Type inType{g.dtype(), inShape};
  Value ones = b.full(inType, 1);
  Value scaled = g;
  if (divisorOverride != 0) {
    scaled = b.div(g, b.scalarLike(g, static_cast<double>(divisorOverride)));
  } else {
    Value avgOnes = avgPool(b, ones, p, countIncludePad, 0);  // = window sum of ones / divisor
    PoolParams q = p;
    Value sumOnes = avgPool(b, ones, q, countIncludePad, 1);   // window sum of ones (input elements)
    scaled = b.mul(g, b.div(avgOnes, sumOnes));
  }
  // Every window's share back to the padded input: padded position j gets the sum of the shares of the
  // windows covering it, i.e. a window sum (window = kernel, stride 1) of the shares spread `stride` apart
  // (interior padding), with kernel - 1 zeros before them and zeros up to the padded length after.
  for (int64_t d : p.dilation)
    if (d != 1) throw std::logic_error("avg pooling has no dilation");
  hlo::Shape padded = inShape;
  for (size_t i = 0; i < nd; ++i) padded[lead + i] += geo.lo[i] + geo.hi[i];
  std::vector<int64_t> lo(g.rank(), 0), hi(g.rank(), 0), interior(g.rank(), 0), unit(nd, 1), sizes(nd);
  for (size_t i = 0; i < nd; ++i) {
    int64_t spread = (geo.out[i] - 1) * p.stride[i] + 1;
    lo[lead + i] = p.kernel[i] - 1;
    interior[lead + i] = p.stride[i] - 1;
    hi[lead + i] = padded[lead + i] - spread;
    sizes[i] = padded[lead + i];
  }
  Value spreadOut = b.pad(scaled, b.constant(g.dtype(), 0), lo, hi, interior);
  Value acc = windowSum(b, spreadOut, p.kernel, unit, sizes);
  std::vector<int64_t> start(g.rank(), 0), limit = padded, strides(g.rank(), 1);
  for (size_t i = 0; i < nd; ++i) {
    start[lead + i] = geo.lo[i];
    limit[lead + i] = geo.lo[i] + inShape[lead + i];
  }
  return b.slice(acc, start, limit, strides);
}

Value adaptiveAvgPool(Builder& b, Value x, const std::vector<int64_t>& out) {
  size_t nd = out.size(), lead = x.rank() - nd;
  for (size_t i = 0; i < nd; ++i) {
    int64_t d = static_cast<int64_t>(lead + i);
    x = contractDim(b, x, d, adaptiveMatrix(b, out[i], x.shape()[d], x.dtype()), false);
  }
  return x;
}

Value adaptiveAvgPoolBackward(Builder& b, Value g, const std::vector<int64_t>& inSizes) {
  size_t nd = inSizes.size(), lead = g.rank() - nd;
  for (size_t i = 0; i < nd; ++i) {
    int64_t d = static_cast<int64_t>(lead + i);
    g = contractDim(b, g, d, adaptiveMatrix(b, g.shape()[d], inSizes[i], g.dtype()), true);
  }
  return g;
}

std::pair<Value, Value> adaptiveMaxPool(Builder& b, Value x, const std::vector<int64_t>& out) {
  // Separable: reduce the last dim first, then the ones before it, carrying the flat index; for each output
  // position the window [start, end) is read as kmax gathered columns, those past `end` masked out.
  size_t nd = out.size(), lead = x.rank() - nd;
  Value idx = planeIndex(b, x.shape(), nd);
  for (size_t k = nd; k-- > 0;) {
    int64_t d = static_cast<int64_t>(lead + k), in = x.shape()[d], o = out[k];
    int64_t kmax = 0;
    for (int64_t j = 0; j < o; ++j) kmax = std::max(kmax, ((j + 1) * in + o - 1) / o - (j * in) / o);
    hlo::Shape rs = x.shape();
    rs[d] = o;
    hlo::Type it{DType::S64, rs};
    Value oi = b.iota(it, d);
    Value start = b.div(b.mul(oi, b.full(it, static_cast<double>(in))), b.full(it, static_cast<double>(o)));
    Value end = b.div(b.add(b.mul(b.add(oi, b.full(it, 1)), b.full(it, static_cast<double>(in))),
                            b.full(it, static_cast<double>(o - 1))),
                      b.full(it, static_cast<double>(o)));
    std::optional<Value> bv, bi;
    for (int64_t j = 0; j < kmax; ++j) {
      Value pos = b.add(start, b.full(it, static_cast<double>(j)));
      Value valid = b.compare(Cmp::LT, pos, end);
      Value at = b.min(pos, b.full(it, static_cast<double>(in - 1)));
      Value v = gatherDim(b, x, at, d), i = gatherDim(b, idx, at, d);
      if (!bv) {
        bv = v;
        bi = i;
        continue;
      }
      auto [nv, ni] = pickMax(b, *bv, *bi, v, i);
      bv = b.select(valid, nv, *bv);
      bi = b.select(valid, ni, *bi);
    }
    x = *bv;
    idx = *bi;
  }
  return {x, idx};
}

Value im2col(Builder& b, Value x, const PoolParams& p) {
  size_t nd = p.kernel.size(), lead = x.rank() - nd;
  Geometry g = geometry(x.shape(), p);
  Value xp = padLast(b, x, b.constant(x.dtype(), 0), g.lo, g.hi);
  int64_t l = 1;
  for (int64_t o : g.out) l *= o;
  hlo::Shape one(x.shape().begin(), x.shape().begin() + lead);  // [..., C]
  one.push_back(1);
  one.push_back(l);
  std::vector<Value> cols;
  forEachOffset(p.kernel, [&](const std::vector<int64_t>& o) { cols.push_back(b.reshape(window(b, xp, o, g, p), one)); });
  Value r = b.concatenate(cols, static_cast<int64_t>(lead));  // [..., C, K, L]
  hlo::Shape out(x.shape().begin(), x.shape().begin() + lead - 1);
  out.push_back(x.shape()[lead - 1] * static_cast<int64_t>(cols.size()));
  out.push_back(l);
  return b.reshape(r, out);
}

Value col2im(Builder& b, Value cols, const std::vector<int64_t>& size, const PoolParams& p) {
  size_t nd = p.kernel.size();
  int64_t k = 1;
  for (int64_t v : p.kernel) k *= v;
  std::vector<int64_t> out;
  for (size_t i = 0; i < nd; ++i)
    out.push_back(poolOutputSize(size[i], p.kernel[i], p.padding[i], p.stride[i], p.dilation[i], false));
  int64_t lead = cols.rank() - 1;  // [..., C*K, L]
  hlo::Shape split(cols.shape().begin(), cols.shape().begin() + lead - 1 + 1);
  split.back() = cols.shape()[lead - 1] / k;  // C
  split.push_back(k);
  for (int64_t o : out) split.push_back(o);
  Value c = b.reshape(cols, split);  // [..., C, K, oh, ow]
  int64_t kd = lead;                 // the K dim
  hlo::Shape padded(split.begin(), split.begin() + kd);
  for (size_t i = 0; i < nd; ++i) padded.push_back(size[i] + 2 * p.padding[i]);
  Value acc = b.full(hlo::Type{cols.dtype(), padded}, 0);
  Value zero = b.constant(cols.dtype(), 0);
  int64_t t = 0;
  forEachOffset(p.kernel, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> start(c.rank(), 0), limit = c.shape(), strides(c.rank(), 1);
    start[kd] = t;
    limit[kd] = t + 1;
    hlo::Shape piece(split.begin(), split.begin() + kd);
    for (int64_t v : out) piece.push_back(v);
    Value w = b.reshape(b.slice(c, start, limit, strides), piece);
    int64_t r = static_cast<int64_t>(piece.size());
    std::vector<int64_t> lo(r, 0), hi(r, 0), interior(r, 0);
    for (size_t i = 0; i < nd; ++i) {
      size_t d = r - nd + i;
      lo[d] = o[i] * p.dilation[i];
      interior[d] = p.stride[i] - 1;
      hi[d] = padded[d] - lo[d] - ((out[i] - 1) * p.stride[i] + 1);
    }
    acc = b.add(acc, b.pad(w, zero, lo, hi, interior));
    ++t;
  });
  int64_t r = acc.rank();
  std::vector<int64_t> start(r, 0), limit = acc.shape(), strides(r, 1);
  for (size_t i = 0; i < nd; ++i) {
    start[r - nd + i] = p.padding[i];
    limit[r - nd + i] = p.padding[i] + size[i];
  }
  return b.slice(acc, start, limit, strides);
}

}  // namespace tpu::lowering
