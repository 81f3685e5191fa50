#include "Linalg.h"
#include "csrc/lowering/Dims.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "Index.h"
#include "Reduce.h"

namespace tpu::lowering {
namespace {

using hlo::Cmp;
using hlo::DType;

// Broadcasts v [batch..., (extra)] (nb batch dims) into `shape` [batch..., ...], its extra dim (if any) at `at`.
Value bcastN(Builder& b, Value v, const hlo::Shape& shape, int64_t nb, int64_t at) {
  std::vector<int64_t> dims = upto(nb);
  if (v.rank() == nb + 1) dims.push_back(at);
  return b.broadcastInDim(v, shape, dims);
}


// The entry of x [..., m] (or of rows/cols) where mask is true (exactly one), as a sum of selected entries.
Value pick(Builder& b, Value x, Value mask, int64_t dim) {
  return sumOver(b, b.select(mask, x, b.scalarLike(x, 0)), dim);
}

// |x|, or |re| + |im| for complex x (BLAS's cabs1, what icamax / izamax maximise).
Value pivotMagnitude(Builder& b, Value x) {
  if (!hlo::isComplex(x.dtype())) return b.unary("abs", x);
  return b.add(b.unary("abs", b.realPart(x)), b.unary("abs", b.imagPart(x)));
}

// stablehlo.triangular_solve with op(A) = A, A^T ("TRANSPOSE") or A^H ("ADJOINT"; the same as A^T for real A).
Value triSolveOp(Builder& b, Value a, Value rhs, bool left, bool lower, const char* op, bool unitDiagonal) {
  std::string attrs = std::string("left_side = ") + (left ? "true" : "false") + ", lower = " + (lower ? "true" : "false") +
                      ", transpose_a = #stablehlo<transpose " + op + ">" +
                      ", unit_diagonal = " + (unitDiagonal ? "true" : "false");
  Value ops[2] = {a, rhs};
  return b.op("stablehlo.triangular_solve", ops, {rhs.type}, attrs)[0];
}

}  // namespace

LUResult luFactor(Builder& b, Value a) {
  const hlo::Shape& s = a.shape();
  int64_t R = a.rank(), m = s[R - 2], n = s[R - 1], k = std::min(m, n);
  hlo::Shape batch(s.begin(), s.end() - 2), rows = batch, pivShape = batch;
  rows.push_back(m);
  pivShape.push_back(k);
  Value perm0 = b.iota(hlo::Type{DType::S64, rows}, R - 2);
  Value piv0 = b.full(hlo::Type{DType::S32, pivShape}, 0);
  Value info0 = b.full(hlo::Type{DType::S32, batch}, 0);
  Value j0 = b.constantInt(DType::S64, 0);
  Value init[] = {a, perm0, piv0, info0, j0};
  auto out = b.whileLoop(
      init,
      [&](Builder& r, std::span<const Value> v) {
        return std::vector<Value>{r.compare(Cmp::LT, v[4], r.constantInt(DType::S64, k))};
      },
      [&](Builder& r, std::span<const Value> v) {
        Value A = v[0], perm = v[1], piv = v[2], info = v[3], j = v[4];
        hlo::Type it{DType::S64, s};
        Value rowI = r.iota(it, R - 2), colI = r.iota(it, R - 1);
        Value row1 = r.iota(hlo::Type{DType::S64, rows}, R - 2);
        Value jM = r.broadcast(j, s), jR = r.broadcast(j, rows);
        // Pivot: the largest |A[i, j]| among rows i >= j (the first of equal ones); for complex values
        // |re| + |im|, the magnitude LAPACK's i?amax compares, so the pivots are CPU's.
        Value colJ = pick(r, A, r.compare(Cmp::EQ, colI, jM), R - 1);
        Value mag = pivotMagnitude(r, colJ);
        Value cand = r.select(r.compare(Cmp::LT, row1, jR), r.scalarLike(mag, -1), mag);
        Value p = argReduce(r, true, cand, R - 2).second;  // S64 [batch]
        Value pM = bcastN(r, p, s, R - 2, R - 2), pR = bcastN(r, p, rows, R - 2, R - 2);
        Value isJ = r.compare(Cmp::EQ, rowI, jM), isP = r.compare(Cmp::EQ, rowI, pM);
        Value rowJ = pick(r, A, isJ, R - 2), rowP = pick(r, A, isP, R - 2);  // [batch, n]
        Value A1 = r.select(isJ, bcastN(r, rowP, s, R - 2, R - 1), r.select(isP, bcastN(r, rowJ, s, R - 2, R - 1), A));
        Value pj = pick(r, perm, r.compare(Cmp::EQ, row1, jR), R - 2), pp = pick(r, perm, r.compare(Cmp::EQ, row1, pR), R - 2);
        Value perm1 = r.select(r.compare(Cmp::EQ, row1, jR), bcastN(r, pp, rows, R - 2, R - 2),
                               r.select(r.compare(Cmp::EQ, row1, pR), bcastN(r, pj, rows, R - 2, R - 2), perm));
        // Eliminate below the pivot (a zero pivot leaves the column as it is, as getrf).
        hlo::Shape cols = batch;
        cols.push_back(n);
        Value col1 = r.iota(hlo::Type{DType::S64, cols}, R - 2);
        Value d = pick(r, rowP, r.compare(Cmp::EQ, col1, r.broadcast(j, cols)), R - 2);  // [batch]
        Value zeroPivot = r.compare(Cmp::EQ, d, r.scalarLike(d, 0));
        Value colNew = pick(r, A1, r.compare(Cmp::EQ, colI, jM), R - 1);  // [batch, m]
        Value below = r.binary("and", r.compare(Cmp::GT, row1, jR), r.unary("not", bcastN(r, zeroPivot, rows, R - 2, R - 2)));
        Value l = r.select(below, r.div(colNew, bcastN(r, d, rows, R - 2, R - 2)), r.scalarLike(colNew, 0));
        Value u = r.select(r.compare(Cmp::GT, col1, r.broadcast(j, cols)), rowP, r.scalarLike(rowP, 0));
        Value A2 = r.sub(A1, r.mul(bcastN(r, l, s, R - 2, R - 2), bcastN(r, u, s, R - 2, R - 1)));
        Value A3 = r.select(r.binary("and", r.compare(Cmp::EQ, colI, jM), r.binary("and", r.compare(Cmp::GT, rowI, jM),
                                                                                      bcastN(r, r.unary("not", zeroPivot), s, R - 2, R - 2))),
                            bcastN(r, l, s, R - 2, R - 2), A2);
        Value pivI = r.iota(hlo::Type{DType::S32, pivShape}, R - 2);
        Value j32 = r.convert(j, DType::S32);
        Value piv1 = r.select(r.compare(Cmp::EQ, pivI, r.broadcast(j32, pivShape)),
                              bcastN(r, r.add(r.convert(p, DType::S32), r.full(hlo::Type{DType::S32, batch}, 1)), pivShape, R - 2, R - 2), piv);
        Value info1 = r.select(r.binary("and", zeroPivot, r.compare(Cmp::EQ, info, r.scalarLike(info, 0))),
                               r.broadcast(r.add(j32, r.constantInt(DType::S32, 1)), batch), info);
        return std::vector<Value>{A3, perm1, piv1, info1, r.add(j, r.constantInt(DType::S64, 1))};
      });
  return {out[0], out[2], out[1], out[3]};
}

Value permFromPivots(Builder& b, Value pivots, int64_t m) {
  const hlo::Shape& ps = pivots.shape();
  int64_t R = pivots.rank() + 1, k = ps.back();
  hlo::Shape batch(ps.begin(), ps.end() - 1), rows = batch;
  rows.push_back(m);
  Value perm = b.iota(hlo::Type{DType::S64, rows}, R - 2);
  Value row1 = b.iota(hlo::Type{DType::S64, rows}, R - 2);
  Value piv = b.sub(b.convert(pivots, DType::S64), b.full(hlo::Type{DType::S64, ps}, 1));
  Value pivI = b.iota(hlo::Type{DType::S64, ps}, R - 2);
  for (int64_t j = 0; j < k; ++j) {
    Value p = pick(b, piv, b.compare(Cmp::EQ, pivI, b.full(hlo::Type{DType::S64, ps}, static_cast<double>(j))), R - 2);
    Value pR = bcastN(b, p, rows, R - 2, R - 2);
    Value jR = b.full(hlo::Type{DType::S64, rows}, static_cast<double>(j));
    Value pj = pick(b, perm, b.compare(Cmp::EQ, row1, jR), R - 2), pp = pick(b, perm, b.compare(Cmp::EQ, row1, pR), R - 2);
    perm = b.select(b.compare(Cmp::EQ, row1, jR), bcastN(b, pp, rows, R - 2, R - 2),
                    b.select(b.compare(Cmp::EQ, row1, pR), bcastN(b, pj, rows, R - 2, R - 2), perm));
  }
  return perm;
}

Value triangularSolve(Builder& b, Value a, Value rhs, bool left, bool lower, bool transposeA, bool unitDiagonal,
                      bool conjugate) {
  const char* op = !transposeA ? "NO_TRANSPOSE" : conjugate && hlo::isComplex(a.dtype()) ? "ADJOINT" : "TRANSPOSE";
  return triSolveOp(b, a, rhs, left, lower, op, unitDiagonal);
}

Value luSolve(Builder& b, Value lu, Value perm, Value rhs, bool adjoint) {
  int64_t R = rhs.rank();
  hlo::Shape rs = rhs.shape();
  if (!adjoint) {
    // P B: row i is B's row perm[i].
    Value idx = bcastN(b, perm, rs, R - 2, R - 2);
    Value pb = gatherDim(b, rhs, idx, R - 2);
    Value y = triSolveOp(b, lu, pb, true, true, "NO_TRANSPOSE", true);
    return triSolveOp(b, lu, y, true, false, "NO_TRANSPOSE", false);
  }
  // A^T = U^T L^T P: solve U^T z = B, L^T w = z, then x = P^T w (x[perm[i]] = w[i]). For complex A the
  // transposes are conjugate transposes (A^H = U^H L^H P: triangular_solve's ADJOINT), P being real.
  const char* adj = hlo::isComplex(lu.dtype()) ? "ADJOINT" : "TRANSPOSE";
  Value z = triSolveOp(b, lu, rhs, true, false, adj, false);
  Value w = triSolveOp(b, lu, z, true, true, adj, true);
  int64_t m = rs[R - 2];
  hlo::Shape ps(rs.begin(), rs.end() - 2);
  ps.push_back(m);
  ps.push_back(m);
  // Pm[i, c] = (perm[i] == c); x = Pm^T w.
  Value pm = b.convert(b.compare(Cmp::EQ, bcastN(b, perm, ps, R - 2, R - 2), b.iota(hlo::Type{DType::S64, ps}, R - 1)), w.dtype());
  std::vector<int64_t> bd = upto(R - 2);
  Value x = b.dotGeneral(pm, w, bd, bd, {R - 2}, {R - 2}, w.dtype());  // [batch, c, k]
  return x;
}

DetResult luDet(Builder& b, Value lu, Value pivots) {
  int64_t R = lu.rank(), n = lu.shape()[R - 1];
  hlo::Type it{DType::S64, lu.shape()};
  Value diagMask = b.compare(Cmp::EQ, b.iota(it, R - 2), b.iota(it, R - 1));
  Value diag = pick(b, lu, diagMask, R - 1);  // [batch, n]
  // Sign of the permutation: (-1)^(number of real swaps).
  Value pivI = b.iota(hlo::Type{DType::S32, pivots.shape()}, R - 2);
  // Counted in the real type (floor has no complex form); complex: sign = psign * prod(d / |d|) (stablehlo.sign
  // of a complex value is z / |z|, 0 at 0) and logabsdet = sum(log |d|) is real, as CPU returns them.
  DType real = hlo::isComplex(lu.dtype()) ? hlo::componentType(lu.dtype()) : lu.dtype();
  Value swapped = b.convert(b.compare(Cmp::NE, pivots, b.add(pivI, b.full(hlo::Type{DType::S32, pivots.shape()}, 1))),
                            real);
  Value nswaps = sumOver(b, swapped, R - 2);
  Value two = b.scalarLike(nswaps, 2);
  Value odd = b.compare(Cmp::NE, b.sub(nswaps, b.mul(two, b.unary("floor", b.div(nswaps, two)))), b.scalarLike(nswaps, 0));
  Value psign = b.convert(b.select(odd, b.scalarLike(nswaps, -1), b.scalarLike(nswaps, 1)), lu.dtype());
  Value one = b.constant(lu.dtype(), 1);
  Value prod = b.reduce({&diag, 1}, {&one, 1}, {R - 2}, [](Builder& rb, std::span<const Value> a) {
    return std::vector<Value>{rb.mul(a[0], a[1])};
  })[0];
  DetResult r;
  r.det = b.mul(psign, prod);
  Value sgn = b.unary("sign", diag);
  Value sprod = b.reduce({&sgn, 1}, {&one, 1}, {R - 2}, [](Builder& rb, std::span<const Value> a) {
    return std::vector<Value>{rb.mul(a[0], a[1])};
  })[0];
  r.sign = b.mul(psign, sprod);
  r.logabsdet = sumOver(b, b.unary("log", b.unary("abs", diag)), R - 2);
  (void)n;
  return r;
}

std::tuple<Value, Value, Value> luUnpack(Builder& b, Value lu, Value perm) {
  const hlo::Shape& s = lu.shape();
  int64_t R = lu.rank(), m = s[R - 2], n = s[R - 1], k = std::min(m, n);
  std::vector<int64_t> zeros(R, 0), ones(R, 1);
  hlo::Shape ls = s, us = s;
  ls[R - 1] = k;
  us[R - 2] = k;
  Value lpart = b.slice(lu, zeros, ls, ones), upart = b.slice(lu, zeros, us, ones);
  hlo::Type li{DType::S64, ls}, ui{DType::S64, us};
  Value lr = b.iota(li, R - 2), lc = b.iota(li, R - 1);
  Value L = b.select(b.compare(Cmp::GT, lr, lc), lpart,
                     b.select(b.compare(Cmp::EQ, lr, lc), b.scalarLike(lpart, 1), b.scalarLike(lpart, 0)));
  Value U = b.select(b.compare(Cmp::LE, b.iota(ui, R - 2), b.iota(ui, R - 1)), upart, b.scalarLike(upart, 0));
  hlo::Shape ps(s.begin(), s.end() - 2);
  ps.push_back(m);
  ps.push_back(m);
  // A = P L U with P[r, c] = (perm[c] == r).
  Value P = b.convert(b.compare(Cmp::EQ, bcastN(b, perm, ps, R - 2, R - 1), b.iota(hlo::Type{DType::S64, ps}, R - 2)), lu.dtype());
  return {P, L, U};
}

namespace {

Value conjugate(Builder& b, Value x) {
  return hlo::isComplex(x.dtype()) ? b.complex(b.realPart(x), b.unary("negate", b.imagPart(x))) : x;
}

// LAPACK's info for a failed factorization: the order of the first leading minor that is not positive definite.
// XLA's cholesky leaves only NaNs when one fails, so an unblocked right-looking factorization of the lower
// triangle finds it: a loop that runs no step unless some batch element failed (`failed`, Pred [batch]) and
// stops once every failed element has its minor. 0 where none is found.
Value firstFailingMinor(Builder& b, Value a, Value failed) {
  const hlo::Shape& s = a.shape();
  int64_t R = a.rank(), n = s[R - 1];
  hlo::Shape batch(s.begin(), s.end() - 2), rows = batch;
  rows.push_back(n);
  Value init[] = {a, b.full(hlo::Type{DType::S32, batch}, 0), b.constantInt(DType::S64, 0)};
  auto out = b.whileLoop(
      init,
      [&](Builder& r, std::span<const Value> v) {
        Value pending = r.convert(r.binary("and", failed, r.compare(Cmp::EQ, v[1], r.scalarLike(v[1], 0))), DType::S32);
        if (!batch.empty()) {
          Value zero = r.constantInt(DType::S32, 0);
          pending = r.reduce({&pending, 1}, {&zero, 1}, upto(R - 2), [](Builder& rb, std::span<const Value> x) {
            return std::vector<Value>{rb.max(x[0], x[1])};
          })[0];
        }
        return std::vector<Value>{r.binary("and", r.compare(Cmp::LT, v[2], r.constantInt(DType::S64, n)),
                                           r.compare(Cmp::GT, pending, r.constantInt(DType::S32, 0)))};
      },
      [&](Builder& r, std::span<const Value> v) {
        Value A = v[0], info = v[1], j = v[2];
        hlo::Type it{DType::S64, s};
        Value colJ = pick(r, A, r.compare(Cmp::EQ, r.iota(it, R - 1), r.broadcast(j, s)), R - 1);  // [batch, n]
        Value row1 = r.iota(hlo::Type{DType::S64, rows}, R - 2), jR = r.broadcast(j, rows);
        Value d = r.realPart(pick(r, colJ, r.compare(Cmp::EQ, row1, jR), R - 2));  // [batch]
        Value bad = r.unary("not", r.compare(Cmp::GT, d, r.scalarLike(d, 0)));
        Value j1 = r.broadcast(r.add(r.convert(j, DType::S32), r.constantInt(DType::S32, 1)), batch);
        Value info1 = r.select(r.binary("and", r.binary("and", failed, bad), r.compare(Cmp::EQ, info, r.scalarLike(info, 0))),
                               j1, info);
        // l = A[j+1:, j] / sqrt(d) (zero at rows <= j); the trailing matrix loses l l^H.
        Value sq = bcastN(r, r.convert(r.unary("sqrt", d), A.dtype()), rows, R - 2, R - 2);
        Value l = r.select(r.compare(Cmp::GT, row1, jR), r.div(colJ, sq), r.scalarLike(colJ, 0));
        Value A1 = r.sub(A, r.mul(bcastN(r, l, s, R - 2, R - 2), bcastN(r, conjugate(r, l), s, R - 2, R - 1)));
        return std::vector<Value>{A1, info1, r.add(j, r.constantInt(DType::S64, 1))};
      });
  return out[1];
}

}  // namespace

std::pair<Value, Value> cholesky(Builder& b, Value a, bool upper) {
  int64_t R = a.rank();
  Value l = b.op("stablehlo.cholesky", {&a, 1}, {a.type}, "lower = true")[0];
  hlo::Type it{DType::S64, a.shape()};
  Value r = b.iota(it, R - 2), c = b.iota(it, R - 1);
  l = b.select(b.compare(Cmp::GE, r, c), l, b.scalarLike(l, 0));
  // A complex (Hermitian) factor has a real diagonal: its real part decides.
  Value diag = b.realPart(pick(b, l, b.compare(Cmp::EQ, r, c), R - 1));  // [batch, n]
  // info: the first diagonal entry that is not positive (NaN included), 1-based; 0 when all are.
  Value bad = b.unary("not", b.compare(Cmp::GT, diag, b.scalarLike(diag, 0)));
  hlo::Type dt{DType::S32, diag.shape()};
  Value pos = b.add(b.iota(dt, R - 2), b.full(dt, 1));
  Value big = b.full(dt, 2147483647);
  Value first = b.select(bad, pos, big);
  Value init = b.constantInt(DType::S32, 2147483647);
  Value mn = b.reduce({&first, 1}, {&init, 1}, {R - 2}, [](Builder& rb, std::span<const Value> x) {
    return std::vector<Value>{rb.min(x[0], x[1])};
  })[0];
  Value info = b.select(b.compare(Cmp::EQ, mn, b.scalarLike(mn, 2147483647)), b.scalarLike(mn, 0), mn);
  // A failed element's diagonal is all NaN (info 1 above): the minor that failed, as LAPACK reports it.
  Value failed = b.compare(Cmp::NE, info, b.scalarLike(info, 0));
  Value minor = firstFailingMinor(b, a, failed);
  info = b.select(b.compare(Cmp::NE, minor, b.scalarLike(minor, 0)), minor, info);
  if (upper) {
    std::vector<int64_t> perm = upto(R);
    std::swap(perm[R - 1], perm[R - 2]);
    l = conjugate(b, b.transpose(l, perm));  // U = L^H
  }
  return {l, info};
}

}  // namespace tpu::lowering
