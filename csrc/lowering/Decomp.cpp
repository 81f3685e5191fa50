#include "Decomp.h"
#include "csrc/lowering/Dims.h"
#include "csrc/lowering/Reduce.h"

#include <vector>


namespace tpu::lowering {
namespace {

using hlo::Builder;
using hlo::Cmp;
using hlo::DType;
using hlo::Shape;
using hlo::Type;
using hlo::Value;

Value anyOver(Builder& b, Value x) {
  Value init = b.constantInt(DType::Pred, 0);
  return b.reduce({&x, 1}, {&init, 1}, upto(x.rank()), [](Builder& rb, std::span<const Value> a) {
    return std::vector<Value>{rb.binary("or", a[0], a[1])};
  })[0];
}

// x [batch..., k] broadcast into `shape` [batch..., ...] with its last dim at `at`; [batch...] with none.
Value bcast(Builder& b, Value x, const Shape& shape, int64_t nb, int64_t at = -1) {
  std::vector<int64_t> dims = upto(nb);
  if (x.rank() == nb + 1) dims.push_back(at);
  return b.broadcastInDim(x, shape, dims);
}
Value where(Builder& b, Value pred, Value x, Value y) { return b.select(pred, x, y); }
Value zerosLike(Builder& b, Value x) { return b.scalarLike(x, 0); }

// Matrix helpers for [batch..., r, c] values.
struct Mat {
  Builder& b;
  Value x;
  int64_t nb() const { return x.rank() - 2; }
  int64_t rows() const { return x.shape()[x.rank() - 2]; }
  int64_t cols() const { return x.shape()[x.rank() - 1]; }
  Shape vecShape(int64_t len) const {
    Shape s(x.shape().begin(), x.shape().end() - 2);
    s.push_back(len);
    return s;
  }
  Value rowIota() const { return b.iota(Type{DType::S64, x.shape()}, nb()); }
  Value colIota() const { return b.iota(Type{DType::S64, x.shape()}, nb() + 1); }
  // Column j (dynamic S64 scalar) as [batch..., rows].
  Value col(Value j) const {
    Value m = b.compare(Cmp::EQ, colIota(), b.broadcast(j, x.shape()));
    return sumOver(b, b.select(m, x, zerosLike(b, x)), nb() + 1);
  }
  Value row(Value i) const {
    Value m = b.compare(Cmp::EQ, rowIota(), b.broadcast(i, x.shape()));
    return sumOver(b, b.select(m, x, zerosLike(b, x)), nb());
  }
  // x with column j replaced by v [batch..., rows].
  Value withCol(Value j, Value v) const {
    Value m = b.compare(Cmp::EQ, colIota(), b.broadcast(j, x.shape()));
    return b.select(m, bcast(b, v, x.shape(), nb(), nb()), x);
  }
  Value withRow(Value i, Value v) const {
    Value m = b.compare(Cmp::EQ, rowIota(), b.broadcast(i, x.shape()));
    return b.select(m, bcast(b, v, x.shape(), nb(), nb() + 1), x);
  }
};

Value entry(Builder& b, Value vec, Value i) {  // vec [batch..., k] at dynamic i -> [batch...]
  int64_t nb = vec.rank() - 1;
  Value m = b.compare(Cmp::EQ, b.iota(Type{DType::S64, vec.shape()}, nb), b.broadcast(i, vec.shape()));
  return sumOver(b, b.select(m, vec, zerosLike(b, vec)), nb);
}

Value eye(Builder& b, DType t, const Shape& batch, int64_t n) {
  Shape s = batch;
  s.push_back(n);
  s.push_back(n);
  int64_t nb = static_cast<int64_t>(batch.size());
  Value eq = b.compare(Cmp::EQ, b.iota(Type{DType::S64, s}, nb), b.iota(Type{DType::S64, s}, nb + 1));
  return b.select(eq, b.full(Type{t, s}, 1), b.full(Type{t, s}, 0));
}

Value transposeLast(Builder& b, Value x) {
  std::vector<int64_t> perm = upto(x.rank());
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return b.transpose(x, perm);
}

Value matmul(Builder& b, Value x, Value y) {
  int64_t nb = x.rank() - 2;
  return b.dotGeneral(x, y, upto(nb), upto(nb), {nb + 1}, {nb}, x.dtype());
}

Value sign1(Builder& b, Value x) {  // sign with sign(0) = 1
  return where(b, b.compare(Cmp::LT, x, zerosLike(b, x)), b.scalarLike(x, -1), b.scalarLike(x, 1));
}

double epsOf(DType t) { return t == DType::F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07; }

Value s64(Builder& b, int64_t v) { return b.constantInt(DType::S64, v); }

// A counted loop for (i = start; i < end; ++i) over extra carried values; `start` may be dynamic.
std::vector<Value> forLoop(Builder& b, Value start, Value end, std::vector<Value> carried,
                           const std::function<std::vector<Value>(Builder&, Value, std::span<const Value>)>& body) {
  std::vector<Value> init{start, end};
  init.insert(init.end(), carried.begin(), carried.end());
  auto out = b.whileLoop(
      init,
      [](Builder& r, std::span<const Value> v) { return std::vector<Value>{r.compare(Cmp::LT, v[0], v[1])}; },
      [&](Builder& r, std::span<const Value> v) {
        std::vector<Value> next = body(r, v[0], v.subspan(2));
        std::vector<Value> res{r.add(v[0], r.constantInt(DType::S64, 1)), v[1]};
        res.insert(res.end(), next.begin(), next.end());
        return res;
      });
  return std::vector<Value>(out.begin() + 2, out.end());
}

// Rotates columns p and q of x by (c, s) [batch...]: x_p' = c x_p - s x_q, x_q' = s x_p + c x_q.
Value rotateCols(Builder& b, Value x, Value p, Value q, Value c, Value s) {
  Mat m{b, x};
  Value xp = m.col(p), xq = m.col(q);
  Shape vs = m.vecShape(m.rows());
  Value cc = bcast(b, c, vs, m.nb()), ss = bcast(b, s, vs, m.nb());
  Value np = b.sub(b.mul(cc, xp), b.mul(ss, xq)), nq = b.add(b.mul(ss, xp), b.mul(cc, xq));
  Value y = m.withCol(p, np);
  return Mat{b, y}.withCol(q, nq);
}
Value rotateRows(Builder& b, Value x, Value p, Value q, Value c, Value s) {
  Mat m{b, x};
  Value xp = m.row(p), xq = m.row(q);
  Shape vs = m.vecShape(m.cols());
  Value cc = bcast(b, c, vs, m.nb()), ss = bcast(b, s, vs, m.nb());
  Value np = b.sub(b.mul(cc, xp), b.mul(ss, xq)), nq = b.add(b.mul(ss, xp), b.mul(cc, xq));
  Value y = m.withRow(p, np);
  return Mat{b, y}.withRow(q, nq);
}

// (c, s) of the Jacobi rotation for t = sign(z) / (|z| + sqrt(1 + z^2)), z = num / (2 den); identity where
// `skip`.
std::pair<Value, Value> jacobiCs(Builder& b, Value num, Value den, Value skip) {
  Value one = b.scalarLike(num, 1);
  Value safeDen = where(b, skip, one, den);
  Value z = b.div(num, b.mul(b.scalarLike(num, 2), safeDen));
  Value t = b.div(sign1(b, z), b.add(b.unary("abs", z), b.unary("sqrt", b.add(one, b.mul(z, z)))));
  t = where(b, skip, zerosLike(b, t), t);
  Value c = b.unary("rsqrt", b.add(one, b.mul(t, t)));
  return {c, b.mul(t, c)};
}

// Sorts `vals` [batch..., k] (ascending or descending) and permutes the columns of each matrix alike.
std::pair<Value, std::vector<Value>> sortWithColumns(Builder& b, Value vals, std::vector<Value> mats, bool ascending) {
  int64_t nb = vals.rank() - 1, k = vals.shape().back();
  Value idx = b.iota(Type{DType::S64, vals.shape()}, nb);
  Value ins[] = {vals, idx};
  auto sorted = b.sort(ins, nb, true, [ascending](Builder& r, std::span<const Value> a) {
    return std::vector<Value>{r.compare(ascending ? Cmp::LT : Cmp::GT, a[0], a[1])};
  });
  // P[i, j] = (perm[j] == i): M P takes column perm[j] into column j.
  Shape ps(vals.shape().begin(), vals.shape().end() - 1);
  ps.push_back(k);
  ps.push_back(k);
  Value permB = bcast(b, sorted[1], ps, nb, nb + 1);
  Value P = b.select(b.compare(Cmp::EQ, permB, b.iota(Type{DType::S64, ps}, nb)), b.full(Type{vals.dtype(), ps}, 1),
                     b.full(Type{vals.dtype(), ps}, 0));
  std::vector<Value> out;
  for (Value m : mats) out.push_back(matmul(b, m, P));
  return {sorted[0], out};
}

}  // namespace

std::pair<Value, Value> householderQr(Builder& b, Value a) {
  const Shape& s = a.shape();
  int64_t nb = a.rank() - 2, m = s[nb], n = s[nb + 1], k = std::min(m, n);
  Shape batch(s.begin(), s.end() - 2);
  Value q0 = eye(b, a.dtype(), batch, m);
  auto out = forLoop(b, s64(b, 0), s64(b, k), {a, q0}, [&](Builder& r, Value j, std::span<const Value> v) {
    Value R = v[0], Q = v[1];
    Mat mr{r, R};
    Value col = mr.col(j);  // [batch, m]
    Shape vs = mr.vecShape(m);
    Value ri = r.iota(Type{DType::S64, vs}, nb), jb = r.broadcast(j, vs);
    Value below = r.compare(Cmp::GT, ri, jb), at = r.compare(Cmp::EQ, ri, jb);
    Value zero = zerosLike(r, col);
    Value xj = sumOver(r, where(r, at, col, zero), nb);
    Value sigma2 = sumOver(r, where(r, below, r.mul(col, col), zero), nb);
    Value norm = r.unary("sqrt", r.add(r.mul(xj, xj), sigma2));
    Value beta = r.neg(r.mul(sign1(r, xj), norm));
    Value vvec = r.add(where(r, below, col, zero), where(r, at, bcast(r, r.sub(xj, beta), vs, nb), zero));
    Value vv = sumOver(r, r.mul(vvec, vvec), nb);
    Value active = r.compare(Cmp::GT, sigma2, zerosLike(r, sigma2));
    Value scale = r.div(r.scalarLike(vv, 2), where(r, active, vv, r.scalarLike(vv, 1)));
    // R -= scale v (v^T R); Q -= scale (Q v) v^T.
    Value vR = sumOver(r, r.mul(bcast(r, vvec, R.shape(), nb, nb), R), nb);  // [batch, n]
    Value sv = r.mul(bcast(r, scale, vs, nb), vvec);
    Value R1 = r.sub(R, r.mul(bcast(r, sv, R.shape(), nb, nb), bcast(r, vR, R.shape(), nb, nb + 1)));
    Value Qv = sumOver(r, r.mul(Q, bcast(r, vvec, Q.shape(), nb, nb + 1)), nb + 1);  // [batch, m]
    Value Q1 = r.sub(Q, r.mul(bcast(r, Qv, Q.shape(), nb, nb), bcast(r, sv, Q.shape(), nb, nb + 1)));
    // Column j of R is exactly (.., beta, 0, ..) after the reflection.
    Value newCol = r.add(where(r, at, bcast(r, beta, vs, nb), zero), where(r, r.compare(Cmp::LT, ri, jb),
                                                                           Mat{r, R1}.col(j), zero));
    R1 = Mat{r, R1}.withCol(j, newCol);
    Value actR = bcast(r, active, R.shape(), nb), actQ = bcast(r, active, Q.shape(), nb);
    return std::vector<Value>{r.select(actR, R1, R), r.select(actQ, Q1, Q)};
  });
  return {out[1], out[0]};
}

std::pair<Value, Value> householderQrCompact(Builder& b, Value a) {
  const Shape& s = a.shape();
  int64_t nb = a.rank() - 2, m = s[nb], n = s[nb + 1], k = std::min(m, n);
  Shape ts(s.begin(), s.end() - 2);
  ts.push_back(k);
  Value tau0 = b.full(Type{a.dtype(), ts}, 0);
  auto out = forLoop(b, s64(b, 0), s64(b, k), {a, tau0}, [&](Builder& r, Value j, std::span<const Value> v) {
    Value R = v[0], tau = v[1];
    Mat mr{r, R};
    Value col = mr.col(j);
    Shape vs = mr.vecShape(m);
    Value ri = r.iota(Type{DType::S64, vs}, nb), jb = r.broadcast(j, vs);
    Value below = r.compare(Cmp::GT, ri, jb), at = r.compare(Cmp::EQ, ri, jb);
    Value zero = zerosLike(r, col);
    Value xj = sumOver(r, where(r, at, col, zero), nb);
    Value sigma2 = sumOver(r, where(r, below, r.mul(col, col), zero), nb);
    Value beta = r.neg(r.mul(sign1(r, xj), r.unary("sqrt", r.add(r.mul(xj, xj), sigma2))));
    Value active = r.compare(Cmp::GT, sigma2, zerosLike(r, sigma2));
    Value one = r.scalarLike(xj, 1);
    // dlarfg: v = x / (x_j - beta) below j (v_j = 1), tau = (beta - x_j) / beta.
    Value denom = where(r, active, r.sub(xj, beta), one);
    Value vvec = r.add(where(r, below, r.div(col, bcast(r, denom, vs, nb)), zero), where(r, at, r.scalarLike(col, 1), zero));
    Value t = where(r, active, r.div(r.sub(beta, xj), where(r, active, beta, one)), zerosLike(r, xj));
    // R -= tau v (v^T R) on columns >= j (the columns before hold earlier reflectors), then column j holds
    // beta on the diagonal and v below it.
    Value vR = sumOver(r, r.mul(bcast(r, vvec, R.shape(), nb, nb), R), nb);
    Shape cs = mr.vecShape(n);
    vR = where(r, r.compare(Cmp::GE, r.iota(Type{DType::S64, cs}, nb), r.broadcast(j, cs)), vR, zerosLike(r, vR));
    Value tv = r.mul(bcast(r, t, vs, nb), vvec);
    Value R1 = r.sub(R, r.mul(bcast(r, tv, R.shape(), nb, nb), bcast(r, vR, R.shape(), nb, nb + 1)));
    Value keep = r.compare(Cmp::LT, ri, jb);
    Value newCol = r.add(r.add(where(r, keep, Mat{r, R1}.col(j), zero), where(r, at, bcast(r, where(r, active, beta, xj), vs, nb), zero)),
                         where(r, below, vvec, zero));
    R1 = Mat{r, R1}.withCol(j, newCol);
    Value tIdx = r.iota(Type{DType::S64, tau.shape()}, nb);
    Value tau1 = r.select(r.compare(Cmp::EQ, tIdx, r.broadcast(j, tau.shape())), bcast(r, t, tau.shape(), nb), tau);
    return std::vector<Value>{R1, tau1};
  });
  return {out[0], out[1]};
}

Value householderProduct(Builder& b, Value a, Value tau) {
  const Shape& s = a.shape();
  int64_t nb = a.rank() - 2, m = s[nb], n = s[nb + 1], k = tau.shape().back();
  Shape batch(s.begin(), s.end() - 2);
  Value I = eye(b, a.dtype(), batch, m);
  std::vector<int64_t> start(a.rank(), 0), limit(I.shape().begin(), I.shape().end()), st(a.rank(), 1);
  limit[nb + 1] = n;
  Value q0 = b.slice(I, start, limit, st);  // [batch, m, n]
  // Q = H_0 (H_1 (... (H_{k-1} I))): apply the reflectors last to first.
  auto out = forLoop(b, s64(b, 0), s64(b, k), {q0}, [&](Builder& r, Value i, std::span<const Value> v) {
    Value Q = v[0];
    Value j = r.sub(s64(r, k - 1), i);
    Value col = Mat{r, a}.col(j);
    Shape vs = Mat{r, a}.vecShape(m);
    Value ri = r.iota(Type{DType::S64, vs}, nb), jb = r.broadcast(j, vs);
    Value zero = zerosLike(r, col);
    Value vvec = r.add(where(r, r.compare(Cmp::GT, ri, jb), col, zero),
                       where(r, r.compare(Cmp::EQ, ri, jb), r.scalarLike(col, 1), zero));
    Value t = entry(r, tau, j);
    Value vQ = sumOver(r, r.mul(bcast(r, vvec, Q.shape(), nb, nb), Q), nb);  // [batch, n]
    Value tv = r.mul(bcast(r, t, vs, nb), vvec);
    return std::vector<Value>{r.sub(Q, r.mul(bcast(r, tv, Q.shape(), nb, nb), bcast(r, vQ, Q.shape(), nb, nb + 1)))};
  });
  return out[0];
}

std::pair<Value, Value> eighJacobi(Builder& b, Value a, bool lower) {
  const Shape& s = a.shape();
  int64_t nb = a.rank() - 2, n = s[nb];
  Shape batch(s.begin(), s.end() - 2);
  Mat ma{b, a};
  // The symmetric matrix from one triangle (the other is not read, as LAPACK).
  Value tri = lower ? b.compare(Cmp::GE, ma.rowIota(), ma.colIota()) : b.compare(Cmp::LE, ma.rowIota(), ma.colIota());
  Value strict = b.compare(Cmp::NE, ma.rowIota(), ma.colIota());
  Value t = where(b, tri, a, zerosLike(b, a));
  Value A = b.add(t, where(b, strict, transposeLast(b, t), zerosLike(b, t)));
  Value V = eye(b, a.dtype(), batch, n);
  double eps = epsOf(a.dtype());
  // Sweeps until one rotates nothing: a pair is skipped when |a_pq| <= eps sqrt(|a_pp a_qq|) (the usual
  // threshold for relative accuracy; an absolute off-diagonal bound is never met under rounding).
  Value init[] = {A, V, s64(b, 0), b.constantInt(DType::Pred, 1)};
  auto out = b.whileLoop(
      init,
      [&](Builder& r, std::span<const Value> v) {
        return std::vector<Value>{r.binary("and", r.compare(Cmp::LT, v[2], s64(r, 40)), v[3])};
      },
      [&](Builder& r, std::span<const Value> v) {
        Value notDone = r.constantInt(DType::Pred, 0);
        auto res = forLoop(r, s64(r, 0), s64(r, n - 1), {v[0], v[1], notDone},
                           [&](Builder& r1, Value p, std::span<const Value> w) {
          return forLoop(r1, r1.add(p, s64(r1, 1)), s64(r1, n), {w[0], w[1], w[2]},
                         [&](Builder& r2, Value q, std::span<const Value> x) {
                           Value X = x[0], Vm = x[1];
                           Mat mx{r2, X};
                           Value rp = mx.row(p), rq = mx.row(q);
                           Value app = entry(r2, rp, p), apq = entry(r2, rp, q), aqq = entry(r2, rq, q);
                           Value bound = r2.mul(r2.scalarLike(app, eps),
                                                r2.unary("sqrt", r2.unary("abs", r2.mul(app, aqq))));
                           Value skip = r2.binary("or", r2.compare(Cmp::EQ, apq, zerosLike(r2, apq)),
                                                  r2.compare(Cmp::LE, r2.unary("abs", apq), bound));
                           auto [c, sn] = jacobiCs(r2, r2.sub(aqq, app), apq, skip);
                           Value X1 = rotateCols(r2, rotateRows(r2, X, p, q, c, sn), p, q, c, sn);
                           Value any = anyOver(r2, r2.unary("not", skip));
                           return std::vector<Value>{X1, rotateCols(r2, Vm, p, q, c, sn), r2.binary("or", x[2], any)};
                         });
        });
        return std::vector<Value>{res[0], res[1], r.add(v[2], s64(r, 1)), res[2]};
      });
  Mat mo{b, out[0]};
  Value diagMask = b.compare(Cmp::EQ, mo.rowIota(), mo.colIota());
  Value evals = sumOver(b, where(b, diagMask, out[0], zerosLike(b, out[0])), nb + 1);
  auto [sorted, mats] = sortWithColumns(b, evals, {out[1]}, true);
  return {sorted, mats[0]};
}

SvdResult svdJacobi(Builder& b, Value a, bool full) {
  int64_t nb = a.rank() - 2, m0 = a.shape()[nb], n0 = a.shape()[nb + 1];
  bool wide = m0 < n0;
  Value A = wide ? transposeLast(b, a) : a;  // tall: m >= n
  int64_t m = std::max(m0, n0), n = std::min(m0, n0);
  Shape batch(a.shape().begin(), a.shape().end() - 2);
  Value V = eye(b, a.dtype(), batch, n);
  double eps = epsOf(a.dtype());
  Value init[] = {A, V, s64(b, 0), b.constantInt(DType::Pred, 1)};
  auto out = b.whileLoop(
      init,
      [&](Builder& r, std::span<const Value> v) {
        return std::vector<Value>{r.binary("and", r.compare(Cmp::LT, v[2], s64(r, 40)), v[3])};
      },
      [&](Builder& r, std::span<const Value> v) {
        // Carried: U, V, and whether any pair was still far from orthogonal in this sweep.
        Value notDone = r.constantInt(DType::Pred, 0);
        auto res = forLoop(r, s64(r, 0), s64(r, n - 1), {v[0], v[1], notDone},
                           [&](Builder& r1, Value p, std::span<const Value> w) {
          return forLoop(r1, r1.add(p, s64(r1, 1)), s64(r1, n), {w[0], w[1], w[2]},
                         [&](Builder& r2, Value q, std::span<const Value> x) {
                           Value U = x[0], Vm = x[1];
                           Mat mu{r2, U};
                           Value up = mu.col(p), uq = mu.col(q);
                           Value alpha = sumOver(r2, r2.mul(up, up), nb), beta = sumOver(r2, r2.mul(uq, uq), nb);
                           Value gamma = sumOver(r2, r2.mul(up, uq), nb);
                           Value bound = r2.mul(r2.scalarLike(alpha, eps), r2.unary("sqrt", r2.mul(alpha, beta)));
                           Value skip = r2.compare(Cmp::LE, r2.unary("abs", gamma), bound);
                           auto [c, sn] = jacobiCs(r2, r2.sub(beta, alpha), gamma, skip);
                           Value any = anyOver(r2, r2.unary("not", skip));
                           return std::vector<Value>{rotateCols(r2, U, p, q, c, sn), rotateCols(r2, Vm, p, q, c, sn),
                                                     r2.binary("or", x[2], any)};
                         });
        });
        return std::vector<Value>{res[0], res[1], r.add(v[2], s64(r, 1)), res[2]};
      });
  Value norms = b.unary("sqrt", sumOver(b, b.mul(out[0], out[0]), nb));  // [batch, n]
  auto [sv, mats] = sortWithColumns(b, norms, {out[0], out[1]}, false);
  Value U = mats[0], Vm = mats[1];
  // Orthonormal U: normalised columns (zero for zero singular values), completed and re-orthogonalised by
  // a Householder QR; the reflections' signs are undone so U S V^T is A.
  Shape us = U.shape();
  Value zeroS = b.compare(Cmp::EQ, sv, zerosLike(b, sv));
  Value safe = where(b, zeroS, b.scalarLike(sv, 1), sv);
  Value Un = where(b, bcast(b, zeroS, us, nb, nb + 1), zerosLike(b, U), b.div(U, bcast(b, safe, us, nb, nb + 1)));
  auto [Q, R] = householderQr(b, Un);
  Mat mr{b, R};
  Value diagR = sumOver(b, where(b, b.compare(Cmp::EQ, mr.rowIota(), mr.colIota()), R, zerosLike(b, R)), nb);  // [batch, n]
  Value signs = sign1(b, diagR);
  if (m > n) {
    Shape pad(batch);
    pad.push_back(m - n);
    Value ones = b.full(Type{a.dtype(), pad}, 1);
    Value parts[] = {signs, ones};
    signs = b.concatenate(parts, nb);
  }
  Value Uf = b.mul(Q, bcast(b, signs, Q.shape(), nb, nb + 1));
  if (!full && m > n) {
    std::vector<int64_t> start(Uf.rank(), 0), limit(Uf.shape().begin(), Uf.shape().end()), st(Uf.rank(), 1);
    limit[nb + 1] = n;
    Uf = b.slice(Uf, start, limit, st);
  }
  if (wide) return {Vm, sv, Uf};
  return {Uf, sv, Vm};
}

}  // namespace tpu::lowering
