#include "Jagged.h"

#include <stdexcept>

#include "Index.h"
#include "Reduce.h"

namespace tpu::lowering {
namespace {

using hlo::Cmp;

Value s64(Builder& b, int64_t v) { return b.constantInt(DType::S64, v); }

Value splat(Builder& b, Value scalar, const hlo::Shape& shape) { return b.broadcast(scalar, shape); }

Value predAnd(Builder& b, Value x, Value y) { return b.binary("and", x, y); }
Value predOr(Builder& b, Value x, Value y) { return b.binary("or", x, y); }

// x (S64) clamped into [0, size - 1] (size >= 1): a safe gather start once validity is tracked apart.
Value clampIndex(Builder& b, Value x, int64_t size) {
  return b.clamp(splat(b, s64(b, 0), x.shape()), x, splat(b, s64(b, size - 1), x.shape()));
}

// table[idx] for a 1-D table and an S64 index of any shape (idx already inside the table).
Value take(Builder& b, Value table, Value idx) {
  int64_t k = idx.type.numel();
  Value flat = indexSelect(b, table, b.reshape(idx, {k}), 0);
  return b.reshape(flat, idx.shape());
}

// Sum along dim 1 of a rank-2 x as S64 (0 for an empty dim).
Value rowSums(Builder& b, Value x) {
  Value x64 = b.convert(x, DType::S64);
  if (x.shape()[1] == 0) return b.full({DType::S64, {x.shape()[0]}}, 0);
  return reduce(b, ReduceOp::Sum, x64, {1});
}

Value shiftRight(Builder& b, Value x, bool keepSize) {
  int64_t r = x.rank(), n = x.shape().back();
  std::vector<int64_t> zeros(r, 0), ones(r, 1), lo(r, 0);
  lo[r - 1] = 1;
  Value zero = b.constant(x.dtype(), 0);
  if (!keepSize) return b.pad(x, zero, lo, zeros, zeros);
  if (n == 0) return x;
  std::vector<int64_t> limit = x.shape();
  limit[r - 1] = n - 1;
  return b.pad(b.slice(x, zeros, limit, ones), zero, lo, zeros, zeros);
}

void checkRank12(Value x) {
  if (x.rank() != 1 && x.rank() != 2) throw std::invalid_argument("cumsum lowering: expected a 1-D or 2-D tensor");
}

}  // namespace

Value inclusiveCumsum(Builder& b, Value x) {
  checkRank12(x);
  return scan(b, ReduceOp::Sum, x, x.rank() - 1);
}

Value exclusiveCumsum(Builder& b, Value x) {
  checkRank12(x);
  return scan(b, ReduceOp::Sum, shiftRight(b, x, true), x.rank() - 1);
}

Value completeCumsum(Builder& b, Value x) {
  checkRank12(x);
  return scan(b, ReduceOp::Sum, shiftRight(b, x, false), x.rank() - 1);
}

Value segmentOf(Builder& b, Value starts, int64_t n) {
  hlo::Type t{DType::S64, {n}};
  if (n == 0 || starts.shape()[0] == 0) return b.full(t, 0);
  int64_t s = starts.shape()[0];
  // Starts at or past n (trailing empty segments) are out of the histogram's bounds: the scatter drops them.
  Value hist = indexScatter(b, b.full(t, 0), b.convert(starts, DType::S64), b.full({DType::S64, {s}}, 1), 0,
                            Reduce::Add);
  Value seg = b.sub(scan(b, ReduceOp::Sum, hist, 0), b.full(t, 1));
  return b.max(seg, b.full(t, 0));
}

PermutedSparse permuteSparseData(Builder& b, Value permute, Value lengths, Value values, const Value* weights,
                                 int64_t outLen) {
  int64_t t = lengths.shape()[0], p = permute.shape()[0], n = values.shape()[0];
  if (t == 0 || p == 0 || n == 0 || outLen == 0)
    throw std::invalid_argument("permuteSparseData: empty inputs are handled by the caller");
  PermutedSparse r;
  Value perm = b.convert(permute, DType::S64);
  r.outOfRange = anyOutOfRange(b, perm, 0, t);
  perm = clampIndex(b, perm, t);
  r.lengths = indexSelect(b, lengths, perm, 0);
  Value featLen = rowSums(b, lengths);               // [T]
  Value inStart = exclusiveCumsum(b, featLen);       // [T]
  Value outFeat = take(b, featLen, perm);            // [P]
  Value outStart = exclusiveCumsum(b, outFeat);      // [P]
  Value seg = segmentOf(b, outStart, outLen);        // [outLen] in [0, P)
  Value pos = b.sub(b.iota({DType::S64, {outLen}}, 0), take(b, outStart, seg));
  Value valid = b.compare(Cmp::LT, pos, take(b, outFeat, seg));
  Value src = b.add(take(b, inStart, take(b, perm, seg)), pos);
  // A valid row past the end of values: the lengths promise more values than there are.
  Value beyond = predAnd(b, valid, b.compare(Cmp::GE, src, splat(b, s64(b, n), src.shape())));
  r.outOfRange = predOr(b, r.outOfRange, anyTrue(b, beyond));
  src = b.select(valid, clampIndex(b, src, n), splat(b, s64(b, 0), src.shape()));
  auto pick = [&](Value v) {
    Value rows = indexSelect(b, v, src, 0);
    Value keep = b.broadcastInDim(valid, rows.shape(), {0});
    return b.select(keep, rows, b.scalarLike(rows, 0));
  };
  r.values = pick(values);
  if (weights != nullptr) r.weights = pick(*weights);
  return r;
}

std::pair<Value, Value> invertPermute(Builder& b, Value permute) {
  int64_t n = permute.shape()[0];
  hlo::Type t{DType::S64, {n}};
  if (n == 0) return {permute, b.constantInt(DType::Pred, 0)};
  Value perm = b.convert(permute, DType::S64);
  // Out-of-range entries are dropped by the scatter and reported.
  Value inv = indexScatter(b, b.full(t, 0), perm, b.iota(t, 0), 0, Reduce::Replace);
  return {b.convert(inv, permute.dtype()), anyOutOfRange(b, perm, 0, n)};
}

Value offsetsRange(Builder& b, Value offsets, int64_t rangeSize) {
  hlo::Type t{DType::S64, {rangeSize}};
  if (offsets.shape()[0] == 0) return b.convert(b.iota(t, 0), offsets.dtype());
  Value starts = b.convert(offsets, DType::S64);
  Value seg = segmentOf(b, starts, rangeSize);
  return b.convert(b.sub(b.iota(t, 0), take(b, starts, seg)), offsets.dtype());
}

std::pair<Value, Value> segmentSumCsr(Builder& b, int64_t batchSize, Value csrSeg, Value values) {
  int64_t s = csrSeg.shape()[0] - 1, n = values.shape()[0];
  if (s < 1 || n == 0) throw std::invalid_argument("segmentSumCsr: empty inputs are handled by the caller");
  hlo::Type ts{DType::S64, {s}}, tn{DType::S64, {n}};
  Value bounds = b.mul(b.convert(csrSeg, DType::S64), b.full({DType::S64, {s + 1}}, static_cast<double>(batchSize)));
  Value starts = b.slice(bounds, {0}, {s}, {1}), ends = b.slice(bounds, {1}, {s + 1}, {1});
  Value seg = segmentOf(b, starts, n);
  Value pos = b.iota(tn, 0);
  // A position belongs to its segment when it lies before the segment's end (after the last end, or before the
  // first start, it belongs to none); such positions are sent past the last sum, where the scatter drops them.
  Value inside = predAnd(b, b.compare(Cmp::LT, pos, take(b, ends, seg)),
                         b.compare(Cmp::GE, pos, take(b, starts, seg)));
  Value target = b.select(inside, seg, b.full(tn, static_cast<double>(s)));
  Value sums = indexScatter(b, b.full({values.dtype(), {s}}, 0), target, values, 0, Reduce::Add);
  Value past = b.compare(Cmp::GT, b.slice(bounds, {s}, {s + 1}, {1}), b.reshape(s64(b, n), {1}));
  return {sums, anyTrue(b, past)};
}

JaggedPositions jaggedPositions(Builder& b, std::span<const Value> offsets, const std::vector<int64_t>& maxLengths,
                                int64_t numRows) {
  if (offsets.empty() || offsets.size() != maxLengths.size())
    throw std::invalid_argument("jaggedPositions: one max length per offsets tensor");
  hlo::Shape g{offsets[0].shape()[0] - 1};
  g.insert(g.end(), maxLengths.begin(), maxLengths.end());
  hlo::Type tg{DType::S64, g};
  Value cur = b.iota(tg, 0);
  Value falseScalar = b.constantInt(DType::Pred, 0);
  Value valid = splat(b, b.constantInt(DType::Pred, 1), g);
  Value bad = falseScalar;
  for (size_t d = 0; d < offsets.size(); ++d) {
    Value off = b.convert(offsets[d], DType::S64);
    int64_t m = off.shape()[0];
    if (m < 2) {  // no segment at this level: every position that reaches it is out of range
      bad = predOr(b, bad, anyTrue(b, valid));
      valid = splat(b, falseScalar, g);
      cur = b.full(tg, 0);
      continue;
    }
    Value past = predAnd(b, valid, b.compare(Cmp::GE, b.add(cur, b.full(tg, 1)), b.full(tg, static_cast<double>(m))));
    bad = predOr(b, bad, anyTrue(b, past));
    Value c = clampIndex(b, cur, m - 1);
    Value begin = take(b, off, c), end = take(b, off, b.add(c, b.full(tg, 1)));
    Value i = b.iota(tg, static_cast<int64_t>(d) + 1);
    valid = predAnd(b, valid, b.compare(Cmp::LT, i, b.sub(end, begin)));
    cur = b.add(begin, i);
  }
  Value outside = b.binary("or", b.compare(Cmp::LT, cur, b.full(tg, 0)),
                           b.compare(Cmp::GE, cur, b.full(tg, static_cast<double>(numRows))));
  bad = predOr(b, bad, anyTrue(b, predAnd(b, valid, outside)));
  valid = predAnd(b, valid, b.unary("not", outside));
  Value index = numRows > 0 ? b.select(valid, clampIndex(b, cur, numRows), b.full(tg, 0)) : b.full(tg, 0);
  return {index, valid, bad};
}

std::pair<Value, Value> jaggedToPaddedDense(Builder& b, Value values, std::span<const Value> offsets,
                                            const std::vector<int64_t>& maxLengths, Value padding) {
  if (values.rank() != 2) throw std::invalid_argument("jaggedToPaddedDense: values must be [N, D]");
  int64_t n = values.shape()[0], d = values.shape()[1];
  JaggedPositions p = jaggedPositions(b, offsets, maxLengths, n);
  hlo::Shape out = p.index.shape();
  int64_t k = p.index.type.numel();
  out.push_back(d);
  Value rows = b.reshape(indexSelect(b, values, b.reshape(p.index, {k}), 0), out);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < p.index.rank(); ++i) dims.push_back(i);
  Value keep = b.broadcastInDim(p.valid, out, dims);
  return {b.select(keep, rows, splat(b, b.convert(padding, values.dtype()), out)), p.outOfRange};
}

