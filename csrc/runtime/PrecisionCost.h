#pragma once
// The cost of exact float32 dots on TPU: its matrix units multiply bfloat16, so XLA computes a float32 dot
// at precision HIGH as 3 bf16 passes and at HIGHEST as 6. PyTorch's default ("highest") is therefore ~6x
// slower there than the one pass JAX users get by default; users should know once, and how to choose.
#include <string>

namespace tpu::runtime {

// The warning for `module` compiled on `platform` ("" when none applies: not a TPU, or no float dot asks
// for HIGH/HIGHEST).
std::string dotPrecisionCost(const std::string& platform, const std::string& module);
// Warns (ErrorHooks::warn) at most once per precision level per process; called before each compile.
void warnDotPrecisionCostOnce(const std::string& platform, const std::string& module);

}  // namespace tpu::runtime
