#pragma once
// Element types the runtime moves between host and device, independent of torch.
#include <cstddef>
#include <cstdint>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

enum class ElementType : uint8_t { Pred, S8, S16, S32, S64, U8, U32, U64, F16, BF16, F32, F64, C64, C128 };

PJRT_Buffer_Type toPjrt(ElementType t);
size_t byteWidth(ElementType t);

}  // namespace tpu::pjrt
