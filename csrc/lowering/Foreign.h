#pragma once
// Calling a registered foreign function (runtime/ForeignFunctions.h) from a program.
#include <span>
#include <vector>

#include "csrc/hlo/Builder.h"
#include "csrc/runtime/ForeignFunctions.h"

namespace tpu::lowering {

// Adds the function's text to the module (once per program) and calls it on `inputs`, which must have its
// input types exactly; returns its results.
std::vector<hlo::Value> foreignCall(hlo::Builder& b, int64_t id, const runtime::ForeignFunction& f,
                                    std::span<const hlo::Value> inputs);

}  // namespace tpu::lowering
