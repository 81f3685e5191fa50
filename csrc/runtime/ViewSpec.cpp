#include "ViewSpec.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace tpu::runtime {

using hlo::DType;
using hlo::Value;

int64_t ViewSpec::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool ViewSpec::isContiguous() const {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool ViewSpec::coversStorage(size_t storageBytes) const {
  return offset == 0 && isContiguous() &&
         static_cast<size_t>(numel()) * hlo::byteWidth(dtype) == storageBytes;
}

Value reinterpretFlat(hlo::Builder& b, Value flat, DType to) {
  DType from = flat.dtype();
  if (from == to) return flat;
  // Booleans are bytes holding 0 or 1.
  if (from == DType::Pred) return reinterpretFlat(b, b.convert(flat, DType::U8), to);
  if (to == DType::Pred) {
    Value bytes = reinterpretFlat(b, flat, DType::U8);
    return b.compare(hlo::Cmp::NE, bytes, b.scalarLike(bytes, 0));
  }
  int64_t n = flat.shape()[0];
  // XLA bitcasts no complex type: a complex element is its (real, imaginary) pair of floats in memory,
  // so complex[n] <-> float[2n] interleaves / splits the parts (exact), and other types go through that float.
  if (hlo::isComplex(from)) {
    Value re = b.reshape(b.realPart(flat), {n, 1}), im = b.reshape(b.imagPart(flat), {n, 1});
    Value parts[2] = {re, im};
    return reinterpretFlat(b, b.reshape(b.concatenate(parts, 1), {2 * n}), to);
  }
  if (hlo::isComplex(to)) {
    Value f = reinterpretFlat(b, flat, hlo::componentType(to));
    int64_t m = f.shape()[0] / 2;
    if (2 * m != f.shape()[0]) f = b.slice(f, {0}, {2 * m}, {1});
    Value pairs = b.reshape(f, {m, 2});
    Value re = b.reshape(b.slice(pairs, {0, 0}, {m, 1}, {1, 1}), {m});
    Value im = b.reshape(b.slice(pairs, {0, 1}, {m, 2}, {1, 1}), {m});
    return b.complex(re, im);
  }
  int64_t wf = static_cast<int64_t>(hlo::byteWidth(from));
  int64_t wt = static_cast<int64_t>(hlo::byteWidth(to));
  if (wf == wt) return b.bitcastConvert(flat, hlo::Type{to, {n}});
  // Go through bytes: from[n] -> u8[n*wf] -> to[n*wf/wt].
  Value bytes = flat;
  if (wf > 1) bytes = b.reshape(b.bitcastConvert(flat, hlo::Type{DType::U8, {n, wf}}), {n * wf});
  else bytes = b.bitcastConvert(flat, hlo::Type{DType::U8, {n}});
  int64_t m = (n * wf) / wt;
  if (m * wt != n * wf) bytes = b.slice(bytes, {0}, {m * wt}, {1});
  if (wt == 1) return b.bitcastConvert(bytes, hlo::Type{to, {m}});
  return b.bitcastConvert(b.reshape(bytes, {m, wt}), hlo::Type{to, {m}});
}

namespace {

// Flat element index of every view element: offset + sum_k iota_k * stride_k.
Value elementIndices(hlo::Builder& b, const ViewSpec& v, const Value* offset) {
  hlo::Type t{DType::S64, v.sizes};
  Value idx = offset ? b.broadcast(*offset, v.sizes) : b.full(t, static_cast<double>(v.offset));
  for (size_t k = 0; k < v.sizes.size(); ++k) {
    if (v.sizes[k] == 1 || v.strides[k] == 0) continue;
    Value term = b.mul(b.iota(t, static_cast<int64_t>(k)), b.full(t, static_cast<double>(v.strides[k])));
    idx = b.add(idx, term);
  }
  return idx;
}

hlo::GatherDims pointGatherDims(int64_t rank) {
  hlo::GatherDims d;
  d.collapsedSliceDims = {0};
  d.startIndexMap = {0};
  d.indexVectorDim = rank;
  return d;
}

// The dims of a block read (sorted by stride), or false when the view's strides do not nest.
bool blockDims(const ViewSpec& v, std::vector<int64_t>& dims) {
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.sizes[i] > 1 && v.strides[i] > 0) dims.push_back(static_cast<int64_t>(i));
  std::stable_sort(dims.begin(), dims.end(), [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    int64_t outer = v.strides[dims[i]], inner = v.strides[dims[i + 1]];
    if (outer % inner != 0 || outer < inner * v.sizes[dims[i + 1]]) return false;
  }
  return true;
}

// 1 + the flat distance from the view's first element to its last one.
int64_t viewExtent(const ViewSpec& v) {
  int64_t e = 1;
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.sizes[i] > 1) e += (v.sizes[i] - 1) * std::abs(v.strides[i]);
  return e;
}

// The stride-ordered block a nesting view lies in (dims from blockDims): each dim's extent in its
// outer dim's stride, then the innermost stride; and the view's box at the block's start.
void blockShapes(const ViewSpec& v, const std::vector<int64_t>& dims, hlo::Shape& block, hlo::Shape& box) {
  if (dims.empty()) {
    block = box = {1};
    return;
  }
  block = box = {v.sizes[dims[0]]};
  for (size_t i = 1; i < dims.size(); ++i) {
    block.push_back(v.strides[dims[i - 1]] / v.strides[dims[i]]);
    box.push_back(v.sizes[dims[i]]);
  }
  block.push_back(v.strides[dims.back()]);
  box.push_back(1);
}

// The block read's slice, transpose and broadcast back to the view.
bool finishBlockRead(hlo::Builder& b, Value blocked, const ViewSpec& v, const std::vector<int64_t>& dims,
                     const hlo::Shape& block, const hlo::Shape& limits, Value& out) {
  std::vector<int64_t> zeros(block.size(), 0), ones(block.size(), 1);
  Value sliced = b.slice(blocked, zeros, limits, ones);
  // Drop the trailing stride dim, restore the original dim order.
  hlo::Shape sortedSizes(limits.begin(), limits.end() - 1);
  Value sorted = b.reshape(sliced, sortedSizes);
  std::vector<int64_t> byDim = dims, perm(dims.size());
  std::sort(byDim.begin(), byDim.end());
  for (size_t i = 0; i < byDim.size(); ++i)
    perm[i] = std::find(dims.begin(), dims.end(), byDim[i]) - dims.begin();
  Value natural = b.transpose(sorted, perm);
  // Re-insert size-1 dims and broadcast stride-0 dims.
  const std::vector<int64_t>& keptDims = byDim;
  out = keptDims.size() == v.sizes.size() ? natural : b.broadcastInDim(natural, v.sizes, keptDims);
  return true;
}

// Reading a non-overlapping strided view without a gather: the dims sorted by
// stride become a reshape of the flat range, then a slice of that block.
bool tryBlockRead(hlo::Builder& b, Value flat, const ViewSpec& v, Value& out, const Value* offset) {
  std::vector<int64_t> dims;
  if (!blockDims(v, dims)) return false;
  hlo::Shape block, limits;
  blockShapes(v, dims, block, limits);
  int64_t length = std::accumulate(block.begin(), block.end(), int64_t{1}, std::multiplies<>());
  int64_t available = flat.shape()[0];
  int64_t end = std::min(available, v.offset + length);
  Value range;
  if (offset) {
    // The view's own range (in bounds at every valid offset), padded to whole blocks: the last block
    // runs past the last element the view touches by a constant of the view's shape. Padding the range,
    // not the storage, lets XLA fuse the read into its user instead of copying the whole storage.
    int64_t extent = viewExtent(v);
    range = b.dynamicSlice(flat, {offset, 1}, {extent});
    if (length > extent) range = b.pad(range, b.constant(flat.dtype(), 0), {0}, {length - extent}, {0});
    return finishBlockRead(b, b.reshape(range, block), v, dims, block, limits, out);
  }
  range = b.slice(flat, {v.offset}, {end}, {1});
  if (end - v.offset < length)
    range = b.pad(range, b.constant(flat.dtype(), 0), {0}, {v.offset + length - end}, {0});
  return finishBlockRead(b, b.reshape(range, block), v, dims, block, limits, out);
}
// Writing a non-overlapping strided view without a scatter: the block range the view lies in is read,
// the values (in stride order) replace its leading box, and the range is written back. XLA compiles
// and runs a scatter element by element; this is a slice update.
bool tryBlockWrite(hlo::Builder& b, Value& flat, const ViewSpec& v, Value values, const Value* offset) {
  std::vector<int64_t> dims;
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.sizes[i] > 1 && v.strides[i] == 0) return false;  // an expanded view writes one element twice
  if (!blockDims(v, dims) || dims.empty()) return false;
  hlo::Shape block, box;
  blockShapes(v, dims, block, box);
  // The values with size-1 dims dropped, in stride order, as the block's leading box.
  std::vector<int64_t> byDim = dims, perm(dims.size());
  std::sort(byDim.begin(), byDim.end());
  hlo::Shape naturalSizes;
  for (int64_t d : byDim) naturalSizes.push_back(v.sizes[d]);
  for (size_t i = 0; i < dims.size(); ++i)
    perm[i] = std::find(byDim.begin(), byDim.end(), dims[i]) - byDim.begin();
  Value boxed = b.reshape(b.transpose(b.reshape(values, naturalSizes), perm), box);
  int64_t length = std::accumulate(block.begin(), block.end(), int64_t{1}, std::multiplies<>());
  int64_t available = flat.shape()[0];
  // The last block may run past the storage's end (by at most length - extent at any valid offset).
  int64_t over = offset ? length - viewExtent(v) : v.offset + length - available;
  Value padded = over > 0 ? b.pad(flat, b.constant(flat.dtype(), 0), {0}, {over}, {0}) : flat;
  Value start = offset ? *offset : b.constantInt(DType::S64, v.offset);
  Value region = b.reshape(b.dynamicSlice(padded, {&start, 1}, {length}), block);
  std::vector<Value> zeros(block.size(), b.constantInt(DType::S64, 0));
  Value updated = b.reshape(b.dynamicUpdateSlice(region, boxed, zeros), {length});
  Value written = b.dynamicUpdateSlice(padded, updated, {&start, 1});
  flat = over > 0 ? b.slice(written, {0}, {available}, {1}) : written;
  return true;
}
}  // namespace

