#include "Cephes.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include "Special.h"
#include "SpecialTables.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;
using hlo::Cmp;
using hlo::DType;
using hlo::Type;
using hlo::Value;
namespace tb = tables;

Value k(Builder& b, const Value& like, double v) { return b.scalarLike(like, v); }
Value lt(Builder& b, Value x, double v) { return b.compare(Cmp::LT, x, k(b, x, v)); }
Value le(Builder& b, Value x, double v) { return b.compare(Cmp::LE, x, k(b, x, v)); }
Value gt(Builder& b, Value x, double v) { return b.compare(Cmp::GT, x, k(b, x, v)); }
Value eq(Builder& b, Value x, double v) { return b.compare(Cmp::EQ, x, k(b, x, v)); }
Value sel(Builder& b, Value p, Value x, Value y) { return b.select(p, x, y); }
Value sqrt(Builder& b, Value x) { return b.unary("sqrt", x); }
Value log(Builder& b, Value x) { return b.unary("log", x); }
Value exp(Builder& b, Value x) { return b.unary("exponential", x); }
Value sin(Builder& b, Value x) { return b.unary("sine", x); }
Value cos(Builder& b, Value x) { return b.unary("cosine", x); }

// Horner from the highest coefficient, as Cephes' polevl (len = degree: c[0..len]).
template <size_t N>
Value polevl(Builder& b, Value x, const double (&c)[N], size_t len = N - 1) {
  Value r = k(b, x, c[0]);
  for (size_t i = 1; i <= len; ++i) r = b.add(b.mul(r, x), k(b, x, c[i]));
  return r;
}

// Clenshaw over a Chebyshev series in y (Special.h's chbevl), sized by its table.
template <size_t N>
Value chebyshev(Builder& b, Value y, const double (&c)[N]) {
  return chbevl(b, y, c, N);
}

constexpr double kPi4 = 0.785398163397448309615660845819875721, k3Pi4 = 2.356194490192344928846982537459627163;
constexpr double kSqrt2OverPi = 0.797884560802865355879892119868763737, k2OverPi = 0.636619772367581343075535053490057448;

// The asymptotic form shared by J0/J1/Y0/Y1 above x = 5: w = 25 / x^2 (order 0) or (5/x)(5/x) (order 1).
template <size_t A, size_t B, size_t C, size_t D>
Value besselLarge(Builder& b, Value x, bool order1, bool y, const double (&PP)[A], const double (&PQ)[B],
                  const double (&QP)[C], const double (&QQ)[D]) {
  Value w = order1 ? b.mul(b.div(k(b, x, 5), x), b.div(k(b, x, 5), x)) : b.div(k(b, x, 25), b.mul(x, x));
  Value p = b.div(polevl(b, w, PP), polevl(b, w, PQ));
  Value q = b.mul(b.div(k(b, x, 5), x), b.div(polevl(b, w, QP), polevl(b, w, QQ)));
  Value ph = b.sub(x, k(b, x, order1 ? k3Pi4 : kPi4));
  Value s = y ? b.add(b.mul(p, sin(b, ph)), b.mul(q, cos(b, ph))) : b.sub(b.mul(p, cos(b, ph)), b.mul(q, sin(b, ph)));
  return b.div(b.mul(s, k(b, x, kSqrt2OverPi)), sqrt(b, x));
}

Value j0(Builder& b, Value x0) {
  Value x = b.unary("abs", x0), z = b.mul(x, x);
  Value small = b.div(b.mul(b.mul(b.sub(z, k(b, z, 5.78318596294678452118)), b.sub(z, k(b, z, 30.4712623436620863991))),
                            polevl(b, z, tb::kJ0RP)),
                      polevl(b, z, tb::kJ0RQ));
  small = sel(b, lt(b, x, 1e-5), b.sub(k(b, x, 1), b.div(z, k(b, x, 4))), small);
  Value large = besselLarge(b, x, false, false, tb::kJ0PP, tb::kJ0PQ, tb::kJ0QP, tb::kJ0QQ);
  return sel(b, le(b, x, 5), small, large);
}

