#include "Type.h"

namespace tpu::hlo {

const char* mlirName(DType t) {
  switch (t) {
    case DType::Pred: return "i1";
    case DType::S8: return "i8";
    case DType::S16: return "i16";
    case DType::S32: return "i32";
    case DType::S64: return "i64";
    case DType::U8: return "ui8";
    case DType::U32: return "ui32";
    case DType::U64: return "ui64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::C64: return "complex<f32>";
    case DType::C128: return "complex<f64>";
    case DType::F8E4M3FN: return "f8E4M3FN";
    case DType::F8E5M2: return "f8E5M2";
    case DType::F8E4M3FNUZ: return "f8E4M3FNUZ";
    case DType::F8E5M2FNUZ: return "f8E5M2FNUZ";
    case DType::F8E8M0FNU: return "f8E8M0FNU";
  }
  return "?";
}

bool isFloat8(DType t) {
  return t == DType::F8E4M3FN || t == DType::F8E5M2 || t == DType::F8E4M3FNUZ || t == DType::F8E5M2FNUZ ||
         t == DType::F8E8M0FNU;
}

bool isFloat(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64 || isFloat8(t);
}

bool isComplex(DType t) { return t == DType::C64 || t == DType::C128; }

DType componentType(DType t) {
  if (t == DType::C64) return DType::F32;
  if (t == DType::C128) return DType::F64;
  return t;
}

DType complexOf(DType t) { return t == DType::F64 || t == DType::C128 ? DType::C128 : DType::C64; }

bool isSigned(DType t) {
  return t == DType::S8 || t == DType::S16 || t == DType::S32 || t == DType::S64;
}

size_t byteWidth(DType t) {
  switch (t) {
    case DType::Pred:
    case DType::S8:
    case DType::U8:
    case DType::F8E4M3FN:
    case DType::F8E5M2:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2FNUZ:
    case DType::F8E8M0FNU: return 1;
    case DType::S16:
    case DType::F16:
    case DType::BF16: return 2;
    case DType::S32:
    case DType::U32:
    case DType::F32: return 4;
    case DType::S64:
    case DType::U64:
    case DType::F64:
    case DType::C64: return 8;
    case DType::C128: return 16;
  }
  return 0;
}

int64_t Type::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void Type::print(std::string& out) const {
  out += "tensor<";
  for (int64_t d : shape) {
    out += std::to_string(d);
    out += 'x';
  }
  out += mlirName(dtype);
  out += '>';
}

std::string Type::str() const {
  std::string s;
  print(s);
  return s;
}

}  // namespace tpu::hlo
