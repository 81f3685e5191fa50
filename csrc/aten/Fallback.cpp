// Ops without a tpu lowering: a clear NotImplementedError, or, with
// TORCH_TPU_CPU_FALLBACK=1, a run on the CPU (one warning per op).
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace tpu::aten {
namespace {

bool fallbackEnabled() {
  const char* env = std::getenv("TORCH_TPU_CPU_FALLBACK");
  return env && std::string(env) == "1";
}

void tpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  if (!fallbackEnabled()) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, schema.operator_name(), " is not implemented for tpu.\n  schema: ", schema,
                                "\n  Way out: set TORCH_TPU_CPU_FALLBACK=1 to run it on the CPU (slow), "
                                "or file an issue asking for a lowering.");
  }
  static std::mutex mutex;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    std::string name = schema.operator_name().name + "." + schema.overload_name();
    if (warned.insert(name).second) {
      TORCH_WARN("tpu: ", schema.operator_name(), " has no tpu lowering; running it on the CPU "
                 "(TORCH_TPU_CPU_FALLBACK=1). This copies its tensors between devices.");
    }
  }
  at::native::cpu_fallback(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpuFallback>());
}

}  // namespace tpu::aten