Value j1(Builder& b, Value x0) {
  Value x = b.unary("abs", x0), z = b.mul(x, x);
  Value small = b.mul(b.mul(b.mul(b.div(polevl(b, z, tb::kJ1RP), polevl(b, z, tb::kJ1RQ)), x),
                            b.sub(z, k(b, z, 14.6819706421238932572))),
                      b.sub(z, k(b, z, 49.2184563216946036703)));
  Value large = besselLarge(b, x, true, false, tb::kJ1PP, tb::kJ1PQ, tb::kJ1QP, tb::kJ1QQ);
  Value r = sel(b, le(b, x, 5), small, large);
  return sel(b, lt(b, x0, 0), b.neg(r), r);  // odd
}

Value y0(Builder& b, Value x) {
  Value z = b.mul(x, x);
  Value small = b.add(b.div(polevl(b, z, tb::kY0YP), polevl(b, z, tb::kY0YQ)),
                      b.mul(b.mul(k(b, x, k2OverPi), log(b, x)), j0(b, x)));
  small = sel(b, lt(b, x, 0), k(b, x, NAN), sel(b, eq(b, x, 0), k(b, x, -INFINITY), small));
  Value large = besselLarge(b, x, false, true, tb::kY0PP, tb::kY0PQ, tb::kY0QP, tb::kY0QQ);
  return sel(b, le(b, x, 5), small, large);
}

Value y1(Builder& b, Value x) {
  Value z = b.mul(x, x);
  Value small = b.add(b.mul(x, b.div(polevl(b, z, tb::kY1YP), polevl(b, z, tb::kY1YQ))),
                      b.mul(k(b, x, k2OverPi), b.sub(b.mul(j1(b, x), log(b, x)), b.div(k(b, x, 1), x))));
  small = sel(b, lt(b, x, 0), k(b, x, NAN), sel(b, eq(b, x, 0), k(b, x, -INFINITY), small));
  Value large = besselLarge(b, x, true, true, tb::kY1PP, tb::kY1PQ, tb::kY1QP, tb::kY1QQ);
  return sel(b, le(b, x, 5), small, large);
}

// K0 / K1 (scaled: times exp(x)): a Chebyshev series in x^2 - 2 with the log(x/2) I term up to x = 2, one
// in 8/x - 2 beyond; inf at 0, nan below.
Value besselK(Builder& b, Value x, bool order1, bool scaled) {
  Value ys = b.sub(b.mul(x, x), k(b, x, 2)), yl = b.sub(b.div(k(b, x, 8), x), k(b, x, 2));
  Value lg = log(b, b.mul(k(b, x, 0.5), x));
  Value small, large;
  if (!order1) {
    Value i0 = special(b, Special::I0, {&x, 1});
    small = b.sub(chebyshev(b, ys, tb::kK0A), b.mul(lg, i0));
    large = chebyshev(b, yl, tb::kK0B);
  } else {
    Value i1 = special(b, Special::I1, {&x, 1});
    small = b.add(b.mul(lg, i1), b.div(chebyshev(b, ys, tb::kK1A), x));
    large = chebyshev(b, yl, tb::kK1B);
  }
  if (scaled) {
    small = b.mul(small, exp(b, x));
    large = b.div(large, sqrt(b, x));
  } else {
    large = b.div(b.mul(exp(b, b.neg(x)), large), sqrt(b, x));
  }
  Value r = sel(b, le(b, x, 2), small, large);
  return sel(b, lt(b, x, 0), k(b, x, NAN), sel(b, eq(b, x, 0), k(b, x, INFINITY), r));
}

