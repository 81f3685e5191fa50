#include "Sort.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "Elementwise.h"
#include "Index.h"
#include "Reduce.h"

namespace tpu::lowering {
namespace {

using hlo::Cmp;

Value isNan(Builder& b, Value x) {
  if (!hlo::isFloat(x.dtype())) return b.full(hlo::Type{DType::Pred, x.shape()}, 0);
  return b.compare(Cmp::NE, x, x);
}

// a before b in ascending order with NaN last (descending: NaN first).
Value before(Builder& b, Value x, Value y, bool descending) {
  if (!hlo::isFloat(x.dtype())) return b.compare(descending ? Cmp::GT : Cmp::LT, x, y);
  Value nx = b.compare(Cmp::NE, x, x), ny = b.compare(Cmp::NE, y, y);
  if (descending) return b.binary("or", b.compare(Cmp::GT, x, y), b.binary("and", nx, b.unary("not", ny)));
  return b.binary("or", b.compare(Cmp::LT, x, y), b.binary("and", b.unary("not", nx), ny));
}

// The lowest (or highest) value of an integer dtype.
int64_t intExtreme(DType t, bool highest) {
  int bits = static_cast<int>(hlo::byteWidth(t)) * 8;
  if (t == DType::U8 || t == DType::Pred) return highest ? (t == DType::Pred ? 1 : 255) : 0;
  if (bits == 64) return highest ? INT64_MAX : INT64_MIN;
  int64_t m = int64_t{1} << (bits - 1);
  return highest ? m - 1 : -m;
}

Value iotaLike(Builder& b, const hlo::Shape& shape, int64_t dim) {
  return b.iota(hlo::Type{DType::S64, shape}, dim);
}

// Inclusive Hillis-Steele scan of a tuple of arrays: combine(earlier, later) -> combined.
template <class F>
std::vector<Value> scanTuple(Builder& b, std::vector<Value> xs, std::vector<Value> ids, int64_t dim, F combine) {
  int64_t n = xs[0].shape()[dim], rank = xs[0].rank();
  std::vector<int64_t> zeros(rank, 0), ones(rank, 1);
  for (int64_t s = 1; s < n; s *= 2) {
    std::vector<Value> shifted;
    for (size_t i = 0; i < xs.size(); ++i) {
      std::vector<int64_t> limit = xs[i].shape();
      limit[dim] = n - s;
      std::vector<int64_t> lo(rank, 0);
      lo[dim] = s;
      shifted.push_back(b.pad(b.slice(xs[i], zeros, limit, ones), ids[i], lo, zeros, zeros));
    }
    xs = combine(shifted, xs);
  }
  return xs;
}

}  // namespace

std::pair<Value, Value> sortAlong(Builder& b, Value x, int64_t dim, bool descending) {
  Value in[2] = {x, iotaLike(b, x.shape(), dim)};
  auto r = b.sort(in, dim, true, [descending](Builder& rb, std::span<const Value> a) {
    return std::vector<Value>{before(rb, a[0], a[1], descending)};
  });
  return {r[0], r[1]};
}

Value pickAlong(Builder& b, Value x, Value pos, int64_t dim) { return gatherDim(b, x, pos, dim); }

Value nanCount(Builder& b, Value x, int64_t dim) {
  Value n = b.convert(isNan(b, x), DType::S64);
  Value zero = b.constantInt(DType::S64, 0);
  Value r = b.reduce({&n, 1}, {&zero, 1}, {dim}, [](Builder& rb, std::span<const Value> a) {
    return std::vector<Value>{rb.add(a[0], a[1])};
  })[0];
  hlo::Shape kept = x.shape();
  kept[dim] = 1;
  return b.reshape(r, kept);
}

std::pair<Value, Value> cumExtreme(Builder& b, Value x, int64_t dim, bool isMax) {
  Value idv = hlo::isFloat(x.dtype()) ? b.constant(x.dtype(), isMax ? -INFINITY : INFINITY)
                                      : b.constantInt(x.dtype(), intExtreme(x.dtype(), !isMax));
  auto out = scanTuple(b, {x, iotaLike(b, x.shape(), dim)}, {idv, b.constantInt(DType::S64, -1)}, dim,
                       [&](const std::vector<Value>& e, const std::vector<Value>& l) {
                         // Take the later element when it is NaN, or neither is NaN and it is >= (<=) the earlier.
                         Value nanE = isNan(b, e[0]), nanL = isNan(b, l[0]);
                         Value cmp = b.compare(isMax ? Cmp::GE : Cmp::LE, l[0], e[0]);
                         Value takeL = b.binary("or", nanL, b.binary("and", b.unary("not", nanE), cmp));
                         return std::vector<Value>{b.select(takeL, l[0], e[0]), b.select(takeL, l[1], e[1])};
                       });
  return {out[0], out[1]};
}

Value logcumsumexp(Builder& b, Value x, int64_t dim) {
  Value id = b.constant(x.dtype(), -INFINITY);
  return scanTuple(b, {x}, {id}, dim, [&](const std::vector<Value>& e, const std::vector<Value>& l) {
    Value a = e[0], c = l[0];
    Value m = maximumNan(b, a, c), mn = minimumNan(b, a, c);  // a NaN makes every later sum NaN
    Value r = b.add(m, b.unary("log_plus_one", b.unary("exponential", b.sub(mn, m))));
    // -inf + -inf and inf + inf keep their value (inf - inf would be NaN).
    Value same = b.binary("and", b.compare(Cmp::EQ, a, c), b.compare(Cmp::EQ, b.unary("abs", a), b.scalarLike(a, INFINITY)));
    return std::vector<Value>{b.select(same, a, r)};
  })[0];
}

Value searchSorted(Builder& b, Value seq, Value x, bool right, DType out) {
  // PyTorch's binary search (Bucketization.cpp), unrolled: bit_width(M) halvings of [lo, hi) for every x, one
  // gather each. Left moves right while !(seq[mid] >= x), right while !(seq[mid] > x), so a NaN goes to the end
  // as on CPU. (Comparing every x with all M boundaries was O(N x M): 2.4 ms for one embedding bag's 4096 ids.)
  int64_t m = seq.shape().back();
  hlo::Shape shape = x.shape();
  int64_t rows = seq.rank() == 1 ? 1 : seq.type.numel() / std::max<int64_t>(m, 1);
  if (m == 0 || x.type.numel() == 0 || rows == 0) return b.full(hlo::Type{out, shape}, 0);
  int64_t n = x.type.numel() / rows;  // batched: x's leading dims are seq's
  Value table = b.reshape(seq, {rows, m});
  Value xs = b.reshape(x, {rows, n});
  hlo::Type idx{DType::S64, {rows, n}};
  Value lo = b.full(idx, 0), hi = b.full(idx, static_cast<double>(m));
  Value one = b.full(idx, 1), last = b.full(idx, static_cast<double>(m - 1));
  for (int k = std::bit_width(static_cast<uint64_t>(m)); k > 0; --k) {
    Value active = b.compare(Cmp::LT, lo, hi);
    Value mid = b.add(lo, b.binary("shift_right_logical", b.sub(hi, lo), one));
    Value v = gatherDim(b, table, b.min(mid, last), 1);
    Value goRight = b.unary("not", b.compare(right ? Cmp::GT : Cmp::GE, v, xs));
    lo = b.select(b.binary("and", active, goRight), b.add(mid, one), lo);
    hi = b.select(b.binary("and", active, b.unary("not", goRight)), mid, hi);
  }
  return b.convert(b.reshape(lo, shape), out);
}

Value isin(Builder& b, Value elements, Value test, bool invert) {
  int64_t t = test.type.numel();
  Value flat = b.reshape(test, {t});
  hlo::Shape shape = elements.shape();
  shape.push_back(t);
  int64_t r = static_cast<int64_t>(shape.size());
  std::vector<int64_t> eDims;
  for (int64_t i = 0; i < elements.rank(); ++i) eDims.push_back(i);
  Value eq = b.compare(Cmp::EQ, b.broadcastInDim(elements, shape, eDims), b.broadcastInDim(flat, shape, {r - 1}));
  Value f = b.constant(DType::Pred, 0);
  Value any = b.reduce({&eq, 1}, {&f, 1}, {r - 1}, [](Builder& rb, std::span<const Value> a) {
    return std::vector<Value>{rb.binary("or", a[0], a[1])};
  })[0];
  return invert ? b.unary("not", any) : any;
}

std::pair<Value, Value> modeAlong(Builder& b, Value x, int64_t dim) {
  auto [v, idx] = sortAlong(b, x, dim, false);
  int64_t n = x.shape()[dim], rank = x.rank();
  hlo::Type it{DType::S64, x.shape()};
  Value iota = b.iota(it, dim);
  std::vector<int64_t> zeros(rank, 0), ones(rank, 1), lo(rank, 0), hi(rank, 0);
  std::vector<int64_t> headLimit = x.shape(), tailStart(rank, 0);
  headLimit[dim] = n - 1;
  tailStart[dim] = 1;
  Value differ = b.compare(Cmp::NE, b.slice(v, tailStart, x.shape(), ones), b.slice(v, zeros, headLimit, ones));
  Value t = b.constant(DType::Pred, 1);
  lo[dim] = 1;
  Value first = b.pad(differ, t, lo, zeros, zeros);   // a run starts here
  lo[dim] = 0;
  hi[dim] = 1;
  Value last = b.pad(differ, t, zeros, hi, zeros);    // a run ends here
  Value start = cumExtreme(b, b.select(first, iota, b.full(it, -1)), dim, true).first;
  Value freq = b.select(last, b.add(b.sub(iota, start), b.full(it, 1)), b.full(it, 0));
  Value p = argReduce(b, true, freq, dim).second;
  hlo::Shape kept = x.shape();
  kept[dim] = 1;
  p = b.reshape(p, kept);
  hlo::Shape reduced = x.shape();
  reduced.erase(reduced.begin() + dim);
  return {b.reshape(gatherDim(b, v, p, dim), reduced), b.reshape(gatherDim(b, idx, p, dim), reduced)};
}

namespace {
// Rows [n, rest] -> pred [n]: true where a row differs from the one before it (row 0 always).
Value firstOfRuns(Builder& b, Value rows) {
  int64_t n = rows.shape()[0], rest = rows.shape()[1];
  Value differ = b.compare(Cmp::NE, b.slice(rows, {1, 0}, {n, rest}, {1, 1}), b.slice(rows, {0, 0}, {n - 1, rest}, {1, 1}));
  Value f = b.constant(DType::Pred, 0);
  Value any = b.reduce({&differ, 1}, {&f, 1}, {1}, [](Builder& rb, std::span<const Value> a) {
    return std::vector<Value>{rb.binary("or", a[0], a[1])};
  })[0];
  return b.pad(any, b.constant(DType::Pred, 1), {1}, {0}, {0});
}
}  // namespace

Runs runsAlong(Builder& b, Value x, int64_t dim) {
  int64_t n = x.shape()[dim], rest = n ? x.type.numel() / n : 0;
  std::vector<int64_t> perm{dim};
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != dim) perm.push_back(i);
  Runs r;
  r.values = b.reshape(b.transpose(x, perm), {n, rest});
  r.perm = iotaLike(b, {n}, 0);
  if (n == 0) {
    r.first = b.full(hlo::Type{DType::Pred, {0}}, 0);
    return r;
  }
  r.first = firstOfRuns(b, r.values);
  return r;
}

