#include "Polynomial.h"

#include <cmath>
#include <vector>

namespace tpu::lowering {
namespace {

using hlo::Builder;
using hlo::Cmp;
using hlo::DType;
using hlo::Value;

bool isCheb(Poly k) { return k <= Poly::ShiftW; }
bool isShifted(Poly k) { return k >= Poly::ShiftT && k <= Poly::ShiftW; }

}  // namespace

Value orthoPoly(Builder& b, Poly kind, Value x, Value nF) {
  auto c = [&](double v) { return b.scalarLike(x, v); };
  hlo::Type it{DType::S64, x.shape()};
  Value n = b.convert(nF, DType::S64);  // truncation, as static_cast<int64_t>
  Value nf = b.convert(n, x.dtype());
  // Chebyshev families work on y (x, or 2x - 1 when shifted).
  Value y = isShifted(kind) ? b.sub(b.add(x, x), c(1)) : x;
  Value one = c(1);
  Value p1;
  switch (kind) {
    case Poly::ChebT: case Poly::ShiftT: p1 = y; break;
    case Poly::ChebU: case Poly::ShiftU: p1 = b.add(y, y); break;
    case Poly::ChebV: case Poly::ShiftV: p1 = b.sub(b.add(y, y), one); break;
    case Poly::ChebW: case Poly::ShiftW: p1 = b.add(b.add(y, y), one); break;
    case Poly::HermiteH: p1 = b.add(x, x); break;
    case Poly::HermiteHe: case Poly::Legendre: p1 = x; break;
    case Poly::Laguerre: p1 = b.sub(one, x); break;
  }
  bool nanStop = kind != Poly::HermiteH && kind != Poly::HermiteHe;
  // The largest degree decides the trip count.
  Value init0 = b.constantInt(DType::S64, 0);
  std::vector<int64_t> all;
  for (int64_t i = 0; i < n.rank(); ++i) all.push_back(i);
  Value nmax = b.reduce({&n, 1}, {&init0, 1}, all, [](Builder& r, std::span<const Value> a) {
    return std::vector<Value>{r.max(a[0], a[1])};
  })[0];
  Value loopInit[] = {x, y, n, one /*p*/, p1 /*q*/, b.constantInt(DType::S64, 2) /*j*/, nmax};
  auto out = b.whileLoop(
      loopInit,
      [&](Builder& r, std::span<const Value> v) { return std::vector<Value>{r.compare(Cmp::LE, v[5], v[6])}; },
      [&, kind](Builder& r, std::span<const Value> v) {
        const Value &xv = v[0], &yv = v[1], &nv = v[2], &p = v[3], &q = v[4], &j = v[5];
        auto k = [&](double v2) { return r.scalarLike(xv, v2); };
        Value jf = r.broadcast(r.convert(j, xv.dtype()), xv.shape());
        Value rr;
        switch (kind) {
          case Poly::HermiteH:  // k = 2(j - 1)
            rr = r.sub(r.mul(r.add(xv, xv), q), r.mul(r.mul(k(2), r.sub(jf, k(1))), p));
            break;
          case Poly::HermiteHe:  // k = j - 1
            rr = r.sub(r.mul(xv, q), r.mul(r.sub(jf, k(1)), p));
            break;
          case Poly::Laguerre: {  // k = j - 1: (((k + k) + (1 - x)) q - k p) / (k + 1)
            Value kk = r.sub(jf, k(1));
            rr = r.div(r.sub(r.mul(r.add(r.add(kk, kk), r.sub(k(1), xv)), q), r.mul(kk, p)), jf);
            break;
          }
          case Poly::Legendre: {  // k = j - 1: ((k + k + 1) x q - k p) / (k + 1)
            Value kk = r.sub(jf, k(1));
            rr = r.div(r.sub(r.mul(r.mul(r.add(r.add(kk, kk), k(1)), xv), q), r.mul(kk, p)), jf);
            break;
          }
          default: rr = r.sub(r.mul(r.add(yv, yv), q), p); break;
        }
        Value active = r.compare(Cmp::LE, r.broadcast(j, xv.shape()), nv);
        if (nanStop) active = r.binary("and", active, r.compare(Cmp::EQ, q, q));
        return std::vector<Value>{xv, yv, nv, r.select(active, q, p), r.select(active, rr, q),
                                  r.add(j, r.constantInt(DType::S64, 1)), v[6]};
      });
  Value res = out[4];
  auto isN = [&](int64_t v) { return b.compare(Cmp::EQ, n, b.full(it, static_cast<double>(v))); };
  Value nEven = b.compare(Cmp::EQ, b.binary("remainder", n, b.full(it, 2)), b.full(it, 0));
  res = b.select(isN(1), p1, res);
  res = b.select(isN(0), one, res);
  if (kind == Poly::HermiteH || kind == Poly::HermiteHe) {
    double limit = x.dtype() == DType::F64 ? 512 : 128;
    res = b.select(b.compare(Cmp::GT, n, b.full(it, limit)), c(NAN), res);
  }
  if (kind == Poly::Laguerre) res = b.select(b.compare(Cmp::EQ, b.unary("abs", x), c(0)), one, res);
  auto pm = [&](Value pos, Value v) { return b.select(pos, v, b.neg(v)); };
  Value twoN1 = b.add(b.add(nf, nf), one), n1 = b.add(nf, one);
  if (kind == Poly::Legendre) {
    Value edge = b.compare(Cmp::EQ, b.unary("abs", x), one);
    res = b.select(edge, pm(b.binary("or", b.compare(Cmp::GT, x, c(0)), nEven), one), res);
  }
  if (isCheb(kind)) {
    // Trigonometric forms for large n inside (-1, 1) (threshold as ATen), then the edges.
    Value acos = b.binary("atan2", b.unary("sqrt", b.mul(b.sub(one, y), b.add(one, y))), y);
    int64_t th = kind == Poly::ChebT || kind == Poly::ShiftT || kind == Poly::ShiftU || kind == Poly::ShiftV ? 6
                 : kind == Poly::ShiftW ? 4 : 8;
    Value inside = b.binary("and", b.compare(Cmp::GT, n, b.full(it, static_cast<double>(th))),
                            b.compare(Cmp::LT, b.unary("abs", y), one));
    Value trig;
    Value half = b.div(acos, c(2));
    Value edgeV = pm(nEven, twoN1);                       // V at y = -1
    Value edgeW = pm(nEven, one);                         // W at y = -1
    switch (kind) {
      case Poly::ChebT: case Poly::ShiftT: trig = b.unary("cosine", b.mul(nf, acos)); break;
      case Poly::ChebU: case Poly::ShiftU: {
        Value s = b.unary("sine", acos);
        trig = b.select(b.compare(Cmp::NE, s, c(0)), b.div(b.unary("sine", b.mul(n1, acos)), s),
                        b.div(b.mul(n1, b.unary("cosine", b.mul(n1, acos))), y));
        break;
      }
      case Poly::ChebV: case Poly::ShiftV:
        trig = b.select(b.compare(Cmp::NE, b.unary("sine", half), one),
                        b.div(b.unary("cosine", b.mul(b.add(nf, c(0.5)), acos)), b.unary("cosine", half)), edgeV);
        break;
      default: {
        Value alt = kind == Poly::ChebW ? b.select(b.compare(Cmp::GT, y, c(0)), twoN1, edgeW) : edgeW;
        trig = b.select(b.compare(Cmp::NE, b.unary("cosine", half), one),
                        b.div(b.unary("sine", b.mul(b.add(nf, c(0.5)), acos)), b.unary("sine", half)), alt);
        break;
      }
    }
    res = b.select(inside, trig, res);
    // The edges y = +1 / y = -1 (x == 1 / x == 0 when shifted).
    Value atPlus = isShifted(kind) ? b.compare(Cmp::EQ, x, one) : b.binary("and", b.compare(Cmp::EQ, b.unary("abs", x), one), b.compare(Cmp::GT, x, c(0)));
    Value atMinus = isShifted(kind) ? b.compare(Cmp::EQ, x, c(0)) : b.binary("and", b.compare(Cmp::EQ, b.unary("abs", x), one), b.compare(Cmp::LT, x, c(0)));
    Value plus, minus;
    switch (kind) {
      case Poly::ChebT: case Poly::ShiftT: plus = one; minus = pm(nEven, one); break;
      case Poly::ChebU: case Poly::ShiftU: plus = n1; minus = pm(nEven, n1); break;
      case Poly::ChebV: case Poly::ShiftV: plus = one; minus = edgeV; break;
      default: plus = twoN1; minus = edgeW; break;
    }
    res = b.select(atPlus, plus, b.select(atMinus, minus, res));
  }
  return b.select(b.compare(Cmp::LT, n, b.full(it, 0)), c(0), res);
}

}  // namespace tpu::lowering