Value airyAi(Builder& b, Value x) {
  const double c = 5.64189583547756286948e-01;
  // x < -2.09: the oscillating asymptotic form.
  Value nx = b.neg(x);
  Value zetaN = b.div(b.mul(b.mul(k(b, x, -2), x), sqrt(b, nx)), k(b, x, 3));
  Value z = b.div(k(b, x, 1), zetaN), zz = b.mul(z, z);
  Value afn = polevl(b, zz, tb::kAiryAFN), afd = polevl(b, zz, tb::kAiryAFD);
  Value agn = polevl(b, zz, tb::kAiryAGN), agd = polevl(b, zz, tb::kAiryAGD);
  Value t = b.add(zetaN, k(b, x, 0.25 * M_PI));
  Value neg = b.mul(b.div(k(b, x, c), sqrt(b, sqrt(b, nx))),
                    b.sub(b.mul(sin(b, t), b.add(k(b, x, 1), b.div(b.mul(zz, afn), afd))),
                          b.mul(cos(b, t), b.div(b.mul(z, agn), agd))));
  // x >= 2.09: the decaying asymptotic form.
  Value zeta = b.div(b.mul(b.mul(k(b, x, 2), x), sqrt(b, x)), k(b, x, 3));
  Value iz = b.div(k(b, x, 1), zeta);
  Value pos = b.div(b.mul(k(b, x, c), b.div(polevl(b, iz, tb::kAiryAN), polevl(b, iz, tb::kAiryAD))),
                    b.mul(b.mul(k(b, x, 2), sqrt(b, sqrt(b, x))), exp(b, zeta)));
  // Between: the power series in x^3 until a term is below epsilon relative to f (Math.h's loop; each
  // element stops on its own).
  double eps = x.dtype() == DType::F64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
  Value f = k(b, x, 1), g = x, kk = k(b, x, 1), m = k(b, x, 1), n = x, x3 = b.mul(b.mul(x, x), x);
  Value go = b.full(Type{DType::Pred, x.shape()}, 1);
  for (int it = 0; it < 16; ++it) {  // |x^3| < 9.2 here: 13 terms reach float64 epsilon
    Value m1 = b.mul(m, x3), k1 = b.add(kk, k(b, x, 1));
    m1 = b.div(m1, k1);
    Value n1 = b.div(b.mul(n, x3), b.add(k1, k(b, x, 1)));
    k1 = b.add(k1, k(b, x, 1));
    m1 = b.div(m1, k1);
    Value f1 = b.add(f, m1);
    k1 = b.add(k1, k(b, x, 1));
    n1 = b.div(n1, k1);
    Value g1 = b.add(g, n1);
    Value tNew = b.unary("abs", b.div(m1, f1));
    f = sel(b, go, f1, f);
    g = sel(b, go, g1, g);
    m = sel(b, go, m1, m);
    n = sel(b, go, n1, n);
    kk = sel(b, go, k1, kk);
    go = b.binary("and", go, gt(b, tNew, eps));
  }
  Value mid = b.sub(b.mul(k(b, x, 0.355028053887817239260), f), b.mul(k(b, x, 0.258819403792806798405), g));
  Value r = sel(b, lt(b, x, -2.09), neg, sel(b, b.compare(Cmp::GE, x, k(b, x, 2.09)), pos, mid));
  r = sel(b, gt(b, x, 103.892), k(b, x, 0), r);
  Value inf = b.compare(Cmp::EQ, b.unary("abs", x), k(b, x, INFINITY));
  return sel(b, inf, k(b, x, NAN), r);
}

