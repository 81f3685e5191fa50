#include "Index.h"
#include "csrc/lowering/Dims.h"

#include <limits>
#include <stdexcept>

#include "Elementwise.h"

namespace tpu::lowering {
namespace {

Value combine(Builder& b, Reduce r, Value old, Value upd) {
  bool pred = old.dtype() == DType::Pred;
  switch (r) {
    case Reduce::Replace: return upd;
    case Reduce::Add: return pred ? b.binary("or", old, upd) : b.add(old, upd);
    case Reduce::Mul: return pred ? b.binary("and", old, upd) : b.mul(old, upd);
    case Reduce::Max: return maximumNan(b, old, upd);  // scatter_reduce amax: a NaN wins, as on CPU
    case Reduce::Min: return minimumNan(b, old, upd);
  }
  throw std::logic_error("unknown reduction");
}

Builder::RegionFn combiner(Reduce r) {
  return [r](Builder& b, std::span<const Value> a) { return std::vector<Value>{combine(b, r, a[0], a[1])}; };
}

// [*shape, rank] coordinates of every element of `index`'s shape, with
// coordinate `dim` taken from `index`.
Value dimCoordinates(Builder& b, Value index, int64_t dim, int64_t rank) {
  hlo::Shape shape = index.shape();
  hlo::Shape withOne = shape;
  withOne.push_back(1);
  hlo::Type t{DType::S64, shape};
  std::vector<Value> parts;
  for (int64_t d = 0; d < rank; ++d) {
    Value c = d == dim ? b.convert(index, DType::S64) : b.iota(t, d);
    parts.push_back(b.reshape(c, withOne));
  }
  return b.concatenate(parts, rank);
}

// Stacks same-shape S64 index tensors along a new last dim.
Value stackIndices(Builder& b, std::span<const Value> indices) {
  hlo::Shape withOne = indices[0].shape();
  withOne.push_back(1);
  std::vector<Value> parts;
  for (const Value& i : indices) parts.push_back(b.reshape(i, withOne));
  return b.concatenate(parts, static_cast<int64_t>(withOne.size()) - 1);
}

bool adjacent(const std::vector<int64_t>& dims) {
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[i - 1] + 1) return false;
  return true;
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e == x) return true;
  return false;
}

// Output positions of x's non-indexed dims in the advanced-index result.
std::vector<int64_t> offsetPositions(int64_t rank, int64_t batchRank, const std::vector<int64_t>& dims) {
  std::vector<int64_t> pos;
  bool adj = adjacent(dims);
  int64_t m = static_cast<int64_t>(dims.size());
  int64_t k = 0;
  for (int64_t j = 0; j < rank; ++j) {
    if (contains(dims, j)) continue;
    if (adj) pos.push_back(j < dims[0] ? j : j - m + batchRank);
    else pos.push_back(batchRank + k);
    ++k;
  }
  return pos;
}

// Stable-sorts the flat `payload` so that the entries whose `pred` is true come
// first, in order.
Value trueFirst(Builder& b, Value pred, Value payload) {
  Value key = b.unary("not", pred);  // true sorts as false, first
  Value ins[2] = {key, payload};
  std::vector<Value> sorted = b.sort(ins, 0, /*stable=*/true, [](Builder& r, std::span<const Value> a) {
    return std::vector<Value>{r.compare(hlo::Cmp::LT, r.convert(a[0], DType::S32), r.convert(a[1], DType::S32))};
  });
  return sorted[1];
}

Value compactTrue(Builder& b, Value pred, Value payload, int64_t count) {
  return b.slice(trueFirst(b, pred, payload), {0}, {count}, {1});
}

// Row-major coordinates [m, rank] of the flat indices `lin` [m] in `shape`.
Value coordinates(Builder& b, Value lin, const hlo::Shape& shape) {
  int64_t m = lin.shape()[0], rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> strides(rank);
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  std::vector<Value> coords;
  for (int64_t d = 0; d < rank; ++d) {
    Value c = b.div(lin, b.scalarLike(lin, static_cast<double>(strides[d])));
    if (d > 0) c = b.binary("remainder", c, b.scalarLike(c, static_cast<double>(shape[d])));
    coords.push_back(b.reshape(c, {m, 1}));
  }
  return b.concatenate(coords, 1);
}

Value isNonzero(Builder& b, Value x) {
  if (x.dtype() == DType::Pred) return x;
  return b.compare(hlo::Cmp::NE, x, b.scalarLike(x, 0));
}

}  // namespace

Value wrapIndex(Builder& b, Value idx, int64_t size) {
  Value i = b.convert(idx, DType::S64);
  Value negative = b.compare(hlo::Cmp::LT, i, b.scalarLike(i, 0));
  return b.select(negative, b.add(i, b.scalarLike(i, static_cast<double>(size))), i);
}

Value anyTrue(Builder& b, Value pred) {
  Value flat = b.reshape(pred, {pred.type.numel()});
  Value init = b.constantInt(DType::Pred, 0);
  return b.reduce({&flat, 1}, {&init, 1}, {0}, [](Builder& r, std::span<const Value> a) {
    return std::vector<Value>{r.binary("or", a[0], a[1])};
  })[0];
}

