#pragma once
// Foreign functions (JAX exports, torch_tpu.pallas) as tpu ops: registration with torch types and the
// kernel that runs one on tpu tensors, in every eager mode and inside compiled graphs.
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace tpu::aten {

struct ForeignSignature {
  std::vector<c10::ScalarType> dtypes;
  std::vector<std::vector<int64_t>> shapes;
};

// Registers `text` (private functions in generic form, entry `symbol`) for these input and output types.
int64_t registerForeign(const std::string& name, const std::string& symbol, const std::string& text,
                        const ForeignSignature& inputs, const ForeignSignature& outputs);
// Runs function `id` on `inputs` (tpu tensors of its input types, any strides) and returns new outputs.
std::vector<at::Tensor> runForeign(int64_t id, const std::vector<at::Tensor>& inputs);

}  // namespace tpu::aten