Value ndtri(Builder& b, Value y0) {
  const double e2 = 0.13533528323661269189, s2pi = 2.50662827463100050242E0;
  Value flip = gt(b, y0, 1 - e2);
  Value y = sel(b, flip, b.sub(k(b, y0, 1), y0), y0);
  // Centre: y0 in (exp(-2), 1 - exp(-2)).
  Value yc = b.sub(y, k(b, y, 0.5)), y2 = b.mul(yc, yc);
  Value xc = b.mul(b.add(yc, b.mul(yc, b.div(b.mul(y2, polevl(b, y2, tb::kNdtriP0)), polevl(b, y2, tb::kNdtriQ0)))),
                   k(b, y, s2pi));
  // Tails: x = sqrt(-2 log y), two fits split at x = 8.
  Value x = sqrt(b, b.mul(k(b, y, -2), log(b, y)));
  Value x0 = b.sub(x, b.div(log(b, x), x));
  Value z = b.div(k(b, x, 1), x);
  Value x1 = sel(b, lt(b, x, 8), b.div(b.mul(z, polevl(b, z, tb::kNdtriP1)), polevl(b, z, tb::kNdtriQ1)),
                 b.div(b.mul(z, polevl(b, z, tb::kNdtriP2)), polevl(b, z, tb::kNdtriQ2)));
  Value xt = b.sub(x0, x1);
  xt = sel(b, flip, xt, b.neg(xt));
  Value r = sel(b, gt(b, y, e2), xc, xt);
  r = sel(b, b.binary("or", lt(b, y0, 0), gt(b, y0, 1)), k(b, y0, NAN), r);
  r = sel(b, eq(b, y0, 1), k(b, y0, INFINITY), r);
  return sel(b, eq(b, y0, 0), k(b, y0, -INFINITY), r);
}

// A [100] constant column of the erfcx table.
Value tableColumn(Builder& b, DType t, int j) {
  std::string v = "value = dense<[";
  char buf[40];
  for (int i = 0; i < 100; ++i) {
    std::snprintf(buf, sizeof buf, "%s%.17e", i ? ", " : "", tb::kErfcxY100[i][j]);
    v += buf;
  }
  v += std::string("]> : tensor<100x") + hlo::mlirName(t) + ">";
  return b.op("stablehlo.constant", {}, {Type{t, {100}}}, v)[0];
}

// Math.h's erfcx_y100: the polynomial of the hundredth that y100 (in [0, 100)) falls in.
Value erfcxY100(Builder& b, Value y100) {
  Value idx = b.convert(b.clamp(k(b, y100, 0), b.unary("floor", y100), k(b, y100, 99)), DType::S32);
  hlo::Shape is = y100.shape();
  is.push_back(1);
  Value index = b.reshape(idx, is);
  hlo::GatherDims dims{{}, {0}, {0}, static_cast<int64_t>(y100.rank())};
  Value t = b.sub(b.mul(k(b, y100, 2), y100), b.add(b.mul(k(b, y100, 2), b.convert(idx, y100.dtype())), k(b, y100, 1)));
  Value r;
  for (int j = 6; j >= 0; --j) {
    Value c = b.gather(tableColumn(b, y100.dtype(), j), index, dims, {1}, y100.shape());
    r = j == 6 ? c : b.add(c, b.mul(r, t));
  }
  // y100 = 100 only for |x| < 4 eps: erfcx is 1 there.
  return sel(b, b.compare(Cmp::GE, y100, k(b, y100, 100)), k(b, y100, 1), r);
}

Value erfcx(Builder& b, Value x) {
  const double ispi = 0.56418958354775628694807945156;
  Value xx = b.mul(x, x);
  Value cf = b.div(b.mul(k(b, x, ispi), b.add(b.mul(xx, b.add(xx, k(b, x, 4.5))), k(b, x, 2))),
                   b.mul(x, b.add(b.mul(xx, b.add(xx, k(b, x, 5))), k(b, x, 3.75))));
  Value pos = sel(b, gt(b, x, 5e7), b.div(k(b, x, ispi), x),
                  sel(b, gt(b, x, 50), cf, erfcxY100(b, b.div(k(b, x, 400), b.add(k(b, x, 4), x)))));
  Value twoExp = b.mul(k(b, x, 2), exp(b, xx));
  Value negMid = b.sub(twoExp, erfcxY100(b, b.div(k(b, x, 400), b.sub(k(b, x, 4), x))));
  Value neg = sel(b, lt(b, x, -26.7), k(b, x, INFINITY), sel(b, lt(b, x, -6.1), twoExp, negMid));
  Value r = sel(b, b.compare(Cmp::GE, x, k(b, x, 0)), pos, neg);
  return sel(b, b.compare(Cmp::NE, x, x), x, r);
}