Value anyOutOfRange(Builder& b, Value idx, int64_t lo, int64_t hi) {
  Value i = b.convert(idx, DType::S64);
  Value below = b.compare(hlo::Cmp::LT, i, b.scalarLike(i, static_cast<double>(lo)));
  Value above = b.compare(hlo::Cmp::GE, i, b.scalarLike(i, static_cast<double>(hi)));
  return anyTrue(b, b.binary("or", below, above));
}

Value reduceIdentity(Builder& b, Reduce r, DType t) {
  switch (r) {
    case Reduce::Mul: return b.constantInt(t, 1);
    case Reduce::Max:
      if (t == DType::Pred) return b.constantInt(t, 0);
      if (hlo::isFloat(t)) return b.constant(t, -std::numeric_limits<double>::infinity());
      switch (t) {
        case DType::S8: return b.constantInt(t, std::numeric_limits<int8_t>::lowest());
        case DType::S16: return b.constantInt(t, std::numeric_limits<int16_t>::lowest());
        case DType::S32: return b.constantInt(t, std::numeric_limits<int32_t>::lowest());
        case DType::S64: return b.constantInt(t, std::numeric_limits<int64_t>::lowest());
        default: return b.constantInt(t, 0);
      }
    case Reduce::Min:
      if (t == DType::Pred) return b.constantInt(t, 1);
      if (hlo::isFloat(t)) return b.constant(t, std::numeric_limits<double>::infinity());
      switch (t) {
        case DType::S8: return b.constantInt(t, std::numeric_limits<int8_t>::max());
        case DType::S16: return b.constantInt(t, std::numeric_limits<int16_t>::max());
        case DType::S32: return b.constantInt(t, std::numeric_limits<int32_t>::max());
        case DType::U8: return b.constantInt(t, 255);
        default: return b.constantInt(t, std::numeric_limits<int64_t>::max());
      }
    default: return b.constantInt(t, 0);
  }
}

Value gatherDim(Builder& b, Value x, Value index, int64_t dim) {
  int64_t r = x.rank();
  hlo::GatherDims d;
  d.collapsedSliceDims = upto(r);
  d.startIndexMap = upto(r);
  d.indexVectorDim = r;
  return b.gather(x, dimCoordinates(b, index, dim, r), d, std::vector<int64_t>(r, 1), index.shape());
}

Value scatterDim(Builder& b, Value self, Value index, Value src, int64_t dim, Reduce r) {
  int64_t rank = self.rank();
  std::vector<int64_t> zeros(rank, 0), ones(rank, 1);
  Value upd = b.slice(src, zeros, index.shape(), ones);
  hlo::ScatterDims d;
  d.insertedWindowDims = upto(rank);
  d.scatterDimsToOperandDims = upto(rank);
  d.indexVectorDim = rank;
  return b.scatter(self, dimCoordinates(b, index, dim, rank), upd, d, combiner(r));
}

Value indexSelect(Builder& b, Value x, Value index, int64_t dim) {
  int64_t r = x.rank(), n = index.shape()[0];
  hlo::GatherDims d;
  for (int64_t i = 0; i < r; ++i)
    if (i != dim) d.offsetDims.push_back(i);
  d.collapsedSliceDims = {dim};
  d.startIndexMap = {dim};
  d.indexVectorDim = 1;
  std::vector<int64_t> sizes = x.shape();
  sizes[dim] = 1;
  hlo::Shape out = x.shape();
  out[dim] = n;
  return b.gather(x, b.reshape(b.convert(index, DType::S64), {n, 1}), d, sizes, out);
}

Value indexScatter(Builder& b, Value self, Value index, Value source, int64_t dim, Reduce r) {
  int64_t rank = self.rank(), n = index.shape()[0];
  hlo::ScatterDims d;
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim) d.updateWindowDims.push_back(i);
  d.insertedWindowDims = {dim};
  d.scatterDimsToOperandDims = {dim};
  d.indexVectorDim = 1;
  return b.scatter(self, b.reshape(b.convert(index, DType::S64), {n, 1}), source, d, combiner(r));
}

hlo::Shape advancedIndexShape(const hlo::Shape& x, const hlo::Shape& batch, const std::vector<int64_t>& dims) {
  int64_t rank = static_cast<int64_t>(x.size()), k = static_cast<int64_t>(batch.size());
  std::vector<int64_t> pos = offsetPositions(rank, k, dims);
  hlo::Shape out(rank - static_cast<int64_t>(dims.size()) + k, -1);
  size_t p = 0;
  for (int64_t j = 0; j < rank; ++j)
    if (!contains(dims, j)) out[pos[p++]] = x[j];
  p = 0;
  for (int64_t& s : out)
    if (s == -1) s = batch[p++];
  return out;
}

