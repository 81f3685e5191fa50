#include "Random.h"

#include <cmath>

namespace tpu::lowering {
namespace {

Value shiftRight(Builder& b, Value x, int64_t bits) {
  return b.binary("shift_right_logical", x, b.broadcast(b.constantInt(x.dtype(), bits), x.shape()));
}

Value shiftLeft(Builder& b, Value x, int64_t bits) {
  return b.binary("shift_left", x, b.broadcast(b.constantInt(x.dtype(), bits), x.shape()));
}

}  // namespace

Value randomBits32(Builder& b, Value state, int64_t n) {
  // Philox state {key, counter}: one counter step is one block of four words.
  Value key = b.slice(state, {0}, {1}, {1});
  Value counter = shiftRight(b, b.slice(state, {1}, {2}, {1}), 2);
  Value parts[] = {key, counter};
  Value philox = b.concatenate(parts, 0);
  return b.rngBitGenerator(philox, hlo::Type{DType::U32, {n}}).second;
}

Value randomBits64(Builder& b, Value state, int64_t n) {
  Value words = b.convert(b.reshape(randomBits32(b, state, 2 * n), {n, 2}), DType::U64);
  Value hi = b.reshape(b.slice(words, {0, 0}, {n, 1}, {1, 1}), {n});
  Value lo = b.reshape(b.slice(words, {0, 1}, {n, 2}, {1, 1}), {n});
  return b.binary("or", shiftLeft(b, hi, 32), lo);
}

Value uniform01(Builder& b, Value state, int64_t n, DType t, int digits) {
  if (t == DType::F64) {
    Value bits = shiftRight(b, randomBits64(b, state, n), 64 - digits);
    return b.mul(b.convert(bits, DType::F64), b.full(hlo::Type{DType::F64, {n}}, std::ldexp(1.0, -digits)));
  }
  Value bits = shiftRight(b, randomBits32(b, state, n), 32 - digits);
  return b.mul(b.convert(bits, DType::F32), b.full(hlo::Type{DType::F32, {n}}, std::ldexp(1.0, -digits)));
}

Value normal(Builder& b, Value state, int64_t n, DType t) {
  int64_t m = (n + 1) / 2;
  Value u = uniform01(b, state, 2 * m, t, t == DType::F64 ? 53 : 24);
  // u1 in (0, 1] so the log is finite; u2 in [0, 1).
  Value u1 = b.sub(b.full(hlo::Type{t, {m}}, 1.0), b.slice(u, {0}, {m}, {1}));
  Value u2 = b.slice(u, {m}, {2 * m}, {1});
  Value r = b.unary("sqrt", b.mul(b.full(hlo::Type{t, {m}}, -2.0), b.unary("log", u1)));
  Value theta = b.mul(b.full(hlo::Type{t, {m}}, 2 * M_PI), u2);
  Value parts[] = {b.mul(r, b.unary("cosine", theta)), b.mul(r, b.unary("sine", theta))};
  return b.slice(b.concatenate(parts, 0), {0}, {n}, {1});
}

Value randomInt(Builder& b, Value state, int64_t n, Value from, Value range, bool wide, bool full) {
  Value bits = wide || full ? randomBits64(b, state, n) : b.convert(randomBits32(b, state, n), DType::U64);
  if (full) return b.bitcastConvert(bits, hlo::Type{DType::S64, {n}});
  Value r = b.binary("remainder", bits, b.broadcast(range, {n}));
  Value base = b.bitcastConvert(from, hlo::Type{DType::U64, {}});
  return b.bitcastConvert(b.add(r, b.broadcast(base, {n})), hlo::Type{DType::S64, {n}});
}

}  // namespace tpu::lowering