// erfc(t) for t >= -1/sqrt(2) as erfcx(t) exp(-t^2), with t^2 split exactly into hi + lo (Dekker) so that
// exp(-t^2) keeps the relative accuracy CPU's erfc has in the far tail.
Value erfcViaErfcx(Builder& b, Value t0) {
  Value t = b.min(t0, k(b, t0, 30));  // erfc(30) is 0 in float64 too; keeps the split below finite
  double split = t.dtype() == DType::F64 ? 134217729.0 : 4097.0;
  Value c = b.mul(k(b, t, split), t);
  Value th = b.sub(c, b.sub(c, t)), tl = b.sub(t, th);
  Value hi = b.mul(t, t);
  Value lo = b.add(b.add(b.sub(b.mul(th, th), hi), b.mul(k(b, t, 2), b.mul(th, tl))), b.mul(tl, tl));
  Value e = b.mul(exp(b, b.neg(hi)), b.sub(k(b, t, 1), lo));
  return b.mul(erfcx(b, t), e);
}

Value logNdtr(Builder& b, Value x) {
  Value t = b.mul(x, k(b, x, M_SQRT1_2));
  Value lower = b.sub(log(b, b.div(erfcx(b, b.neg(t)), k(b, x, 2))), b.mul(t, t));
  Value upper = b.unary("log_plus_one", b.neg(b.div(erfcViaErfcx(b, t), k(b, x, 2))));
  return sel(b, lt(b, x, -1), lower, upper);
}

// Runs `step` over the carried values while any element is not done (the last carried value, Pred) and
// fewer than 2000 rounds ran (ATen's MAXITER); `step` returns the new values, done last.
std::vector<Value> untilDone(Builder& b, std::vector<Value> init,
                             const std::function<std::vector<Value>(Builder&, std::span<const Value>)>& step) {
  init.insert(init.begin(), b.constant(DType::F64, 0));
  auto out = b.whileLoop(
      init,
      [](Builder& r, std::span<const Value> v) {
        Value notDone = r.unary("not", v.back());
        Value f = r.constantInt(DType::Pred, 0);
        std::vector<int64_t> dims;
        for (int64_t i = 0; i < notDone.rank(); ++i) dims.push_back(i);
        Value any = r.reduce({&notDone, 1}, {&f, 1}, dims, [](Builder& rb, std::span<const Value> p) {
          return std::vector<Value>{rb.binary("or", p[0], p[1])};
        })[0];
        return std::vector<Value>{r.binary("and", any, r.compare(Cmp::LT, v[0], r.constant(DType::F64, 2000)))};
      },
      [&](Builder& r, std::span<const Value> v) {
        std::vector<Value> next = step(r, v.subspan(1));
        Value done = v.back();
        for (size_t i = 0; i + 1 < next.size(); ++i) next[i] = r.select(done, v[1 + i], next[i]);
        next.back() = r.binary("or", done, next.back());
        next.insert(next.begin(), r.add(v[0], r.constant(DType::F64, 1)));
        return next;
      });
  return std::vector<Value>(out.begin() + 1, out.end());
}

constexpr double kMachep = 1.11022302462515654042E-16;

// x^a e^-x / Gamma(a) (0 when its log is below -MAXLOG).
Value igamFac(Builder& b, Value a, Value x) {
  Value lg = b.op("chlo.lgamma", {&a, 1}, {a.type})[0];
  Value ax = b.sub(b.sub(b.mul(a, log(b, x)), x), lg);
  return sel(b, lt(b, ax, -7.09782712893383996843E2), k(b, ax, 0), exp(b, ax));
}