std::pair<Value, Value> jaggedToPaddedDenseBackward(Builder& b, Value grad, std::span<const Value> offsets,
                                                    int64_t totalL) {
  int64_t k = static_cast<int64_t>(offsets.size());
  if (grad.rank() != k + 2) throw std::invalid_argument("jaggedToPaddedDenseBackward: grad must be [B, L..., D]");
  std::vector<int64_t> maxLengths(grad.shape().begin() + 1, grad.shape().end() - 1);
  JaggedPositions p = jaggedPositions(b, offsets, maxLengths, totalL);
  int64_t m = p.index.type.numel(), d = grad.shape().back();
  // Positions holding no value scatter to row totalL, past the end: the scatter drops them. Every value has
  // one padded position at most, so the rows are written, not summed.
  Value rowOf = b.select(p.valid, p.index, b.full({DType::S64, p.index.shape()}, static_cast<double>(totalL)));
  Value updates = b.reshape(grad, {m, d});
  Value zeros = b.full({grad.dtype(), {totalL, d}}, 0);
  return {indexScatter(b, zeros, b.reshape(rowOf, {m}), updates, 0, Reduce::Replace), p.outOfRange};
}

std::pair<Value, Value> permutePooledEmbs(Builder& b, Value pooled, Value offsetDims, Value permute) {
  int64_t n = permute.shape()[0], w = pooled.shape()[1];
  if (n == 0 || w == 0) throw std::invalid_argument("permutePooledEmbs: empty inputs are handled by the caller");
  Value off = b.convert(offsetDims, DType::S64);
  hlo::Type tn{DType::S64, {n}};
  Value starts, ends;
  Value zero = b.reshape(s64(b, 0), {1}), width = b.reshape(s64(b, w), {1});
  if (n > 1) {
    Value mid = b.slice(off, {1}, {n}, {1});  // the split points offsetDims[1..n-1]
    Value sParts[] = {zero, mid}, eParts[] = {mid, width};
    starts = b.concatenate(sParts, 0);
    ends = b.concatenate(eParts, 0);
  } else {
    starts = zero;
    ends = width;
  }
  starts = b.clamp(b.full(tn, 0), starts, b.full(tn, static_cast<double>(w)));
  ends = b.clamp(b.full(tn, 0), ends, b.full(tn, static_cast<double>(w)));
  Value pieceWidth = b.max(b.sub(ends, starts), b.full(tn, 0));
  Value perm = b.convert(permute, DType::S64);
  Value failed = anyOutOfRange(b, perm, 0, n);
  Value count = indexScatter(b, b.full(tn, 0), perm, b.full(tn, 1), 0, Reduce::Add);
  failed = predOr(b, failed, anyTrue(b, b.compare(Cmp::NE, count, b.full(tn, 1))));
  perm = clampIndex(b, perm, n);
  Value outWidth = take(b, pieceWidth, perm);
  Value total = reduce(b, ReduceOp::Sum, outWidth, {0});
  failed = predOr(b, failed, b.compare(Cmp::NE, total, s64(b, w)));  // overlapping or uncovered pieces
  Value outStart = exclusiveCumsum(b, outWidth);
  Value seg = segmentOf(b, outStart, w);
  hlo::Type tw{DType::S64, {w}};
  Value src = b.add(take(b, starts, take(b, perm, seg)), b.sub(b.iota(tw, 0), take(b, outStart, seg)));
  return {indexSelect(b, pooled, clampIndex(b, src, w), 1), failed};
}

