#include "ElementCodec.h"

#include <cstring>
#include <stdexcept>

namespace tpu::runtime {

using hlo::DType;

pjrt::ElementType toElementType(DType t) {
  switch (t) {
    case DType::Pred: return pjrt::ElementType::Pred;
    case DType::S8: return pjrt::ElementType::S8;
    case DType::S16: return pjrt::ElementType::S16;
    case DType::S32: return pjrt::ElementType::S32;
    case DType::S64: return pjrt::ElementType::S64;
    case DType::U8: return pjrt::ElementType::U8;
    case DType::U32: return pjrt::ElementType::U32;
    case DType::U64: return pjrt::ElementType::U64;
    case DType::F16: return pjrt::ElementType::F16;
    case DType::BF16: return pjrt::ElementType::BF16;
    case DType::F32: return pjrt::ElementType::F32;
    case DType::F64: return pjrt::ElementType::F64;
    case DType::C64: return pjrt::ElementType::C64;
    case DType::C128: return pjrt::ElementType::C128;
    case DType::F8E4M3FN: return pjrt::ElementType::F8E4M3FN;
    case DType::F8E5M2: return pjrt::ElementType::F8E5M2;
    case DType::F8E4M3FNUZ: return pjrt::ElementType::F8E4M3FNUZ;
    case DType::F8E5M2FNUZ: return pjrt::ElementType::F8E5M2FNUZ;
    case DType::F8E8M0FNU: return pjrt::ElementType::F8E8M0FNU;
  }
  throw std::logic_error("unknown dtype");
}

void encodeElement(DType t, double f, int64_t i, unsigned char* out) {
  switch (t) {
    case DType::Pred: out[0] = i != 0; break;
    case DType::S8: { int8_t v = static_cast<int8_t>(i); std::memcpy(out, &v, 1); break; }
    case DType::U8: { uint8_t v = static_cast<uint8_t>(i); std::memcpy(out, &v, 1); break; }
    case DType::S16: { int16_t v = static_cast<int16_t>(i); std::memcpy(out, &v, 2); break; }
    case DType::S32: { int32_t v = static_cast<int32_t>(i); std::memcpy(out, &v, 4); break; }
    case DType::U32: { uint32_t v = static_cast<uint32_t>(i); std::memcpy(out, &v, 4); break; }
    case DType::S64:
    case DType::U64: std::memcpy(out, &i, 8); break;
    case DType::F16: { _Float16 v = static_cast<_Float16>(f); std::memcpy(out, &v, 2); break; }
    case DType::BF16: {
      float v = static_cast<float>(f);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      uint16_t h = (v != v) ? 0x7FC0 : static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
      std::memcpy(out, &h, 2);
      break;
    }
    case DType::F32: { float v = static_cast<float>(f); std::memcpy(out, &v, 4); break; }
    case DType::F64: std::memcpy(out, &f, 8); break;
    case DType::C64:
    case DType::C128: throw std::logic_error("encodeElement: complex scalars are encoded by their parts");
    default: throw std::logic_error("encodeElement: float8 scalars travel as float32 (HostOperand::scalar)");
  }
}

}  // namespace tpu::runtime
