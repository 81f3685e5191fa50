#pragma once
// Functions from other modules (JAX exports: torch_tpu.pallas) that programs call and the module printer
// inlines. Registered once per shape signature; the id is the program's cache identity for that function,
// so no module text is hashed or compared on the hot path.
#include <cstdint>
#include <string>
#include <vector>

#include "csrc/hlo/Type.h"

namespace tpu::runtime {

struct ForeignFunction {
  std::string name;    // the torch op ("ns::name"), for messages and logs
  std::string symbol;  // the entry function's symbol in `text`
  std::string text;    // private func.func ops in generic form, symbols renamed apart from @main
  std::vector<hlo::Type> inputs, outputs;
};

// Checks the text (see ForeignFunctions.cpp) and returns the function's id; throws std::invalid_argument.
int64_t registerForeignFunction(ForeignFunction f);
// The registered function (references stay valid: entries are never removed).
const ForeignFunction& foreignFunction(int64_t id);
size_t foreignFunctionCount();

}  // namespace tpu::runtime
