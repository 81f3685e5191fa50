#include "Shape.h"

#include "Elementwise.h"

namespace tpu::lowering {

Value concat(Builder& b, std::span<const Value> xs, int64_t dim, DType to) {
  std::vector<Value> converted;
  for (const Value& x : xs) converted.push_back(b.convert(x, to));
  return b.concatenate(converted, dim);
}

Value triangle(Builder& b, Value x, Value diagonal, bool upper) {
  int64_t r = x.rank();
  hlo::Type t{DType::S64, x.shape()};
  // keep where (col - row) <= diagonal (tril) or >= diagonal (triu)
  Value diff = b.sub(b.iota(t, r - 1), b.iota(t, r - 2));
  Value keep = b.compare(upper ? hlo::Cmp::GE : hlo::Cmp::LE, diff, b.broadcast(diagonal, x.shape()));
  return b.select(keep, x, b.scalarLike(x, 0));
}

Value constantPad(Builder& b, Value x, Value value, const std::vector<int64_t>& lo,
                  const std::vector<int64_t>& hi) {
  std::vector<int64_t> interior(x.rank(), 0);
  return b.pad(x, b.convert(value, x.dtype()), lo, hi, interior);
}

Value roll(Builder& b, Value x, std::span<const Value> starts, const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    Value twice[2] = {x, x};
    Value doubled = b.concatenate(twice, d);
    std::vector<Value> offsets;
    Value zero = b.constantInt(DType::S64, 0);
    for (int64_t k = 0; k < x.rank(); ++k) offsets.push_back(k == d ? starts[i] : zero);
    x = b.dynamicSlice(doubled, offsets, x.shape());
  }
  return x;
}

Value clamp(Builder& b, Value x, const std::optional<Value>& lo, const std::optional<Value>& hi) {
  if (lo) x = maximumNan(b, x, *lo);
  if (hi) x = minimumNan(b, x, *hi);
  return x;
}

Value maskedFill(Builder& b, Value x, Value mask, Value value) {
  Value v = b.broadcast(b.convert(value, x.dtype()), x.shape());
  return b.select(broadcastTo(b, mask, x.shape()), v, x);
}

Value arange(Builder& b, Value start, Value step, int64_t n) {
  hlo::Shape shape{n};
  Value i = b.convert(b.iota(hlo::Type{DType::S64, shape}, 0), start.dtype());
  return b.add(b.broadcast(start, shape), b.mul(b.broadcast(step, shape), i));
}

Value linspace(Builder& b, Value start, Value end, int64_t steps, Value divisor) {
  hlo::Shape shape{steps};
  DType t = start.dtype();
  if (steps == 1) return b.broadcast(start, shape);
  // Integers: start and end are cast to the integer type, the step is float64.
  DType stepType = hlo::isFloat(t) ? t : DType::F64;
  Value s = b.convert(start, stepType), e = b.convert(end, stepType);
  // steps - 1 arrives as an operand: XLA turns a division by a constant into a multiplication by its
  // reciprocal, which is not exact (linspace(50, 1, 50) as int64 would truncate 24.999... to 24).
  Value step = b.div(b.sub(e, s), b.convert(divisor, stepType));
  Value i = b.iota(hlo::Type{DType::S64, shape}, 0);
  Value fi = b.convert(i, stepType);
  Value stepB = b.broadcast(step, shape);
  Value up = b.add(b.broadcast(s, shape), b.mul(stepB, fi));
  Value fromEnd = b.convert(b.sub(b.full(hlo::Type{DType::S64, shape}, static_cast<double>(steps - 1)), i), stepType);
  Value down = b.sub(b.broadcast(e, shape), b.mul(stepB, fromEnd));
  Value firstHalf = b.compare(hlo::Cmp::LT, i, b.full(hlo::Type{DType::S64, shape}, static_cast<double>(steps / 2)));
  return b.select(firstHalf, up, down);
}

Value eye(Builder& b, int64_t n, int64_t m) {
  hlo::Type t{DType::S64, {n, m}};
  return b.compare(hlo::Cmp::EQ, b.iota(t, 0), b.iota(t, 1));
}

}  // namespace tpu::lowering