Value advancedIndex(Builder& b, Value x, std::span<const Value> indices, const std::vector<int64_t>& dims) {
  const hlo::Shape& batch = indices[0].shape();
  int64_t k = static_cast<int64_t>(batch.size());
  hlo::GatherDims d;
  d.offsetDims = offsetPositions(x.rank(), k, dims);
  d.collapsedSliceDims = dims;
  d.startIndexMap = dims;
  d.indexVectorDim = k;
  std::vector<int64_t> sizes = x.shape();
  for (int64_t dim : dims) sizes[dim] = 1;
  return b.gather(x, stackIndices(b, indices), d, sizes, advancedIndexShape(x.shape(), batch, dims));
}

Value advancedIndexPut(Builder& b, Value self, std::span<const Value> indices, const std::vector<int64_t>& dims,
                       Value values, Reduce r) {
  int64_t k = static_cast<int64_t>(indices[0].shape().size());
  hlo::ScatterDims d;
  d.updateWindowDims = offsetPositions(self.rank(), k, dims);
  d.insertedWindowDims = dims;
  d.scatterDimsToOperandDims = dims;
  d.indexVectorDim = k;
  return b.scatter(self, stackIndices(b, indices), values, d, combiner(r));
}

Value countNonzero(Builder& b, Value x) {
  Value n = b.convert(isNonzero(b, x), DType::S64);
  Value init = b.constantInt(DType::S64, 0);
  return b.reduce({&n, 1}, {&init, 1}, upto(x.rank()), [](Builder& r, std::span<const Value> a) {
    return std::vector<Value>{r.add(a[0], a[1])};
  })[0];
}

Value nonzero(Builder& b, Value x, int64_t count) {
  int64_t n = x.type.numel();
  Value flat = b.reshape(isNonzero(b, x), {n});
  return coordinates(b, compactTrue(b, flat, b.iota(hlo::Type{DType::S64, {n}}, 0), count), x.shape());
}

Value nonzeroStatic(Builder& b, Value x, int64_t size, Value fill) {
  int64_t n = x.type.numel();
  Value flat = b.reshape(isNonzero(b, x), {n});
  Value lin = trueFirst(b, flat, b.iota(hlo::Type{DType::S64, {n}}, 0));
  lin = size <= n ? b.slice(lin, {0}, {size}, {1}) : b.pad(lin, b.constantInt(DType::S64, 0), {0}, {size - n}, {0});
  Value coords = coordinates(b, lin, x.shape());
  hlo::Shape shape = coords.shape();
  Value row = b.iota(hlo::Type{DType::S64, shape}, 0);
  Value valid = b.compare(hlo::Cmp::LT, row, b.broadcast(countNonzero(b, x), shape));
  return b.select(valid, coords, b.broadcast(b.convert(fill, DType::S64), shape));
}

Value maskedScatter(Builder& b, Value self, Value mask, Value source) {
  int64_t n = self.type.numel(), s = source.type.numel();
  Value flat = b.reshape(self, {n});
  Value pred = b.reshape(isNonzero(b, mask), {n});
  hlo::Type idx{DType::S64, {n}};
  Value pos = trueFirst(b, pred, b.iota(idx, 0));  // true positions first, in order
  Value k = b.iota(idx, 0);
  Value src = indexSelect(b, b.reshape(source, {s}), b.min(k, b.full(idx, static_cast<double>(s - 1))), 0);
  Value keep = indexSelect(b, flat, pos, 0);
  Value upd = b.select(b.compare(hlo::Cmp::LT, k, b.broadcast(countNonzero(b, mask), {n})), src, keep);
  return b.reshape(indexScatter(b, flat, pos, upd, 0, Reduce::Replace), self.shape());
}

Value maskedSelect(Builder& b, Value x, Value mask, int64_t count) {
  int64_t n = x.type.numel();
  return compactTrue(b, b.reshape(isNonzero(b, mask), {n}), b.reshape(x, {n}), count);
}

Value embeddingBackward(Builder& b, Value grad, Value indices, int64_t numWeights, int64_t paddingIdx,
                        bool scaleByFreq) {
  int64_t n = grad.shape()[0], width = grad.shape()[1];
  Value idx = b.convert(indices, DType::S64);
  Value skip = b.compare(hlo::Cmp::EQ, idx, b.scalarLike(idx, static_cast<double>(paddingIdx)));
  Value rows = b.select(b.broadcastInDim(skip, {n, width}, {0}), b.scalarLike(grad, 0), grad);
  if (scaleByFreq) {
    Value ones = b.full(hlo::Type{grad.dtype(), {n}}, 1);
    Value counts = indexScatter(b, b.full(hlo::Type{grad.dtype(), {numWeights}}, 0), idx, ones, 0, Reduce::Add);
    Value mine = indexSelect(b, counts, idx, 0);
    rows = b.div(rows, b.broadcastInDim(mine, {n, width}, {0}));
  }
  return indexScatter(b, b.full(hlo::Type{grad.dtype(), {numWeights, width}}, 0), idx, rows, 0, Reduce::Add);
}

}  // namespace tpu::lowering
