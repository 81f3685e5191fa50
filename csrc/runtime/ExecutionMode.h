#pragma once
// Eager-mode policy over the op stream (DESIGN.md §4) and the hooks through
// which the torch-free runtime reports errors to the user.
//
// Strict: ops launch asynchronously; the host waits only at sync points.
// Debug:  as strict, but the executor waits after every op and checks it
//         (non-finite values, out-of-range indices, device failures).
// Fused:  ops are deferred into one graph per sync point (FusedGraph.h).
#include <optional>
#include <string>
#include <string_view>

namespace tpu::runtime {

enum class EagerMode : int { Strict = 0, Debug = 1, Fused = 2 };

EagerMode eagerMode();  // process-wide (autograd runs backward ops on its own threads)
void setEagerMode(EagerMode m);
const char* eagerModeName(EagerMode m);
std::optional<EagerMode> parseEagerMode(std::string_view name);
// "'strict', 'debug'": the modes this build implements, for error messages.
const char* availableEagerModes();

// TORCH_TPU_DEBUG_NONFINITE=raise (default) | warn | off, read on each check.
enum class NonFinitePolicy { Raise, Warn, Off };
NonFinitePolicy nonFinitePolicy();

enum class ErrorKind { Index, Runtime, OutOfMemory };

// Installed by the torch layer: raise c10 errors (IndexError, ...), warn
// through TORCH_WARN, name the op being dispatched and the user's Python line.
struct ErrorHooks {
  void (*raise)(ErrorKind, const std::string&) = nullptr;  // must throw
  void (*warn)(const std::string&) = nullptr;
  std::string (*currentOp)() = nullptr;     // innermost dispatched op ("" if unknown)
  std::string (*userLocation)() = nullptr;  // "file.py:12" ("" if unknown)
};
void setErrorHooks(const ErrorHooks& hooks);

[[noreturn]] void raiseError(ErrorKind kind, const std::string& msg);
void warnUser(const std::string& msg);
// The dispatched op's name in debug mode ("aten::div.Tensor"), else `fallback`.
std::string currentOpName(const char* fallback);
// ", called at file.py:12" or "".
std::string calledAt();

}  // namespace tpu::runtime
