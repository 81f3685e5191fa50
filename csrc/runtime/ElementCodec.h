#pragma once
// Element types and scalar bytes as the PJRT client takes them.
#include "csrc/hlo/Type.h"
#include "csrc/pjrt/ElementType.h"

namespace tpu::runtime {

pjrt::ElementType toElementType(hlo::DType t);
// Host bytes of one element of `t` holding `f` (floats) or `i` (integers); not for complex or float8.
void encodeElement(hlo::DType t, double f, int64_t i, unsigned char* out);

}  // namespace tpu::runtime
