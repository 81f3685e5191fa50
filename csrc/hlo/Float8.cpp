#include "Float8.h"

namespace tpu::hlo {

namespace {

Value u32(Builder& b, Value like, int64_t v) {
  return b.broadcast(b.constantInt(DType::U32, v), like.shape());
}

// float8_e8m0fnu holds a biased exponent only. torch takes the float32 exponent and rounds up when the
// dropped mantissa is above one half, or exactly one half and the exponent is not zero; NaN and inf
// become NaN (0xFF), as does a round-up past 2^127. Sign is ignored.
Value toE8M0(Builder& b, Value f32) {
  Value bits = b.bitcastConvert(f32, Type{DType::U32, f32.shape()});
  Value exponent = b.binary("and", b.binary("shift_right_logical", bits, u32(b, bits, 23)), u32(b, bits, 0xFF));
  Value zero = u32(b, bits, 0);
  Value guard = b.compare(Cmp::NE, b.binary("and", bits, u32(b, bits, 0x400000)), zero);
  Value rest = b.compare(Cmp::NE, b.binary("and", bits, u32(b, bits, 0x3FFFFF)), zero);
  Value oddOrAbove = b.binary("or", rest, b.compare(Cmp::NE, exponent, zero));
  Value roundUp = b.binary("and", guard, oddOrAbove);
  Value special = b.compare(Cmp::EQ, exponent, u32(b, bits, 0xFF));
  Value rounded = b.select(roundUp, b.add(exponent, u32(b, bits, 1)), exponent);
  Value code = b.select(special, exponent, rounded);
  return b.bitcastConvert(b.convert(code, DType::U8), Type{DType::F8E8M0FNU, f32.shape()});
}

// Its value is 2^(code - 127); code 0 is 2^-127 (a float32 subnormal), 0xFF is NaN.
Value fromE8M0(Builder& b, Value x) {
  Value code = b.convert(b.bitcastConvert(x, Type{DType::U8, x.shape()}), DType::U32);
  Value zero = u32(b, code, 0);
  Value bits = b.binary("shift_left", code, u32(b, code, 23));
  bits = b.select(b.compare(Cmp::EQ, code, zero), u32(b, code, 0x400000), bits);
  bits = b.select(b.compare(Cmp::EQ, code, u32(b, code, 0xFF)), u32(b, code, 0x7FC00000), bits);
  return b.bitcastConvert(bits, Type{DType::F32, x.shape()});
}

}  // namespace

Value toFloat8(Builder& b, Value x, DType to) {
  x = b.convert(x, DType::F32);
  if (to == DType::F8E8M0FNU) return toE8M0(b, x);
  // torch saturates float8_e4m3fn (which has no infinity) at +-448, infinities included; NaN stays NaN.
  // The other formats round to nearest even as XLA does: e5m2 overflows to inf, the fnuz ones to NaN.
  if (to == DType::F8E4M3FN) x = b.clamp(b.constant(DType::F32, -448), x, b.constant(DType::F32, 448));
  return b.plainConvert(x, to);
}

Value fromFloat8(Builder& b, Value x) {
  if (x.dtype() == DType::F8E8M0FNU) return fromE8M0(b, x);
  return b.plainConvert(x, DType::F32);
}

}  // namespace tpu::hlo