bool offsetCanBeOperand(const ViewSpec& v, int64_t storageElems, bool write) {
  if (v.offset == 0 || v.numel() == 0) return false;
  if (write || v.isContiguous()) return true;
  return v.offset + viewExtent(v) <= storageElems;  // a valid view always is: reads its storage only
}

Value readView(hlo::Builder& b, Value flat, const ViewSpec& v, const Value* offset) {
  hlo::Type t{v.dtype, v.sizes};
  int64_t n = v.numel();
  if (n == 0) return b.full(t, 0);
  if (v.isContiguous()) {
    Value range = offset ? b.dynamicSlice(flat, {offset, 1}, {n}) : b.slice(flat, {v.offset}, {v.offset + n}, {1});
    return b.reshape(range, v.sizes);
  }
  Value out;
  if (tryBlockRead(b, flat, v, out, offset)) return out;
  // Overlapping or irregular strides (unfold, as_strided): one point gather.
  Value idx = b.reshape(elementIndices(b, v, offset), [&] {
    hlo::Shape s = v.sizes;
    s.push_back(1);
    return s;
  }());
  return b.gather(flat, idx, pointGatherDims(static_cast<int64_t>(v.sizes.size())), {1}, v.sizes);
}

Value writeView(hlo::Builder& b, Value flat, const ViewSpec& v, Value values, const Value* offset) {
  int64_t n = v.numel();
  if (n == 0) return flat;
  values = b.convert(values, flat.dtype());
  if (v.isContiguous()) {
    Value start = offset ? *offset : b.constantInt(DType::S64, v.offset);
    return b.dynamicUpdateSlice(flat, b.reshape(values, {n}), {&start, 1});
  }
  if (tryBlockWrite(b, flat, v, values, offset)) return flat;
  hlo::Shape idxShape = v.sizes;
  idxShape.push_back(1);
  Value idx = b.reshape(elementIndices(b, v, offset), idxShape);
  hlo::ScatterDims d;
  d.insertedWindowDims = {0};
  d.scatterDimsToOperandDims = {0};
  d.indexVectorDim = static_cast<int64_t>(v.sizes.size());
  return b.scatter(flat, idx, values, d, [](hlo::Builder&, std::span<const Value> args) {
    return std::vector<Value>{args[1]};
  });
}

}  // namespace tpu::runtime