// P(a, x) by its power series (where `use`; elsewhere the result is unused).
Value igamSeries(Builder& b, Value a, Value x, Value use) {
  Value done0 = b.unary("not", use);
  auto out = untilDone(b, {a, k(b, a, 1), k(b, a, 1), done0}, [&](Builder& r, std::span<const Value> v) {
    Value rr = r.add(v[0], k(r, a, 1));
    Value c = r.mul(v[1], r.div(x, rr));
    Value ans = r.add(v[2], c);
    return std::vector<Value>{rr, c, ans, r.compare(Cmp::LE, c, r.mul(k(r, ans, kMachep), ans))};
  });
  return b.div(b.mul(out[2], igamFac(b, a, x)), a);
}

// Q(a, x) by Legendre's continued fraction (Cephes igamc), for x > 1.1 and x >= a.
Value igamcFraction(Builder& b, Value a, Value x, Value use) {
  const double big = 4.503599627370496e15, biginv = 2.22044604925031308085e-16;
  Value y0 = b.sub(k(b, a, 1), a), z0 = b.add(b.add(x, y0), k(b, a, 1));
  Value pkm1 = b.add(x, k(b, x, 1)), qkm1 = b.mul(z0, x);
  Value ans0 = b.div(pkm1, qkm1);
  Value done0 = b.unary("not", use);
  auto out = untilDone(b, {k(b, a, 0), y0, z0, k(b, a, 1), x, pkm1, qkm1, ans0, done0},
                       [&](Builder& r, std::span<const Value> v) {
    Value c = r.add(v[0], k(r, a, 1)), y = r.add(v[1], k(r, a, 1)), z = r.add(v[2], k(r, a, 2));
    Value yc = r.mul(y, c);
    Value pk = r.sub(r.mul(v[5], z), r.mul(v[3], yc)), qk = r.sub(r.mul(v[6], z), r.mul(v[4], yc));
    Value nz = r.compare(Cmp::NE, qk, k(r, qk, 0));
    Value ratio = r.div(pk, sel(r, nz, qk, k(r, qk, 1)));
    Value t = sel(r, nz, r.unary("abs", r.div(r.sub(v[7], ratio), ratio)), k(r, qk, 1));
    Value ans = sel(r, nz, ratio, v[7]);
    Value pkm2 = v[5], qkm2 = v[6], p1 = pk, q1 = qk;
    Value rescale = gt(r, r.unary("abs", pk), big);
    auto sc = [&](Value w) { return sel(r, rescale, r.mul(w, k(r, w, biginv)), w); };
    return std::vector<Value>{c, y, z, sc(pkm2), sc(qkm2), sc(p1), sc(q1), ans, le(r, t, kMachep)};
  });
  return b.mul(out[7], igamFac(b, a, x));
}

// Q(a, x) for x <= 1.1 by DLMF 8.7.3, without the cancellation of 1 - P.
Value igamcSeries(Builder& b, Value a, Value x, Value use) {
  Value done0 = b.unary("not", use);
  auto out = untilDone(b, {k(b, a, 0), k(b, a, 1), k(b, a, 0), done0}, [&](Builder& r, std::span<const Value> v) {
    Value n = r.add(v[0], k(r, a, 1));
    Value fac = r.mul(v[1], r.div(r.neg(x), n));
    Value term = r.div(fac, r.add(a, n));
    Value sum = r.add(v[2], term);
    return std::vector<Value>{n, fac, sum, r.compare(Cmp::LE, r.unary("abs", term),
                                                      r.mul(k(r, sum, kMachep), r.unary("abs", sum)))};
  });
  Value logx = log(b, x);
  Value a1 = b.add(a, k(b, a, 1));
  Value lg1p = b.op("chlo.lgamma", {&a1, 1}, {a.type})[0], lga = b.op("chlo.lgamma", {&a, 1}, {a.type})[0];
  Value term = b.neg(b.unary("exponential_minus_one", b.sub(b.mul(a, logx), lg1p)));
  return b.sub(term, b.mul(exp(b, b.sub(b.mul(a, logx), lga)), out[2]));
}

}  // namespace

