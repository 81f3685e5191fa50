#include "Resample.h"

#include <cmath>

#include "Index.h"

namespace tpu::lowering {
namespace {

using hlo::Cmp;
using hlo::DType;

struct Tap {
  Value index;                  // S64 [out]
  std::optional<Value> weight;  // [out] in the compute dtype (none: weight 1)
};

// ATen's area_pixel_compute_scale / compute_scales_value, in the compute dtype `t`.
double pixelScale(const ResampleDim& d, bool alignCorners, DType t) {
  auto round = [t](double v) { return t == DType::F64 ? v : static_cast<double>(static_cast<float>(v)); };
  if (alignCorners) return d.out > 1 ? round(static_cast<double>(d.in - 1) / static_cast<double>(d.out - 1)) : 0.0;
  if (d.scale && *d.scale > 0) return round(1.0 / *d.scale);
  return round(static_cast<double>(d.in) / static_cast<double>(d.out));
}

std::vector<Tap> taps(Builder& b, Interp mode, bool alignCorners, const ResampleDim& d, DType t) {
  hlo::Type it{DType::S64, {d.out}}, ft{t, {d.out}};
  Value dst = b.iota(it, 0);
  Value last = b.full(it, static_cast<double>(d.in - 1));
  if (mode == Interp::Nearest || mode == Interp::NearestExact) {
    if (mode == Interp::Nearest && d.out == d.in) return {{dst, std::nullopt}};
    if (mode == Interp::Nearest && d.out == 2 * d.in)
      return {{b.binary("shift_right_arithmetic", dst, b.full(it, 1)), std::nullopt}};
    // float scale, as ATen's nearest_idx / nearest_exact_idx.
    double scale = (d.scale && *d.scale > 0) ? static_cast<float>(1.0 / *d.scale)
                                             : static_cast<float>(d.in) / static_cast<float>(d.out);
    Value src;
    if (mode == Interp::Nearest) {
      hlo::Type f32{DType::F32, {d.out}};
      src = b.unary("floor", b.mul(b.convert(dst, DType::F32), b.full(f32, scale)));
    } else {
      hlo::Type f64{DType::F64, {d.out}};
      Value p = b.mul(b.add(b.convert(dst, DType::F64), b.full(f64, 0.5)), b.full(f64, scale));
      src = b.unary("floor", b.convert(p, DType::F32));
    }
    return {{b.min(b.convert(src, DType::S64), last), std::nullopt}};
  }
  double scale = pixelScale(d, alignCorners, t);
  Value s = b.full(ft, scale);
  Value fdst = b.convert(dst, t);
  Value real = alignCorners ? b.mul(s, fdst) : b.sub(b.mul(s, b.add(fdst, b.full(ft, 0.5))), b.full(ft, 0.5));
  Value zero = b.full(ft, 0), one = b.full(ft, 1);
  if (mode == Interp::Linear) {
    if (!alignCorners) real = b.select(b.compare(Cmp::LT, real, zero), zero, real);
    Value i0 = b.convert(real, DType::S64);  // real >= 0: truncation is floor
    Value lambda = b.min(b.max(b.sub(real, b.convert(i0, t)), zero), one);
    Value i1 = b.select(b.compare(Cmp::LT, i0, last), b.add(i0, b.full(it, 1)), i0);
    return {{i0, b.sub(one, lambda)}, {i1, lambda}};
  }
  // Cubic (A = -0.75): taps at floor(real) - 1 .. + 2, clamped to the input.
  Value fl = b.unary("floor", real);
  Value tt = b.sub(real, fl);
  Value base = b.convert(fl, DType::S64);
  const double A = -0.75;
  auto conv1 = [&](Value x) {  // ((A + 2) * x - (A + 3)) * x * x + 1
    return b.add(b.mul(b.mul(b.sub(b.mul(b.full(ft, A + 2), x), b.full(ft, A + 3)), x), x), one);
  };
  auto conv2 = [&](Value x) {  // ((A * x - 5A) * x + 8A) * x - 4A
    return b.sub(b.mul(b.add(b.mul(b.sub(b.mul(b.full(ft, A), x), b.full(ft, 5 * A)), x), b.full(ft, 8 * A)), x),
                 b.full(ft, 4 * A));
  };
  Value x2 = b.sub(one, tt);
  Value w[4] = {conv2(b.add(tt, one)), conv1(tt), conv1(x2), conv2(b.add(x2, one))};
  std::vector<Tap> r;
  for (int k = 0; k < 4; ++k) {
    Value idx = b.add(base, b.full(it, static_cast<double>(k - 1)));
    idx = b.min(b.max(idx, b.full(it, 0)), last);
    r.push_back({idx, w[k]});
  }
  return r;
}

Value weighted(Builder& b, Value v, const Tap& t, int64_t dim) {
  if (!t.weight) return v;
  return b.mul(v, b.broadcastInDim(b.convert(*t.weight, v.dtype()), v.shape(), {dim}));
}

// Source index (S64 [out]) of every padded position of one dim.
Value padIndex(Builder& b, int64_t n, int64_t lo, int64_t hi, bool reflect) {
  int64_t out = n + lo + hi;
  hlo::Type it{DType::S64, {out}};
  Value src = b.sub(b.iota(it, 0), b.full(it, static_cast<double>(lo)));
  Value zero = b.full(it, 0), last = b.full(it, static_cast<double>(n - 1));
  if (!reflect) return b.min(b.max(src, zero), last);
  src = b.select(b.compare(Cmp::LT, src, zero), b.neg(src), src);
  return b.select(b.compare(Cmp::GT, src, last), b.sub(b.full(it, 2.0 * static_cast<double>(n - 1)), src), src);
}

}  // namespace

Value resample(Builder& b, Value x, Interp mode, bool alignCorners, const std::vector<ResampleDim>& dims) {
  int64_t lead = x.rank() - static_cast<int64_t>(dims.size());
  // Innermost dim first, as ATen's separable kernels accumulate.
  for (size_t k = dims.size(); k-- > 0;) {
    int64_t d = lead + static_cast<int64_t>(k);
    std::optional<Value> acc;
    for (const Tap& t : taps(b, mode, alignCorners, dims[k], x.dtype())) {
      Value v = weighted(b, indexSelect(b, x, t.index, d), t, d);
      acc = acc ? b.add(*acc, v) : v;
    }
    x = *acc;
  }
  return x;
}

Value resampleBackward(Builder& b, Value g, Interp mode, bool alignCorners, const std::vector<ResampleDim>& dims) {
  int64_t lead = g.rank() - static_cast<int64_t>(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t d = lead + static_cast<int64_t>(k);
    hlo::Shape s = g.shape();
    s[d] = dims[k].in;
    Value acc = b.full(hlo::Type{g.dtype(), s}, 0);
    for (const Tap& t : taps(b, mode, alignCorners, dims[k], g.dtype()))
      acc = indexScatter(b, acc, t.index, weighted(b, g, t, d), d, Reduce::Add);
    g = acc;
  }
  return g;
}

Value padReflectReplicate(Builder& b, Value x, const std::vector<int64_t>& pads, bool reflect) {
  size_t nd = pads.size() / 2;
  for (size_t i = 0; i < nd; ++i) {
    int64_t d = x.rank() - 1 - static_cast<int64_t>(i);
    x = indexSelect(b, x, padIndex(b, x.shape()[d], pads[2 * i], pads[2 * i + 1], reflect), d);
  }
  return x;
}

Value padReflectReplicateBackward(Builder& b, Value g, const std::vector<int64_t>& inShape,
                                  const std::vector<int64_t>& pads, bool reflect) {
  size_t nd = pads.size() / 2;
  for (size_t i = 0; i < nd; ++i) {
    int64_t d = g.rank() - 1 - static_cast<int64_t>(i);
    hlo::Shape s = g.shape();
    s[d] = inShape[d];
    Value idx = padIndex(b, inShape[d], pads[2 * i], pads[2 * i + 1], reflect);
    g = indexScatter(b, b.full(hlo::Type{g.dtype(), s}, 0), idx, g, d, Reduce::Add);
  }
  return g;
}

}  // namespace tpu::lowering
