#include "Special.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "Cephes.h"
#include "Elementwise.h"
#include "Polynomial.h"

namespace tpu::lowering {
namespace {

using hlo::Cmp;

Value k(Builder& b, const Value& like, double v) { return b.scalarLike(like, v); }
Value chlo(Builder& b, const char* name, std::span<const Value> xs) { return b.op(name, xs, {xs[0].type})[0]; }
Value isNan(Builder& b, Value x) { return b.compare(Cmp::NE, x, x); }


// Cephes coefficients (as in ATen/native/Math.h).
const double kI0A[] = {
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
    1.71539128555513303061E-15,  -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
    9.67580903537323691224E-11,  -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8,  6.04699502254191894932E-8,  -2.67079385394061173391E-7,
    1.11738753912010371815E-6,   -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5,  1.88502885095841655729E-4,  -5.76375574538582365885E-4,
    1.63947561694133579842E-3,   -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2,  4.93052842396707084878E-2,  -9.49010970480476444210E-2,
    1.71620901522208775349E-1,   -3.04682672343198398683E-1, 6.76795274409476084995E-1};
const double kI0B[] = {
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17,  -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15,  3.81168066935262242075E-15,  -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14,  3.85277838274214270114E-13,
    7.18012445138366623367E-13,  -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11,  4.94060238822496958910E-10,
    3.39623202570838634515E-9,   2.26666899049817806459E-8,   2.04891858946906374183E-7,
    2.89137052083475648297E-6,   6.88975834691682398426E-5,   3.36911647825569408990E-3,
    8.04490411014108831608E-1};
// i1: float32 uses the tail of each series (fewer terms), float64 the whole one, as ATen.
const double kI1A[] = {
    2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
    -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
    3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
    -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
    9.38153738649577178388E-9,  -4.44505912879632808065E-8,  2.00329475355213526229E-7,
    -8.56872026469545474066E-7, 3.47025130813767847674E-6,  -1.32731636560394358279E-5,
    4.78156510755005422638E-5,  -1.61760815825896745588E-4, 5.12285956168575772895E-4,
    -1.51357245063125314899E-3, 4.15642294431288815669E-3,  -1.05640848946261981558E-2,
    2.47264490306265168283E-2,  -5.29459812080949914269E-2, 1.02643658689847095384E-1,
    -1.76416518357834055153E-1, 2.52587186443633654823E-1};
const double kI1B[] = {
    7.51729631084210481353E-18,  4.41434832307170791151E-18,  -4.65030536848935832153E-17,
    -3.20952592199342395980E-17, 2.96262899764595013876E-16,  3.30820231092092828324E-16,
    -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
    4.27244001671195135429E-14,  -2.10154184277266431302E-14, -4.08355111109219731823E-13,
    -7.19855177624590851209E-13, 2.03562854414708950722E-12,  1.41258074366137813316E-11,
    3.25260358301548823856E-11,  -1.89749581235054123450E-11, -5.58974346219658380687E-10,
    -3.83538038596423702205E-9,  -2.63146884688951950684E-8,  -2.51223623787020892529E-7,
    -3.88256480887769039346E-6,  -1.10588938762623716291E-4,  -9.76109749136146840777E-3,
    7.78576235018280120474E-1};

// Modified Bessel functions: order 0 or 1, exponentially scaled or not.
Value besselI(Builder& b, Value x, bool order1, bool scaled) {
  bool f64 = x.dtype() == DType::F64;
  Value a = b.unary("abs", x);
  Value small = b.compare(Cmp::LE, a, k(b, a, 8.0));
  Value ys = b.sub(b.div(a, k(b, a, 2.0)), k(b, a, 2.0));
  Value yl = b.sub(b.div(k(b, a, 32.0), a), k(b, a, 2.0));
  Value s, l;
  if (!order1) {
    s = chbevl(b, ys, kI0A, 30);
    l = chbevl(b, yl, kI0B, 25);
  } else {
    size_t na = f64 ? 29 : 17, nb = f64 ? 25 : 7;
    s = b.mul(chbevl(b, ys, kI1A + (29 - na), na), a);
    l = chbevl(b, yl, kI1B + (25 - nb), nb);
  }
  l = b.div(l, b.unary("sqrt", a));
  Value r = b.select(small, s, l);
  if (!scaled) {
    // As ATen: exp(x) * series, in that order (the large branch divides by sqrt(x) after).
    Value e = b.unary("exponential", a);
    Value rs = order1 ? b.mul(b.mul(e, a), chbevl(b, ys, kI1A + (29 - (f64 ? 29 : 17)), f64 ? 29 : 17))
                      : b.mul(e, s);
    Value rl = b.div(b.mul(e, order1 ? chbevl(b, yl, kI1B + (25 - (f64 ? 25 : 7)), f64 ? 25 : 7)
                                     : chbevl(b, yl, kI0B, 25)),
                     b.unary("sqrt", a));
    r = b.select(small, rs, rl);
  }
  if (order1) r = b.select(b.compare(Cmp::LT, x, k(b, x, 0)), b.neg(r), r);
  return r;
}

// The float's bits as a signed integer of the same width.
DType bitsType(DType t) {
  switch (hlo::byteWidth(t)) {
    case 8: return DType::S64;
    case 4: return DType::S32;
    default: return DType::S16;
  }
}

Value nextAfter(Builder& b, Value x, Value y) {
  hlo::Type it{bitsType(x.dtype()), x.shape()};
  Value bits = b.bitcastConvert(x, it);
  Value one = b.full(it, 1);
  Value up = b.compare(Cmp::EQ, b.compare(Cmp::GT, y, x), b.compare(Cmp::GT, x, k(b, x, 0)));
  Value next = b.bitcastConvert(b.select(up, b.add(bits, one), b.sub(bits, one)), x.type);
  // From zero: the smallest subnormal carrying y's sign.
  Value yBits = b.bitcastConvert(y, it);
  Value signMask = b.full(it, 0);
  Value yNeg = b.compare(Cmp::LT, yBits, signMask);
  int64_t minBits = hlo::byteWidth(x.dtype()) == 8 ? INT64_MIN : hlo::byteWidth(x.dtype()) == 4 ? INT32_MIN : INT16_MIN;
  Value minInt = b.broadcast(b.constantInt(it.dtype, minBits), x.shape());
  Value tinyBits = b.select(yNeg, b.binary("or", minInt, one), one);
  Value tiny = b.bitcastConvert(tinyBits, x.type);
  Value r = b.select(b.compare(Cmp::EQ, x, k(b, x, 0)), tiny, next);
  r = b.select(b.compare(Cmp::EQ, x, y), y, r);
  Value nan = b.binary("or", isNan(b, x), isNan(b, y));
  return b.select(nan, b.add(x, y), r);
}

// Hurwitz zeta(x, q) as Cephes/ATen compute it (float64 accumulation, the same early exits): a direct sum
// until q + i > 9 (a while loop: a very negative q needs many terms), then Euler-Maclaurin terms.
Value zetaCephes(Builder& b, Value x0, Value q0) {
  DType out = x0.dtype();
  Value x = b.convert(x0, DType::F64), q = b.convert(q0, DType::F64);
  const double machep = 1.11022302462515654042E-16;
  hlo::Type pt{DType::Pred, x.shape()};
  Value s0 = b.binary("power", q, b.neg(x));
  Value zero = k(b, x, 0);
  Value init[] = {x, k(b, x, 0) /*i*/, q /*a*/, zero /*b*/, s0, b.full(pt, 0) /*done*/, b.full(pt, 0) /*conv*/};
  auto loop = b.whileLoop(
      init,
      [&](Builder& r, std::span<const Value> v) {
        Value notDone = r.unary("not", v[5]);
        Value f = r.constant(DType::Pred, 0);
        auto any = r.reduce({&notDone, 1}, {&f, 1}, [&] {
          std::vector<int64_t> d;
          for (int64_t i = 0; i < notDone.rank(); ++i) d.push_back(i);
          return d;
        }(), [](Builder& rb, std::span<const Value> p) { return std::vector<Value>{rb.binary("or", p[0], p[1])}; });
        return std::vector<Value>{any[0]};
      },
      [&](Builder& r, std::span<const Value> v) {
        const Value &xv = v[0], &done = v[5];
        Value i = r.add(v[1], r.scalarLike(xv, 1)), a = r.add(v[2], r.scalarLike(xv, 1));
        Value bb = r.binary("power", a, r.neg(xv));
        Value sNew = r.add(v[4], bb);
        Value conv = r.binary("and", r.compare(Cmp::LT, r.mul(r.scalarLike(xv, -machep), sNew), bb),
                              r.compare(Cmp::LT, bb, r.mul(r.scalarLike(xv, machep), sNew)));
        Value more = r.binary("or", r.compare(Cmp::LT, i, r.scalarLike(xv, 9)), r.compare(Cmp::LE, a, r.scalarLike(xv, 9)));
        Value finished = r.binary("or", conv, r.unary("not", more));
        auto keep = [&](Value newV, Value oldV) { return r.select(done, oldV, newV); };
        return std::vector<Value>{xv, keep(i, v[1]), keep(a, v[2]), keep(bb, v[3]), keep(sNew, v[4]),
                                  r.binary("or", done, finished), r.select(done, v[6], conv)};
      });
  Value a = loop[2], bv = loop[3], s = loop[4], conv = loop[6];
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                             7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                             -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
  Value w = a;
  Value one = k(b, x, 1);
  Value em = b.sub(b.add(s, b.div(b.mul(bv, w), b.sub(x, one))), b.mul(k(b, x, 0.5), bv));
  Value aa = one, kk = k(b, x, 0), bb = bv, done = conv;
  for (int i = 0; i < 12; ++i) {
    aa = b.mul(aa, b.add(x, kk));
    bb = b.div(bb, w);
    Value t = b.div(b.mul(aa, bb), k(b, x, A[i]));
    Value sNext = b.add(em, t);
    Value small = b.compare(Cmp::LT, b.unary("abs", b.div(t, sNext)), k(b, x, machep));
    em = b.select(done, em, sNext);
    done = b.binary("or", done, small);
    kk = b.add(kk, one);
    aa = b.mul(aa, b.add(x, kk));
    bb = b.div(bb, w);
  }
  Value r = b.select(conv, s, em);
  // Domain: x == 1 -> inf; x < 1 -> nan; q <= 0: integer q -> inf, non-integer x -> nan.
  Value qle0 = b.compare(Cmp::LE, q, zero);
  r = b.select(b.binary("and", qle0, b.compare(Cmp::NE, x, b.unary("floor", x))), k(b, x, NAN), r);
  r = b.select(b.binary("and", qle0, b.compare(Cmp::EQ, q, b.unary("floor", q))), k(b, x, INFINITY), r);
  r = b.select(b.compare(Cmp::LT, x, one), k(b, x, NAN), r);
  r = b.select(b.compare(Cmp::EQ, x, one), k(b, x, INFINITY), r);
  return b.convert(r, out);
}

// ATen's trigamma (reflection below 0.5, six recurrence steps, asymptotic series).
Value trigamma(Builder& b, Value x) {
  Value neg = b.compare(Cmp::LT, x, k(b, x, 0.5));
  Value sinpx = b.unary("sine", b.mul(k(b, x, M_PI), x));
  Value result = b.select(neg, b.neg(b.div(k(b, x, M_PI * M_PI), b.mul(sinpx, sinpx))), k(b, x, 0));
  Value sign = b.select(neg, k(b, x, -1), k(b, x, 1));
  Value y = b.select(neg, b.sub(k(b, x, 1), x), x);
  for (int i = 0; i < 6; ++i) {
    result = b.add(result, b.div(k(b, x, 1), b.mul(y, y)));
    y = b.add(y, k(b, x, 1));
  }
  Value ixx = b.div(k(b, x, 1), b.mul(y, y));
  Value series = b.sub(k(b, x, 1.0 / 6), b.mul(ixx, b.sub(k(b, x, 1.0 / 30), b.mul(ixx, k(b, x, 1.0 / 42)))));
  Value tail = b.div(b.add(b.add(k(b, x, 1), b.div(k(b, x, 1), b.mul(k(b, x, 2), y))), b.mul(ixx, series)), y);
  return b.mul(sign, b.add(result, tail));
}

Value digamma(Builder& b, Value x) {
  Value r = chlo(b, "chlo.digamma", {&x, 1});
  // As ATen: digamma(+-0) = -+inf, NaN at the negative integers.
  Value zero = b.compare(Cmp::EQ, x, k(b, x, 0));
  Value inf = b.select(unary(b, Unary::Signbit, x), k(b, x, INFINITY), k(b, x, -INFINITY));
  Value negInt = b.binary("and", b.compare(Cmp::LT, x, k(b, x, 0)), b.compare(Cmp::EQ, x, b.unary("floor", x)));
  return b.select(zero, inf, b.select(negInt, k(b, x, NAN), r));
}

// Euclid's algorithm on |x|, |y| (integers), every element until all are done, as ATen's calc_gcd.
Value gcd(Builder& b, Value x, Value y) {
  Value init[] = {b.unary("abs", x), b.unary("abs", y)};  // (b, a) of calc_gcd: loop while a != 0
  auto out = b.whileLoop(
      init,
      [](Builder& r, std::span<const Value> v) {
        Value nz = r.compare(Cmp::NE, v[1], r.scalarLike(v[1], 0));
        Value f = r.constant(DType::Pred, 0);
        std::vector<int64_t> dims;
        for (int64_t i = 0; i < nz.rank(); ++i) dims.push_back(i);
        return std::vector<Value>{r.reduce({&nz, 1}, {&f, 1}, dims, [](Builder& rb, std::span<const Value> a) {
          return std::vector<Value>{rb.binary("or", a[0], a[1])};
        })[0]};
      },
      [](Builder& r, std::span<const Value> v) {
        Value zero = r.compare(Cmp::EQ, v[1], r.scalarLike(v[1], 0));
        Value safe = r.select(zero, r.scalarLike(v[1], 1), v[1]);
        Value rem = r.binary("remainder", v[0], safe);
        return std::vector<Value>{r.select(zero, v[0], v[1]), r.select(zero, v[1], rem)};
      });
  return out[0];
}

Value logit(Builder& b, Value x) { return b.unary("log", b.div(x, b.sub(k(b, x, 1), x))); }

}  // namespace

Value chbevl(Builder& b, Value x, const double* c, size_t n) {
  Value b0 = b.scalarLike(x, c[0]), b1 = b.scalarLike(x, 0), b2 = b.scalarLike(x, 0);
  for (size_t i = 1; i < n; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = b.add(b.sub(b.mul(x, b1), b2), b.scalarLike(x, c[i]));
  }
  return b.mul(b.scalarLike(x, 0.5), b.sub(b0, b2));
}

Value polygamma(Builder& b, int64_t n, Value x) {
  if (n == 0) return digamma(b, x);
  if (n == 1) return trigamma(b, x);
  // (-1)^(n+1) n! zeta(n+1, x), as ATen.
  double sign = n % 2 ? 1.0 : -1.0;
  Value fact = b.unary("exponential", chlo(b, "chlo.lgamma", std::vector<Value>{k(b, x, static_cast<double>(n) + 1)}));
  return b.mul(b.mul(k(b, x, sign), fact), zetaCephes(b, k(b, x, static_cast<double>(n + 1)), x));
}

Value special(Builder& b, Special op, std::span<const Value> a) {
  const Value& x = a[0];
  switch (op) {
    case Special::Lgamma: return chlo(b, "chlo.lgamma", a.first(1));
    case Special::Digamma: return digamma(b, x);
    case Special::Erfinv: return chlo(b, "chlo.erf_inv", a.first(1));
    case Special::Igamma: return igamma(b, a[0], a[1], false);
    case Special::Igammac: return igamma(b, a[0], a[1], true);
    case Special::BesselJ0: return cephes(b, Cephes::J0, x);
    case Special::BesselJ1: return cephes(b, Cephes::J1, x);
    case Special::BesselY0: return cephes(b, Cephes::Y0, x);
    case Special::BesselY1: return cephes(b, Cephes::Y1, x);
    case Special::BesselK0: return cephes(b, Cephes::K0, x);
    case Special::BesselK1: return cephes(b, Cephes::K1, x);
    case Special::BesselK0e: return cephes(b, Cephes::K0e, x);
    case Special::BesselK1e: return cephes(b, Cephes::K1e, x);
    case Special::AiryAi: return cephes(b, Cephes::AiryAi, x);
    case Special::Ndtri: return cephes(b, Cephes::Ndtri, x);
    case Special::Erfcx: return cephes(b, Cephes::Erfcx, x);
    case Special::LogNdtr: return cephes(b, Cephes::LogNdtr, x);
    case Special::I0: return besselI(b, x, false, false);
    case Special::I0e: return besselI(b, x, false, true);
    case Special::I1: return besselI(b, x, true, false);
    case Special::I1e: return besselI(b, x, true, true);
    case Special::Sinc: {
      Value p = b.mul(k(b, x, M_PI), x);
      return b.select(b.compare(Cmp::EQ, x, k(b, x, 0)), k(b, x, 1), b.div(b.unary("sine", p), p));
    }
    case Special::Entr: {
      Value r = b.select(b.compare(Cmp::GT, x, k(b, x, 0)), b.neg(b.mul(x, b.unary("log", x))),
                         b.select(b.compare(Cmp::EQ, x, k(b, x, 0)), k(b, x, 0), k(b, x, -INFINITY)));
      return b.select(isNan(b, x), x, r);
    }
    case Special::SphericalJ0: {
      // ATen: a Taylor series below |x| = 0.5, sin(x)/x above, 0 at +-inf.
      Value x2 = b.mul(x, x);
      const double c[] = {-1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800, 1.0 / 6227020800};
      Value s = k(b, x, c[5]);
      for (int i = 4; i >= 0; --i) s = b.add(k(b, x, c[i]), b.mul(x2, s));
      Value series = b.add(k(b, x, 1), b.mul(x2, s));
      Value r = b.select(b.compare(Cmp::LT, b.unary("abs", x), k(b, x, 0.5)), series, b.div(b.unary("sine", x), x));
      return b.select(b.compare(Cmp::EQ, b.unary("abs", x), k(b, x, INFINITY)), k(b, x, 0), r);
    }
    case Special::Angle: {
      Value r = b.select(b.compare(Cmp::LT, x, k(b, x, 0)), k(b, x, M_PI), k(b, x, 0));
      return b.select(isNan(b, x), x, r);
    }
    case Special::LogAddExp:
    case Special::LogAddExp2: {
      const Value& y = a[1];
      Value m = b.max(x, y);
      Value d = b.neg(b.unary("abs", b.sub(x, y)));
      Value r = op == Special::LogAddExp
                    ? b.add(m, b.unary("log_plus_one", b.unary("exponential", d)))
                    : b.add(m, b.div(b.unary("log_plus_one", b.unary("exponential", b.mul(d, k(b, d, M_LN2)))),
                                     k(b, x, M_LN2)));
      Value sameInf = b.binary("and", b.compare(Cmp::EQ, x, y), b.compare(Cmp::EQ, b.unary("abs", x), k(b, x, INFINITY)));
      return b.select(sameInf, x, r);
    }
    case Special::FMax:
    case Special::FMin: {
      const Value& y = a[1];
      if (x.dtype() == DType::Pred)
        return op == Special::FMax ? b.binary("or", x, y) : b.binary("and", x, y);
      Value r = op == Special::FMax ? b.max(x, y) : b.min(x, y);
      if (!hlo::isFloat(x.dtype())) return r;
      return b.select(isNan(b, x), y, b.select(isNan(b, y), x, r));
    }
    case Special::Heaviside: {
      const Value& v = a[1];
      if (x.dtype() == DType::Pred) return b.select(x, b.full(hlo::Type{DType::Pred, x.shape()}, 1), v);
      Value pos = b.convert(b.compare(Cmp::GT, x, k(b, x, 0)), x.dtype());
      return b.select(b.compare(Cmp::EQ, x, k(b, x, 0)), v, pos);
    }
    case Special::NextAfter: return nextAfter(b, x, a[1]);
    case Special::Xlog1py: {
      const Value& y = a[1];
      Value r = b.select(b.compare(Cmp::EQ, x, k(b, x, 0)), k(b, x, 0), b.mul(x, b.unary("log_plus_one", y)));
      return b.select(isNan(b, y), y, r);
    }
    case Special::Zeta: return zetaCephes(b, x, a[1]);
    case Special::Gcd: return gcd(b, x, a[1]);
    case Special::Lcm: {
      Value g = gcd(b, x, a[1]);
      Value zero = b.compare(Cmp::EQ, g, k(b, g, 0));
      Value q = b.div(x, b.select(zero, k(b, g, 1), g));
      return b.select(zero, k(b, g, 0), b.unary("abs", b.mul(q, a[1])));
    }
    case Special::HardShrink: {
      Value l = a[1];
      Value inside = b.binary("and", b.compare(Cmp::GE, x, b.neg(l)), b.compare(Cmp::LE, x, l));
      return b.select(inside, k(b, x, 0), x);
    }
    case Special::SoftShrink: {
      Value l = a[1];
      return b.select(b.compare(Cmp::GT, x, l), b.sub(x, l),
                      b.select(b.compare(Cmp::LT, x, b.neg(l)), b.add(x, l), b.mul(x, k(b, x, 0))));
    }
    case Special::ShrinkBackward: {
      const Value &g = a[0], &s = a[1], &l = a[2];
      Value inside = b.binary("and", b.compare(Cmp::GE, s, b.neg(l)), b.compare(Cmp::LE, s, l));
      return b.select(inside, k(b, g, 0), g);
    }
    case Special::Logit: return logit(b, x);
    case Special::LogitEps: {
      Value lo = a[1], hi = b.sub(k(b, x, 1), a[1]);
      Value c = b.select(b.compare(Cmp::LT, x, lo), lo, b.select(b.compare(Cmp::GT, x, hi), hi, x));
      return logit(b, c);
    }
    case Special::LogitBackward:
    case Special::LogitBackwardEps: {
      const Value &g = a[0], &s = a[1];
      Value r = b.div(g, b.mul(s, b.sub(k(b, s, 1), s)));
      if (op == Special::LogitBackward) {
        Value out = b.binary("or", b.compare(Cmp::LT, s, k(b, s, 0)), b.compare(Cmp::GT, s, k(b, s, 1)));
        return b.select(out, k(b, s, NAN), r);
      }
      Value lo = a[2], hi = b.sub(k(b, s, 1), a[2]);
      Value out = b.binary("or", b.compare(Cmp::LT, s, lo), b.compare(Cmp::GT, s, hi));
      return b.select(out, k(b, s, 0), r);
    }
    case Special::Rsub: return b.sub(a[1], b.mul(a[2], x));
    case Special::ChebT: case Special::ChebU: case Special::ChebV: case Special::ChebW:
    case Special::ShiftT: case Special::ShiftU: case Special::ShiftV: case Special::ShiftW:
    case Special::HermiteH: case Special::HermiteHe: case Special::Laguerre: case Special::Legendre:
      return orthoPoly(b, static_cast<Poly>(static_cast<int>(op) - static_cast<int>(Special::ChebT)), x, a[1]);
  }
  throw std::logic_error("unknown special op");
}

Value roundDecimals(Builder& b, Value x, int64_t decimals) {
  bool neg = decimals < 0;
  Value t = k(b, x, std::pow(10.0, static_cast<double>(neg ? -decimals : decimals)));
  if (neg) return b.mul(b.unary("round_nearest_even", b.div(x, t)), t);
  return b.div(b.unary("round_nearest_even", b.mul(x, t)), t);
}

Value nanToNum(Builder& b, Value x, Value nan, Value posinf, Value neginf) {
  if (hlo::isComplex(x.dtype())) throw std::invalid_argument("nan_to_num of complex values is not supported on tpu");
  if (!hlo::isFloat(x.dtype())) return x;
  Value r = b.select(b.compare(Cmp::EQ, x, k(b, x, INFINITY)), broadcastTo(b, posinf, x.shape()), x);
  r = b.select(b.compare(Cmp::EQ, x, k(b, x, -INFINITY)), broadcastTo(b, neginf, x.shape()), r);
  return b.select(isNan(b, x), broadcastTo(b, nan, x.shape()), r);
}

std::pair<Value, Value> frexp(Builder& b, Value x) {
  // Works on float32 bits (float64 on its own); narrower floats convert exactly to float32.
  DType orig = x.dtype();
  bool f64 = orig == DType::F64;
  if (!f64) x = b.convert(x, DType::F32);
  DType it = f64 ? DType::S64 : DType::S32;
  int mbits = f64 ? 52 : 23;
  int64_t expMask = f64 ? 0x7ff : 0xff, bias = f64 ? 1022 : 126;
  hlo::Type t{it, x.shape()};
  Value special = b.binary("or", b.compare(Cmp::EQ, x, k(b, x, 0)), b.unary("not", b.isFinite(x)));
  // Subnormals: scale into the normal range first.
  Value sub = b.compare(Cmp::LT, b.unary("abs", x), k(b, x, f64 ? 2.2250738585072014e-308 : 1.17549435e-38));
  int scaleBits = f64 ? 54 : 24;
  Value xs = b.select(sub, b.mul(x, k(b, x, std::ldexp(1.0, scaleBits))), x);
  Value bits = b.bitcastConvert(xs, t);
  Value biased = b.binary("and", b.binary("shift_right_logical", bits, b.full(t, mbits)), b.full(t, expMask));
  Value e = b.sub(biased, b.full(t, bias));
  e = b.select(sub, b.sub(e, b.full(t, scaleBits)), e);
  int64_t keepBits = f64 ? ~(int64_t{0x7ff} << 52) : static_cast<int32_t>(~(uint32_t{0xff} << 23));
  Value keep = b.broadcast(b.constantInt(it, keepBits), x.shape());
  Value mBits = b.binary("or", b.binary("and", bits, keep), b.broadcast(b.constantInt(it, bias << mbits), x.shape()));
  Value m = b.bitcastConvert(mBits, x.type);
  m = b.select(special, x, m);
  e = b.select(special, b.full(t, 0), e);
  if (!f64) m = b.convert(m, orig);
  return {m, b.convert(e, DType::S32)};
}

}  // namespace tpu::lowering