Value igamma(Builder& b, Value a0, Value x0, bool complement) {
  DType outT = a0.dtype();
  Value a = b.convert(a0, DType::F64), x = b.convert(x0, DType::F64);
  Value nan = b.binary("or", b.compare(Cmp::NE, a, a), b.compare(Cmp::NE, x, x));
  Value valid = b.unary("not", b.binary("or", b.binary("or", lt(b, a, 0), lt(b, x, 0)), nan));
  Value regular = b.binary("and", valid, b.binary("and", b.binary("and", gt(b, a, 0), gt(b, x, 0)),
                                                  b.binary("and", b.isFinite(a), b.isFinite(x))));
  // ATen's method choice. igammac: x > 1.1: x < a -> 1 - series, else the fraction; x <= 0.5: the series
  // for P when -0.4 / log(x) < a, else DLMF; 0.5 < x <= 1.1: P's series when 1.1 x < a, else DLMF.
  // igamma: x > 1 and x > a -> 1 - igammac, else P's series.
  Value big = gt(b, x, 1.1);
  Value smallX = le(b, x, 0.5);
  Value lgx = log(b, x);
  Value viaP = sel(b, big, b.compare(Cmp::LT, x, a),
                   sel(b, smallX, b.compare(Cmp::LT, b.div(k(b, x, -0.4), lgx), a),
                       b.compare(Cmp::LT, b.mul(x, k(b, x, 1.1)), a)));
  Value useFrac = b.binary("and", big, b.unary("not", viaP));
  Value useDlmf = b.binary("and", b.unary("not", big), b.unary("not", viaP));
  Value pFirst = b.unary("not", b.binary("and", gt(b, x, 1), b.compare(Cmp::GT, x, a)));  // igamma's choice
  Value needP = b.binary("and", regular, complement ? viaP : b.binary("or", pFirst, viaP));
  Value p = igamSeries(b, a, x, needP);
  Value qFrac = igamcFraction(b, a, x, b.binary("and", regular, useFrac));
  Value qDlmf = igamcSeries(b, a, x, b.binary("and", regular, useDlmf));
  Value one = k(b, a, 1);
  Value q = sel(b, viaP, b.sub(one, p), sel(b, useFrac, qFrac, qDlmf));
  Value r = complement ? q : sel(b, pFirst, p, b.sub(one, q));
  // Edges, as ATen: a == 0 (x > 0): P = 1; x == 0: P = 0; a = inf: P = 0 (nan if x = inf too); x = inf: P = 1.
  Value P0 = k(b, a, complement ? 1 : 0), P1 = k(b, a, complement ? 0 : 1), vnan = k(b, a, NAN);
  Value aInf = eq(b, a, INFINITY), xInf = eq(b, x, INFINITY);
  Value edge = sel(b, eq(b, a, 0), sel(b, gt(b, x, 0), P1, vnan),
                   sel(b, eq(b, x, 0), P0, sel(b, aInf, sel(b, xInf, vnan, P0), P1)));
  r = sel(b, regular, r, sel(b, valid, edge, vnan));
  return b.convert(r, outT);
}

Value erfcTail(Builder& b, Value t) { return erfcViaErfcx(b, t); }

Value cephes(Builder& b, Cephes op, Value x) {
  switch (op) {
    case Cephes::J0: return j0(b, x);
    case Cephes::J1: return j1(b, x);
    case Cephes::Y0: return y0(b, x);
    case Cephes::Y1: return y1(b, x);
    case Cephes::K0: return besselK(b, x, false, false);
    case Cephes::K1: return besselK(b, x, true, false);
    case Cephes::K0e: return besselK(b, x, false, true);
    case Cephes::K1e: return besselK(b, x, true, true);
    case Cephes::AiryAi: return airyAi(b, x);
    case Cephes::Ndtri: return ndtri(b, x);
    case Cephes::Erfcx: return erfcx(b, x);
    case Cephes::LogNdtr: return logNdtr(b, x);
  }
  return x;
}

}  // namespace tpu::lowering
