#include "Ldl.h"
#include "csrc/lowering/Dims.h"

#include <cmath>
#include <functional>
#include <vector>

namespace tpu::lowering {
namespace {

using hlo::Builder;
using hlo::Cmp;
using hlo::DType;
using hlo::Shape;
using hlo::Type;
using hlo::Value;

Value reduceWith(Builder& b, Value x, std::vector<int64_t> dims, Value init, const char* op) {
  return b.reduce({&x, 1}, {&init, 1}, dims, [op](Builder& rb, std::span<const Value> a) {
    return std::vector<Value>{rb.binary(op, a[0], a[1])};
  })[0];
}
Value sumOver(Builder& b, Value x, std::vector<int64_t> dims) {
  return reduceWith(b, x, std::move(dims), b.constant(x.dtype(), 0), "add");
}
// Of values >= 0 (absolute values): 0 is the identity.
Value maxOver(Builder& b, Value x, std::vector<int64_t> dims) {
  return reduceWith(b, x, std::move(dims), b.constant(x.dtype(), 0), "maximum");
}
Value minIndex(Builder& b, Value x, std::vector<int64_t> dims, int64_t none) {
  return reduceWith(b, x, std::move(dims), b.constantInt(DType::S64, none), "minimum");
}
Value both(Builder& b, Value x, Value y) { return b.binary("and", x, y); }
Value either(Builder& b, Value x, Value y) { return b.binary("or", x, y); }
Value no(Builder& b, Value x) { return b.unary("not", x); }

// A counted loop for (i = 0; i < n; ++i) over carried values.
std::vector<Value> forLoop(Builder& b, int64_t n, std::vector<Value> carried,
                           const std::function<std::vector<Value>(Builder&, Value, std::span<const Value>)>& body) {
  std::vector<Value> init{b.constantInt(DType::S64, 0)};
  init.insert(init.end(), carried.begin(), carried.end());
  auto out = b.whileLoop(
      init,
      [n](Builder& r, std::span<const Value> v) {
        return std::vector<Value>{r.compare(Cmp::LT, v[0], r.constantInt(DType::S64, n))};
      },
      [&](Builder& r, std::span<const Value> v) {
        std::vector<Value> next = body(r, v[0], v.subspan(1));
        std::vector<Value> res{r.add(v[0], r.constantInt(DType::S64, 1))};
        res.insert(res.end(), next.begin(), next.end());
        return res;
      });
  return std::vector<Value>(out.begin() + 1, out.end());
}

// Index helpers for matrices x [batch..., rows, cols] with per-batch-element indices ([batch...] S64).
struct Ix {
  Builder& b;
  int64_t nb;
  Value bc(Value perBatch, const Shape& s) const { return b.broadcastInDim(perBatch, s, upto(nb)); }
  // v [batch..., len] into s [batch..., r, c] along dim nb (rows) or nb + 1 (columns).
  Value bcVec(Value v, const Shape& s, int64_t at) const {
    std::vector<int64_t> d = upto(nb);
    d.push_back(at);
    return b.broadcastInDim(v, s, d);
  }
  Value rows(const Shape& s) const { return b.iota(Type{DType::S64, s}, nb); }
  Value cols(const Shape& s) const { return b.iota(Type{DType::S64, s}, nb + 1); }
  // Row i of x as [batch..., cols]; column j as [batch..., rows] (only that row / column is read).
  Value row(Value x, Value i) const {
    Value m = b.compare(Cmp::EQ, rows(x.shape()), bc(i, x.shape()));
    return sumOver(b, b.select(m, x, b.scalarLike(x, 0)), {nb});
  }
  Value col(Value x, Value j) const {
    Value m = b.compare(Cmp::EQ, cols(x.shape()), bc(j, x.shape()));
    return sumOver(b, b.select(m, x, b.scalarLike(x, 0)), {nb + 1});
  }
  Value entry(Value v, Value i) const {  // v [batch..., len] at i -> [batch...]
    Value m = b.compare(Cmp::EQ, b.iota(Type{DType::S64, v.shape()}, nb), bc(i, v.shape()));
    return sumOver(b, b.select(m, v, b.scalarLike(v, 0)), {nb});
  }
  // x with rows i and j exchanged (nothing where i == j).
  Value swapRows(Value x, Value i, Value j) const {
    Value ri = row(x, i), rj = row(x, j), r = rows(x.shape());
    Value atI = b.compare(Cmp::EQ, r, bc(i, x.shape())), atJ = b.compare(Cmp::EQ, r, bc(j, x.shape()));
    return b.select(atI, bcVec(rj, x.shape(), nb + 1), b.select(atJ, bcVec(ri, x.shape(), nb + 1), x));
  }
  Value swapCols(Value x, Value i, Value j) const {
    Value ci = col(x, i), cj = col(x, j), c = cols(x.shape());
    Value atI = b.compare(Cmp::EQ, c, bc(i, x.shape())), atJ = b.compare(Cmp::EQ, c, bc(j, x.shape()));
    return b.select(atI, bcVec(cj, x.shape(), nb), b.select(atJ, bcVec(ci, x.shape(), nb), x));
  }
};

Value transposeLast(Builder& b, Value x) {
  std::vector<int64_t> perm = upto(x.rank());
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return b.transpose(x, perm);
}

}  // namespace

// One column step of LAPACK's dsytf2 (lower) per loop iteration k. A batch element whose previous step
// took a 2x2 block (columns k-1, k) skips step k, so every element pivots on its own.
LdlResult ldlFactor(Builder& b, Value a) {
  const Shape& s = a.shape();
  int64_t nb = a.rank() - 2, n = s[nb];
  Shape batch(s.begin(), s.end() - 2), vs = batch;
  vs.push_back(n);
  const double alpha = (1.0 + std::sqrt(17.0)) / 8.0;
  Value piv0 = b.full(Type{DType::S32, vs}, 0), info0 = b.full(Type{DType::S32, batch}, 0);
  Value skip0 = b.broadcast(b.constantInt(DType::Pred, 0), batch);
  auto out = forLoop(b, n, {a, piv0, info0, skip0}, [&](Builder& r, Value k, std::span<const Value> v) {
    Ix ix{r, nb};
    Value A = v[0], piv = v[1], info = v[2], skip = v[3];
    Value rowI = ix.rows(s), colI = ix.cols(s), vI = r.iota(Type{DType::S64, vs}, nb);
    Value kB = r.broadcast(k, batch), kM = r.broadcast(k, s), kV = r.broadcast(k, vs);
    Value one64 = r.full(Type{DType::S64, batch}, 1);
    Value zeroM = r.scalarLike(A, 0);
    Value lowerM = r.compare(Cmp::GE, rowI, colI);

    // The pivot choice (Bunch-Kaufman): column k below the diagonal, then row/column imax.
    Value colk = ix.col(A, kB);
    Value absakk = r.unary("abs", ix.entry(colk, kB));
    Value absCol = r.unary("abs", colk);
    Value belowV = r.compare(Cmp::GT, vI, kV);
    Value colmax = maxOver(r, r.select(belowV, absCol, r.scalarLike(absCol, 0)), {nb});
    Value isMax = both(r, belowV, r.compare(Cmp::EQ, absCol, r.broadcastInDim(colmax, vs, upto(nb))));
    Value imax = minIndex(r, r.select(isMax, vI, r.full(Type{DType::S64, vs}, n)), {nb}, n);
    Value imaxM = ix.bc(imax, s);
    Value inRow = both(r, r.compare(Cmp::EQ, rowI, imaxM),
                       both(r, r.compare(Cmp::GE, colI, kM), r.compare(Cmp::LT, colI, imaxM)));
    Value inCol = both(r, r.compare(Cmp::EQ, colI, imaxM), r.compare(Cmp::GT, rowI, imaxM));
    Value absA = r.unary("abs", A);
    Value rowmax = maxOver(r, r.select(either(r, inRow, inCol), absA, zeroM), {nb, nb + 1});
    Value atImax = both(r, r.compare(Cmp::EQ, rowI, imaxM), r.compare(Cmp::EQ, colI, imaxM));
    Value absaimax = r.unary("abs", sumOver(r, r.select(atImax, A, zeroM), {nb, nb + 1}));
    Value al = r.scalarLike(absakk, alpha);
    Value zeroCol = either(r, r.compare(Cmp::EQ, r.max(absakk, colmax), r.scalarLike(colmax, 0)),
                           r.compare(Cmp::NE, absakk, absakk));
    Value c1 = r.compare(Cmp::GE, absakk, r.mul(al, colmax));
    Value c2 = r.compare(Cmp::GE, absakk, r.mul(r.mul(al, colmax), r.div(colmax, rowmax)));
    Value c3 = r.compare(Cmp::GE, absaimax, r.mul(al, rowmax));
    Value keep = either(r, zeroCol, either(r, c1, c2));
    Value two = both(r, no(r, keep), no(r, c3));
    Value kp = r.select(keep, kB, imax);
    Value kk = r.select(two, r.add(kB, one64), kB);
    Value active = no(r, skip);

    // Interchange rows and columns kk and kp of the trailing matrix A(k:, k:) (its lower triangle).
    Value Tl = r.select(lowerM, A, zeroM);
    Value sym = r.add(Tl, transposeLast(r, r.select(r.compare(Cmp::GT, rowI, colI), A, zeroM)));
    Value swapped = ix.swapCols(ix.swapRows(sym, kk, kp), kk, kp);
    Value doSwap = both(r, both(r, active, no(r, zeroCol)), r.compare(Cmp::NE, kp, kk));
    Value trailing = both(r, lowerM, r.compare(Cmp::GE, colI, kM));
    Value A1 = r.select(both(r, ix.bc(doSwap, s), trailing), swapped, A);

    // 1x1 block: A(k+1:, k+1:) -= x x^T / a_kk, x = A(k+1:, k), then x /= a_kk (dsyr, dscal).
    Value ck = ix.col(A1, kB), ck1 = ix.col(A1, r.add(kB, one64));
    Value akk = ix.entry(ck, kB);
    Value d11 = r.div(r.scalarLike(akk, 1), akk);
    Value temp = r.mul(r.broadcastInDim(r.neg(d11), vs, upto(nb)), ck);
    Value U1 = r.add(A1, r.mul(ix.bcVec(ck, s, nb), ix.bcVec(temp, s, nb + 1)));
    Value below1 = r.compare(Cmp::GT, rowI, kM);
    Value Aone = r.select(both(r, lowerM, r.compare(Cmp::GT, colI, kM)), U1, A1);
    Value scaled = r.mul(ck, r.broadcastInDim(d11, vs, upto(nb)));
    Aone = r.select(both(r, r.compare(Cmp::EQ, colI, kM), below1), ix.bcVec(scaled, s, nb), Aone);

    // 2x2 block (columns k, k+1), as dsytf2: with d21 = a(k+1,k), the multipliers wk, wkp1 of each row
    // below, then A(j:, j) -= A(:, k) wk_j + A(:, k+1) wkp1_j.
    Value d21 = ix.entry(ck, r.add(kB, one64));
    Value d11b = r.div(ix.entry(ck1, r.add(kB, one64)), d21);
    Value d22 = r.div(akk, d21);
    Value t = r.div(r.scalarLike(d21, 1), r.sub(r.mul(d11b, d22), r.scalarLike(d21, 1)));
    Value d21b = r.div(t, d21);
    auto perRow = [&](Value x) { return r.broadcastInDim(x, vs, upto(nb)); };
    Value wk = r.mul(perRow(d21b), r.sub(r.mul(perRow(d11b), ck), ck1));
    Value wkp1 = r.mul(perRow(d21b), r.sub(r.mul(perRow(d22), ck1), ck));
    Value U2 = r.sub(r.sub(A1, r.mul(ix.bcVec(ck, s, nb), ix.bcVec(wk, s, nb + 1))),
                     r.mul(ix.bcVec(ck1, s, nb), ix.bcVec(wkp1, s, nb + 1)));
    Value k1M = r.add(kM, r.full(Type{DType::S64, s}, 1));
    Value below2 = r.compare(Cmp::GT, rowI, k1M);
    Value Atwo = r.select(both(r, lowerM, r.compare(Cmp::GT, colI, k1M)), U2, A1);
    Atwo = r.select(both(r, r.compare(Cmp::EQ, colI, kM), below2), ix.bcVec(wk, s, nb), Atwo);
    Atwo = r.select(both(r, r.compare(Cmp::EQ, colI, k1M), below2), ix.bcVec(wkp1, s, nb), Atwo);

    Value doUpd = both(r, active, no(r, zeroCol));
    Value A2 = r.select(ix.bc(both(r, doUpd, two), s), Atwo, r.select(ix.bc(both(r, doUpd, no(r, two)), s), Aone, A1));

    // ipiv (1-based): kp + 1 for a 1x1 block, -(kp + 1) at k and k + 1 for a 2x2 block.
    Value p1 = r.convert(r.add(kp, one64), DType::S32);
    Value pNeg = r.neg(p1);
    Value atK = both(r, r.compare(Cmp::EQ, vI, kV), r.broadcastInDim(active, vs, upto(nb)));
    Value piv1 = r.select(atK, r.broadcastInDim(r.select(two, pNeg, p1), vs, upto(nb)), piv);
    Value atK1 = both(r, r.compare(Cmp::EQ, vI, r.add(kV, r.full(Type{DType::S64, vs}, 1))),
                      r.broadcastInDim(both(r, active, two), vs, upto(nb)));
    piv1 = r.select(atK1, r.broadcastInDim(pNeg, vs, upto(nb)), piv1);
    Value firstZero = both(r, both(r, active, zeroCol), r.compare(Cmp::EQ, info, r.scalarLike(info, 0)));
    Value info1 = r.select(firstZero, r.convert(r.add(kB, one64), DType::S32), info);
    return std::vector<Value>{A2, piv1, info1, both(r, active, two)};
  });
  Ix ix{b, nb};
  Value ld = b.select(b.compare(Cmp::GE, ix.rows(s), ix.cols(s)), out[0], b.scalarLike(out[0], 0));
  return {ld, out[1], out[2]};
}

// LAPACK's dsytrs (lower): L D Y = P B forwards, then L^T X = Y backwards, undoing the interchanges.
Value ldlSolve(Builder& b, Value ld, Value pivots, Value rhs) {
  int64_t nb = ld.rank() - 2, n = ld.shape()[nb];
  const Shape& bs = rhs.shape();
  Shape batch(bs.begin(), bs.end() - 2), rs = batch;
  rs.push_back(bs.back());
  Value skip0 = b.broadcast(b.constantInt(DType::Pred, 0), batch);
  auto fwd = forLoop(b, n, {rhs, skip0}, [&](Builder& r, Value k, std::span<const Value> v) {
    Ix ix{r, nb};
    Value B = v[0], skip = v[1];
    Value kB = r.broadcast(k, batch), one64 = r.full(Type{DType::S64, batch}, 1), k1 = r.add(kB, one64);
    Value p = r.convert(ix.entry(pivots, kB), DType::S64);
    Value is1 = r.compare(Cmp::GT, p, r.scalarLike(p, 0));
    Value is2 = both(r, no(r, is1), no(r, skip));
    Value rowI = ix.rows(bs);
    auto perRow = [&](Value x) { return r.broadcastInDim(x, rs, upto(nb)); };
    Value lk = ix.col(ld, kB), lk1 = ix.col(ld, k1);
    Value dkk = ix.entry(lk, kB);
    // 1x1: swap rows k, p-1; B(k+1:) -= l_k b_k; b_k /= d_kk.
    Value B1 = ix.swapRows(B, kB, r.sub(p, one64));
    Value bk = ix.row(B1, kB);
    Value up1 = r.sub(B1, r.mul(ix.bcVec(lk, bs, nb), ix.bcVec(bk, bs, nb + 1)));
    B1 = r.select(r.compare(Cmp::GT, rowI, ix.bc(kB, bs)), up1, B1);
    B1 = r.select(r.compare(Cmp::EQ, rowI, ix.bc(kB, bs)), ix.bcVec(r.div(bk, perRow(dkk)), bs, nb + 1), B1);
    // 2x2: swap rows k+1, -p-1; B(k+2:) -= l_k b_k + l_{k+1} b_{k+1}; then the 2x2 system of D's block.
    Value B2 = ix.swapRows(B, k1, r.sub(r.neg(p), one64));
    Value b0 = ix.row(B2, kB), b1 = ix.row(B2, k1);
    Value up2 = r.sub(r.sub(B2, r.mul(ix.bcVec(lk, bs, nb), ix.bcVec(b0, bs, nb + 1))),
                      r.mul(ix.bcVec(lk1, bs, nb), ix.bcVec(b1, bs, nb + 1)));
    B2 = r.select(r.compare(Cmp::GT, rowI, ix.bc(k1, bs)), up2, B2);
    Value akm1k = ix.entry(lk, k1);
    Value akm1 = r.div(dkk, akm1k), ak = r.div(ix.entry(lk1, k1), akm1k);
    Value denom = r.sub(r.mul(akm1, ak), r.scalarLike(ak, 1));
    Value bkm1 = r.div(b0, perRow(akm1k)), bkk = r.div(b1, perRow(akm1k));
    Value x0 = r.div(r.sub(r.mul(perRow(ak), bkm1), bkk), perRow(denom));
    Value x1 = r.div(r.sub(r.mul(perRow(akm1), bkk), bkm1), perRow(denom));
    B2 = r.select(r.compare(Cmp::EQ, rowI, ix.bc(kB, bs)), ix.bcVec(x0, bs, nb + 1), B2);
    B2 = r.select(r.compare(Cmp::EQ, rowI, ix.bc(k1, bs)), ix.bcVec(x1, bs, nb + 1), B2);
    Value Bn = r.select(ix.bc(is1, bs), B1, r.select(ix.bc(is2, bs), B2, B));
    return std::vector<Value>{Bn, is2};
  });
  auto bwd = forLoop(b, n, {fwd[0], skip0}, [&](Builder& r, Value i, std::span<const Value> v) {
    Ix ix{r, nb};
    Value B = v[0], skip = v[1];
    Value k = r.sub(r.constantInt(DType::S64, n - 1), i);
    Value kB = r.broadcast(k, batch), one64 = r.full(Type{DType::S64, batch}, 1), km1 = r.sub(kB, one64);
    Value p = r.convert(ix.entry(pivots, kB), DType::S64);
    Value is1 = r.compare(Cmp::GT, p, r.scalarLike(p, 0));
    Value is2 = both(r, no(r, is1), no(r, skip));
    Value rowI = ix.rows(bs);
    Value below = r.compare(Cmp::GT, rowI, ix.bc(kB, bs));
    Value zero = r.scalarLike(B, 0);
    Value sk = sumOver(r, r.select(below, r.mul(ix.bcVec(ix.col(ld, kB), bs, nb), B), zero), {nb});
    Value skm1 = sumOver(r, r.select(below, r.mul(ix.bcVec(ix.col(ld, km1), bs, nb), B), zero), {nb});
    Value atK = r.compare(Cmp::EQ, rowI, ix.bc(kB, bs)), atKm1 = r.compare(Cmp::EQ, rowI, ix.bc(km1, bs));
    Value Bu = r.select(atK, r.sub(B, ix.bcVec(sk, bs, nb + 1)), B);
    Value B1 = ix.swapRows(Bu, kB, r.sub(p, one64));
    Value B2 = r.select(atKm1, r.sub(Bu, ix.bcVec(skm1, bs, nb + 1)), Bu);
    B2 = ix.swapRows(B2, kB, r.sub(r.neg(p), one64));
    Value Bn = r.select(ix.bc(is1, bs), B1, r.select(ix.bc(is2, bs), B2, B));
    return std::vector<Value>{Bn, is2};
  });
  return bwd[0];
}

}  // namespace tpu::lowering
