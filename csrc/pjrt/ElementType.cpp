#include "ElementType.h"

namespace tpu::pjrt {

PJRT_Buffer_Type toPjrt(ElementType t) {
  switch (t) {
    case ElementType::Pred: return PJRT_Buffer_Type_PRED;
    case ElementType::S8: return PJRT_Buffer_Type_S8;
    case ElementType::S16: return PJRT_Buffer_Type_S16;
    case ElementType::S32: return PJRT_Buffer_Type_S32;
    case ElementType::S64: return PJRT_Buffer_Type_S64;
    case ElementType::U8: return PJRT_Buffer_Type_U8;
    case ElementType::U32: return PJRT_Buffer_Type_U32;
    case ElementType::U64: return PJRT_Buffer_Type_U64;
    case ElementType::F16: return PJRT_Buffer_Type_F16;
    case ElementType::BF16: return PJRT_Buffer_Type_BF16;
    case ElementType::F32: return PJRT_Buffer_Type_F32;
    case ElementType::F64: return PJRT_Buffer_Type_F64;
    case ElementType::C64: return PJRT_Buffer_Type_C64;
    case ElementType::C128: return PJRT_Buffer_Type_C128;
    case ElementType::F8E4M3FN: return PJRT_Buffer_Type_F8E4M3FN;
    case ElementType::F8E5M2: return PJRT_Buffer_Type_F8E5M2;
    case ElementType::F8E4M3FNUZ: return PJRT_Buffer_Type_F8E4M3FNUZ;
    case ElementType::F8E5M2FNUZ: return PJRT_Buffer_Type_F8E5M2FNUZ;
    case ElementType::F8E8M0FNU: return PJRT_Buffer_Type_F8E8M0FNU;
  }
  return PJRT_Buffer_Type_INVALID;
}

size_t byteWidth(ElementType t) {
  switch (t) {
    case ElementType::Pred:
    case ElementType::S8:
    case ElementType::U8:
    case ElementType::F8E4M3FN:
    case ElementType::F8E5M2:
    case ElementType::F8E4M3FNUZ:
    case ElementType::F8E5M2FNUZ:
    case ElementType::F8E8M0FNU: return 1;
    case ElementType::S16:
    case ElementType::F16:
    case ElementType::BF16: return 2;
    case ElementType::S32:
    case ElementType::U32:
    case ElementType::F32: return 4;
    case ElementType::S64:
    case ElementType::U64:
    case ElementType::F64:
    case ElementType::C64: return 8;
    case ElementType::C128: return 16;
  }
  return 0;
}

}  // namespace tpu::pjrt
