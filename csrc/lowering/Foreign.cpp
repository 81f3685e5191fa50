#include "Foreign.h"

#include <stdexcept>

namespace tpu::lowering {

std::vector<hlo::Value> foreignCall(hlo::Builder& b, int64_t id, const runtime::ForeignFunction& f,
                                    std::span<const hlo::Value> inputs) {
  if (inputs.size() != f.inputs.size())
    throw std::invalid_argument(f.name + ": expected " + std::to_string(f.inputs.size()) + " inputs, got " +
                                std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].dtype() != f.inputs[i].dtype || inputs[i].shape() != f.inputs[i].shape)
      throw std::invalid_argument(f.name + ": input " + std::to_string(i) + " does not have the exported type");
  b.addFunction(id, f.text);
  return b.call(f.symbol, inputs, f.outputs);
}

}  // namespace tpu::lowering