Runs runsAlongSorted(Builder& b, Value x, int64_t dim) {
  Runs base = runsAlong(b, x, dim);  // rows [n, rest] in input order
  int64_t n = base.values.shape()[0], rest = base.values.shape()[1];
  if (n == 0) return base;
  // Sort rows lexicographically: one sort operand per column, then the row index.
  std::vector<Value> ops;
  for (int64_t c = 0; c < rest; ++c) ops.push_back(b.reshape(b.slice(base.values, {0, c}, {n, c + 1}, {1, 1}), {n}));
  ops.push_back(iotaLike(b, {n}, 0));
  auto sorted = b.sort(ops, 0, true, [rest](Builder& rb, std::span<const Value> a) {
    // a = (col0_l, col0_r, col1_l, col1_r, ...): l < r at the first column where they differ.
    Value lt = rb.constant(DType::Pred, 0), eq = rb.constant(DType::Pred, 1);
    for (int64_t c = 0; c < rest; ++c) {
      Value l = a[2 * c], r = a[2 * c + 1];
      lt = rb.binary("or", lt, rb.binary("and", eq, before(rb, l, r, false)));
      eq = rb.binary("and", eq, rb.compare(Cmp::EQ, l, r));
    }
    return std::vector<Value>{lt};
  });
  std::vector<Value> cols;
  for (int64_t c = 0; c < rest; ++c) cols.push_back(b.reshape(sorted[c], {n, 1}));
  Runs r;
  r.values = rest ? b.concatenate(cols, 1) : base.values;
  r.perm = sorted[rest];
  r.first = firstOfRuns(b, r.values);
  return r;
}

