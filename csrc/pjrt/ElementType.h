#pragma once
// Element types the runtime moves between host and device, independent of torch.
#include <cstddef>
#include <cstdint>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

enum class ElementType : uint8_t {
  Pred, S8, S16, S32, S64, U8, U32, U64, F16, BF16, F32, F64, C64, C128,
  F8E4M3FN, F8E5M2, F8E4M3FNUZ, F8E5M2FNUZ, F8E8M0FNU,
};

PJRT_Buffer_Type toPjrt(ElementType t);
size_t byteWidth(ElementType t);

}  // namespace tpu::pjrt
