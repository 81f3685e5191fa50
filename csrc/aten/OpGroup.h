// Runs a kernel built from other ATen ops as one program in Strict mode (an op group: Executor::beginOpGroup),
// so a foreach loop or an attention's matmuls and softmax are one launch, not one per op. A repeated group binds
// to its recorded program (fused replay) without tracing. Where ops fuse already (Fused mode, a compiled graph)
// and in Debug mode, which keeps its per-op checks, the kernel runs as is.
#pragma once

#include <type_traits>
#include <utility>

#include "csrc/runtime/ExecutionMode.h"
#include "csrc/runtime/Executor.h"

namespace tpu::aten {

template <class Fn>
auto asOneProgram(Fn&& fn) {
  runtime::Executor& ex = runtime::Executor::get();
  if (runtime::eagerMode() != runtime::EagerMode::Strict || !ex.beginOpGroup()) return std::forward<Fn>(fn)();
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<Fn>>) {
      std::forward<Fn>(fn)();
      ex.endOpGroup();
    } else {
      auto result = std::forward<Fn>(fn)();
      ex.endOpGroup();
      return result;
    }
  } catch (...) {
    try {  // what was traced still runs, so storages stay consistent
      ex.endOpGroup();
    } catch (...) {
    }
    throw;
  }
}

}  // namespace tpu::aten
