#pragma once
// Conversions into and out of the float8 formats with PyTorch's rules (torch 2.13 on CPU), so that
// a tensor converted on tpu holds the same bits as one converted on CPU.
#include "Builder.h"

namespace tpu::hlo {

// Any real or integer value -> float8 format `to`, through float32 as torch converts.
Value toFloat8(Builder& b, Value x, DType to);
// A float8 value -> float32 (exact).
Value fromFloat8(Builder& b, Value x);

}  // namespace tpu::hlo
