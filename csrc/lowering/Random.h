#pragma once
// Random number lowerings over Philox (stablehlo.rng_bit_generator). Torch-free.
// `state` is a u64[2] device operand {seed, offset}: the offset counts 32-bit
// words already used (a multiple of 4, one Philox block); a lowering that
// consumes W words must be given an offset range of W words of its own.
// Results are flat ([n]); callers reshape.
#include "Elementwise.h"

namespace tpu::lowering {

// 32-bit words consumed per element: one, two for 64-bit values.
inline int64_t wordsPerElement(bool wide) { return wide ? 2 : 1; }
// Words a normal() of n elements consumes (pairs of uniforms).
inline int64_t normalWords(int64_t n, bool wide) { return (n + 1) / 2 * 2 * wordsPerElement(wide); }

Value randomBits32(Builder& b, Value state, int64_t n);  // u32[n]
Value randomBits64(Builder& b, Value state, int64_t n);  // u64[n], two words each

// n uniform values in [0, 1) of dtype `t` (F32, or F64 with 64-bit words) that
// are multiples of 2^-digits (digits <= 24 for F32, <= 53 for F64).
Value uniform01(Builder& b, Value state, int64_t n, DType t, int digits);
// n standard normal values (Box-Muller; never log(0)) of dtype F32 or F64.
Value normal(Builder& b, Value state, int64_t n, DType t);
// n integers `from + bits % range` (s64, wrapping): `from` an s64 and `range`
// a u64 scalar. wide: 64-bit draws; full: every int64 value (from/range unused).
Value randomInt(Builder& b, Value state, int64_t n, Value from, Value range, bool wide, bool full);

}  // namespace tpu::lowering
