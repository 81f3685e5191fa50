// Foreach ops (an optimizer step's _foreach_mul_, _foreach_lerp_, _foreach_addcdiv_, ...) as one program per call.
//
// PyTorch has no device-generic foreach kernel: on tpu each `aten::_foreach_*` runs its CompositeExplicitAutograd
// loop, the per-tensor op once per list entry, which Strict mode launches as one program each (AdamW over a small
// GPT's 29 parameters: 8 foreach calls, 232 programs a step). Here that same loop runs as an op group (OpGroup.h),
// so a foreach call is one program whatever the list's length, compiled once per list signature.
// TORCH_TPU_FOREACH_PROGRAMS=0 (read at load) leaves the loop to PyTorch, one program per tensor.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "OpGroup.h"

namespace tpu::aten {
namespace {

void foreachAsOneProgram(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  asOneProgram([&] { op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd, *stack); });
}

// Every aten::_foreach_* overload with a CompositeExplicitAutograd loop and no tpu kernel of its own, registered
// when the extension loads (libtorch's operators are all defined by then).
struct ForeachRegistration {
  std::vector<std::unique_ptr<torch::Library>> libs;  // kept: a Library deregisters its kernels when destroyed
  ForeachRegistration() {
    const char* env = std::getenv("TORCH_TPU_FOREACH_PROGRAMS");  // "0": the loop's per-tensor programs (benchmarks)
    if (env != nullptr && std::string_view(env) == "0") return;
    auto& dispatcher = c10::Dispatcher::singleton();
    auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                                __FILE__, __LINE__);
    for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
      std::string_view base = name.name;
      if (base.rfind("aten::_foreach_", 0) != 0) continue;
      auto op = dispatcher.findOp(name);
      if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
          op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1))
        continue;
      std::string qualified = name.name.substr(std::string_view("aten::").size());
      if (!name.overload_name.empty()) qualified += "." + name.overload_name;
      lib->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&foreachAsOneProgram>());
    }
    libs.push_back(std::move(lib));
  }
};

const ForeachRegistration registration;

}  // namespace
}  // namespace tpu::aten