std::vector<Value> permuteMultiEmbedding(Builder& b, std::span<const Value> inputs, Value permutes,
                                         const std::vector<int64_t>& outLengths, bool reverse) {
  int64_t p = permutes.shape()[0], batch = inputs[0].shape()[0];
  // Widths of the forward's inputs (the "from" side) and outputs (the side every row writes once).
  std::vector<int64_t> given, made(outLengths);
  for (const Value& v : inputs) given.push_back(v.shape()[1]);
  const std::vector<int64_t>& fwdIn = reverse ? made : given;
  const std::vector<int64_t>& fwdOut = reverse ? given : made;
  auto bases = [](const std::vector<int64_t>& w) {
    std::vector<int64_t> base{0};
    for (int64_t x : w) base.push_back(base.back() + x);
    return base;
  };
  std::vector<int64_t> inBase = bases(fwdIn), outBase = bases(fwdOut);
  int64_t wIn = inBase.back(), wOut = outBase.back();
  std::vector<Value> results;
  Value bad = b.constantInt(DType::Pred, 0);
  if (p == 0 || wOut == 0 || wIn == 0) {
    for (int64_t w : made) results.push_back(b.full({inputs[0].dtype(), {batch, w}}, 0));
    results.push_back(bad);
    return results;
  }
  hlo::Type tp{DType::S64, {p}};
  Value perm = b.convert(permutes, DType::S64);
  auto col = [&](int64_t c) { return b.reshape(b.slice(perm, {0, c}, {p, c + 1}, {1, 1}), {p}); };
  Value inT = col(0), outT = col(1), inOff = col(2), outOff = col(3), len = col(4);
  auto baseOf = [&](const std::vector<int64_t>& base, Value t, int64_t n) {
    bad = predOr(b, bad, anyOutOfRange(b, t, 0, n));
    std::vector<Value> parts;
    for (int64_t i = 0; i < n; ++i) parts.push_back(b.reshape(s64(b, base[i]), {1}));
    Value table = b.concatenate(parts, 0);
    return take(b, table, clampIndex(b, t, n));
  };
  Value inStart = b.add(baseOf(inBase, inT, static_cast<int64_t>(fwdIn.size())), inOff);
  Value outStart = b.add(baseOf(outBase, outT, static_cast<int64_t>(fwdOut.size())), outOff);
  // Rows must stay inside their tensors.
  Value inEnd = b.add(inStart, len), outEnd = b.add(outStart, len);
  Value inLimit = baseOf(inBase, b.add(inT, b.full(tp, 1)), static_cast<int64_t>(inBase.size()));
  Value outLimit = baseOf(outBase, b.add(outT, b.full(tp, 1)), static_cast<int64_t>(outBase.size()));
  Value outside = b.binary("or", b.compare(Cmp::GT, inEnd, inLimit), b.compare(Cmp::GT, outEnd, outLimit));
  outside = b.binary("or", outside, b.compare(Cmp::LT, b.min(inOff, outOff), b.full(tp, 0)));
  bad = predOr(b, bad, anyTrue(b, outside));
  // Every forward-output column u: the row that writes it (a [wOut, P] mask) and the input column it reads.
  hlo::Shape up{wOut, p};
  Value u = b.iota({DType::S64, up}, 0);
  Value rs = b.broadcastInDim(outStart, up, {1}), re = b.broadcastInDim(outEnd, up, {1});
  Value hit = predAnd(b, b.compare(Cmp::GE, u, rs), b.compare(Cmp::LT, u, re));
  Value hits = reduce(b, ReduceOp::Sum, b.convert(hit, DType::S64), {1});  // [wOut]
  bad = predOr(b, bad, anyTrue(b, b.compare(Cmp::GT, hits, b.full({DType::S64, {wOut}}, 1))));
  Value shift = b.select(hit, b.broadcastInDim(b.sub(inStart, outStart), up, {1}), b.full({DType::S64, up}, 0));
  Value uCol = b.iota({DType::S64, {wOut}}, 0);
  Value src = b.add(uCol, reduce(b, ReduceOp::Sum, shift, {1}));
  Value covered = b.compare(Cmp::EQ, hits, b.full({DType::S64, {wOut}}, 1));
  std::vector<Value> ins(inputs.begin(), inputs.end());
  Value all = ins.size() == 1 ? ins[0] : b.concatenate(ins, 1);  // [B, sum of given widths]
  Value out;
  if (!reverse) {
    Value rows = indexSelect(b, all, clampIndex(b, src, wIn), 1);  // [B, wOut]
    out = b.select(b.broadcastInDim(covered, rows.shape(), {1}), rows, b.scalarLike(rows, 0));
  } else {
    // The gradient of every forward-output column goes to the input column it was copied from; copies of one
    // input column add up. Columns no row wrote are sent past the end, where the scatter drops them.
    Value target = b.select(covered, src, b.full({DType::S64, {wOut}}, static_cast<double>(wIn)));
    out = indexScatter(b, b.full({all.dtype(), {batch, wIn}}, 0), target, all, 1, Reduce::Add);
  }
  int64_t at = 0;
  for (int64_t w : made) {
    results.push_back(b.slice(out, {0, at}, {batch, at + w}, {1, 1}));
    at += w;
  }
  results.push_back(bad);
  return results;
}

}  // namespace tpu::lowering