Runs runs(Builder& b, Value x, bool sort) {
  int64_t n = x.type.numel();
  Value flat = b.reshape(x, {n});
  Runs r;
  if (sort) {
    auto [v, p] = sortAlong(b, flat, 0, false);
    r.values = v;
    r.perm = p;
  } else {
    r.values = flat;
    r.perm = iotaLike(b, {n}, 0);
  }
  if (n == 0) {
    r.first = b.full(hlo::Type{DType::Pred, {0}}, 0);
    return r;
  }
  // first[i]: i == 0 or values[i] != values[i-1] (NaNs are all distinct, as on CPU).
  Value prev = b.slice(r.values, {0}, {n - 1}, {1});
  Value cur = b.slice(r.values, {1}, {n}, {1});
  Value differ = b.compare(Cmp::NE, cur, prev);
  Value t = b.constant(DType::Pred, 1);
  r.first = b.pad(differ, t, {1}, {0}, {0});
  return r;
}

std::tuple<Value, Value, Value> uniqueFromRuns(Builder& b, const Runs& r, int64_t count) {
  int64_t n = r.values.shape()[0];
  Value firsts = b.convert(r.first, DType::S64);
  Value group = b.sub(scanTuple(b, {firsts}, {b.constantInt(DType::S64, 0)}, 0,
                                [&](const std::vector<Value>& e, const std::vector<Value>& l) {
                                  return std::vector<Value>{b.add(e[0], l[0])};
                                })[0],
                      b.full(hlo::Type{DType::S64, {n}}, 1));
  hlo::Shape ushape = r.values.shape();
  ushape[0] = count;
  Value uniq = indexScatter(b, b.full(hlo::Type{r.values.dtype(), ushape}, 0), group, r.values, 0, Reduce::Replace);
  Value inverse = indexScatter(b, b.full(hlo::Type{DType::S64, {n}}, 0), r.perm, group, 0, Reduce::Replace);
  Value counts = indexScatter(b, b.full(hlo::Type{DType::S64, {count}}, 0), group, b.full(hlo::Type{DType::S64, {n}}, 1),
                              0, Reduce::Add);
  return {uniq, inverse, counts};
}

}  // namespace tpu::lowering
