#include "ShardedEmbedding.h"

#include <stdexcept>

#include "Index.h"
#include "Jagged.h"
#include "Reduce.h"

namespace tpu::lowering {
namespace {

using hlo::Cmp;

Value s64(Builder& b, int64_t v) { return b.constantInt(DType::S64, v); }
Value predOr(Builder& b, Value x, Value y) { return b.binary("or", x, y); }
Value predAnd(Builder& b, Value x, Value y) { return b.binary("and", x, y); }

Value clampIndex(Builder& b, Value x, int64_t size) {
  return b.clamp(b.full({DType::S64, x.shape()}, 0), x, b.full({DType::S64, x.shape()}, static_cast<double>(size - 1)));
}

Value take(Builder& b, Value table, Value idx) {
  int64_t k = idx.type.numel();
  return b.reshape(indexSelect(b, table, b.reshape(idx, {k}), 0), idx.shape());
}

Value element(Builder& b, Value x, int64_t i) { return b.reshape(b.slice(x, {i}, {i + 1}, {1}), {}); }

// The bag of each of the n indices (S64 [n]) and "the offsets are not a partition of the n indices".
std::pair<Value, Value> bagsOf(Builder& b, Value offsets, int64_t n) {
  int64_t bags = offsets.shape()[0] - 1;
  Value off = b.convert(offsets, DType::S64);
  Value first = element(b, off, 0), last = element(b, off, bags);
  Value starts = b.sub(b.slice(off, {0}, {bags}, {1}), b.broadcast(first, {bags}));
  Value ends = b.slice(off, {1}, {bags + 1}, {1});
  Value decreasing = anyTrue(b, b.compare(Cmp::LT, ends, b.slice(off, {0}, {bags}, {1})));
  Value bad = predOr(b, decreasing, b.compare(Cmp::NE, b.sub(last, first), s64(b, n)));
  return {segmentOf(b, starts, n), bad};
}

}  // namespace

std::pair<Value, Value> pooledLookupOffset(Builder& b, Value indices, Value offsets, Value weights) {
  int64_t n = indices.shape()[0], bags = offsets.shape()[0] - 1, rows = weights.shape()[0], d = weights.shape()[1];
  if (n == 0 || bags < 1 || rows == 0) throw std::invalid_argument("pooledLookupOffset: empty inputs are the caller's");
  auto [bag, bad] = bagsOf(b, offsets, n);
  Value idx = b.convert(indices, DType::S64);
  bad = predOr(b, bad, anyOutOfRange(b, idx, 0, rows));
  Value picked = indexSelect(b, weights, clampIndex(b, idx, rows), 0);  // [n, D]
  Value out = indexScatter(b, b.full({weights.dtype(), {bags, d}}, 0), bag, picked, 0, Reduce::Add);
  return {out, bad};
}

std::pair<Value, Value> pooledLookupOffsetBackward(Builder& b, Value grad, Value indices, Value offsets,
                                                   int64_t numRows) {
  int64_t n = indices.shape()[0], d = grad.shape()[1];
  if (n == 0 || offsets.shape()[0] < 2 || numRows == 0)
    throw std::invalid_argument("pooledLookupOffsetBackward: empty inputs are the caller's");
  auto [bag, bad] = bagsOf(b, offsets, n);
  Value idx = b.convert(indices, DType::S64);
  bad = predOr(b, bad, anyOutOfRange(b, idx, 0, numRows));
  Value rowsGrad = indexSelect(b, grad, bag, 0);  // [n, D]
  // Out-of-range indices are dropped by the scatter (and reported).
  Value out = indexScatter(b, b.full({grad.dtype(), {numRows, d}}, 0), idx, rowsGrad, 0, Reduce::Add);
  return {out, bad};
}

std::pair<Value, Value> pooledEmbsColumns(Builder& b, Value offsetDims, Value permute, int64_t w) {
  int64_t n = permute.shape()[0];
  if (n == 0 || w == 0 || offsetDims.shape()[0] < 2)
    throw std::invalid_argument("pooledEmbsColumns: empty inputs and offsets are the caller's");
  int64_t m = offsetDims.shape()[0] - 1;  // pieces described by the offsets
  Value off = b.convert(offsetDims, DType::S64);
  Value starts = b.slice(off, {0}, {m}, {1});
  Value widths = b.sub(b.slice(off, {1}, {m + 1}, {1}), starts);
  Value perm = b.convert(permute, DType::S64);
  Value bad = anyOutOfRange(b, perm, 0, m);
  perm = clampIndex(b, perm, m);
  Value outWidth = take(b, widths, perm);                                          // [n]
  Value outStart = exclusiveCumsum(b, outWidth);                                   // [n]
  Value total = reduce(b, ReduceOp::Sum, outWidth, {0});
  bad = predOr(b, bad, b.compare(Cmp::LT, total, s64(b, w)));                      // columns no piece covers
  bad = predOr(b, bad, anyTrue(b, b.compare(Cmp::LT, widths, b.full({DType::S64, {m}}, 0))));
  Value seg = segmentOf(b, outStart, w);
  hlo::Type tw{DType::S64, {w}};
  Value src = b.add(take(b, starts, take(b, perm, seg)), b.sub(b.iota(tw, 0), take(b, outStart, seg)));
  bad = predOr(b, bad, anyOutOfRange(b, src, 0, w));
  return {clampIndex(b, src, w), bad};
}

std::pair<Value, Value> permutePooledColumns(Builder& b, Value x, Value offsetDims, Value permute, bool backward) {
  auto [src, bad] = pooledEmbsColumns(b, offsetDims, permute, x.shape()[1]);
  Value r = backward ? indexScatter(b, b.scalarLike(x, 0), src, x, 1, Reduce::Add) : indexSelect(b, x, src, 1);
  return {r, bad};
}

BlockBucketized blockBucketize(Builder& b, Value lengths, Value indices, const Value* weights, Value blockSizes,
                               int64_t mySize, int64_t numFeatures, bool keepOrigIdx, bool withPos,
                               bool withPermute) {
  int64_t tb = lengths.shape()[0], n = indices.shape()[0];
  if (n == 0 || tb == 0 || numFeatures == 0 || mySize < 1)
    throw std::invalid_argument("blockBucketize: empty inputs are the caller's");
  int64_t batch = tb / numFeatures;
  hlo::Type tn{DType::S64, {n}};
  BlockBucketized r;
  Value len = b.convert(lengths, DType::S64);
  Value offsets = exclusiveCumsum(b, len);                                         // [T * B]
  Value total = reduce(b, ReduceOp::Sum, len, {0});
  r.outOfRange = predOr(b, b.compare(Cmp::NE, total, s64(b, n)),
                        anyTrue(b, b.compare(Cmp::LT, len, b.full({DType::S64, {tb}}, 0))));
  Value bag = segmentOf(b, offsets, n);                                            // [n] in [0, T * B)
  Value feature = b.div(bag, b.full(tn, static_cast<double>(batch)));
  Value v = b.convert(indices, DType::S64);
  r.outOfRange = predOr(b, r.outOfRange, anyTrue(b, b.compare(Cmp::LT, v, b.full(tn, 0))));
  Value blk = take(b, b.convert(blockSizes, DType::S64), feature);
  Value size = b.full(tn, static_cast<double>(mySize));
  Value inBlocks = b.compare(Cmp::LT, v, b.mul(blk, size));
  Value safeBlk = b.max(blk, b.full(tn, 1));
  Value bucket = b.select(inBlocks, b.div(v, safeBlk), b.binary("remainder", v, size));
  Value local = keepOrigIdx ? v : b.select(inBlocks, b.sub(v, b.mul(bucket, blk)), b.div(v, size));
  // Output order: bucket-major, then the bag; a stable sort on that key keeps each bag's order.
  Value key = b.add(b.mul(bucket, b.full(tn, static_cast<double>(tb))), bag);
  Value count = indexScatter(b, b.full({DType::S64, {mySize * tb}}, 0), key, b.full(tn, 1), 0, Reduce::Add);
  r.lengths = b.convert(count, lengths.dtype());
  Value ins[2] = {key, b.iota(tn, 0)};
  std::vector<Value> sorted = b.sort(ins, 0, /*stable=*/true, [](Builder& rb, std::span<const Value> a) {
    return std::vector<Value>{rb.compare(Cmp::LT, a[0], a[1])};
  });
  Value order = sorted[1];  // the original position of each output position
  r.indices = b.convert(take(b, local, order), indices.dtype());
  if (weights != nullptr) r.weights = indexSelect(b, *weights, order, 0);
  if (withPos) {
    Value pos = b.sub(b.iota(tn, 0), take(b, offsets, bag));
    r.pos = b.convert(take(b, pos, order), indices.dtype());
  }
  if (withPermute) {
    Value inverse = indexScatter(b, b.full(tn, 0), order, b.iota(tn, 0), 0, Reduce::Replace);
    r.unbucketizePermute = b.convert(inverse, indices.dtype());
  }
  return r;
}

}  // namespace tpu::lowering
