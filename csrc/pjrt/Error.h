#pragma once
// Turns PJRT_Error objects into C++ exceptions carrying the plugin's message.
#include <stdexcept>
#include <string>
#include <string_view>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

class PjrtError : public std::runtime_error {
 public:
  PjrtError(const std::string& msg, int code) : std::runtime_error(msg), code_(code) {}
  int code() const { return code_; }  // PJRT_Error_Code value
  // Plugins differ: RESOURCE_EXHAUSTED, or an INTERNAL error whose text says so.
  bool outOfMemory() const {
    std::string_view w = what();
    return code_ == PJRT_Error_Code_RESOURCE_EXHAUSTED || w.find("out of memory") != w.npos ||
           w.find("Out of memory") != w.npos || w.find("llocat") != w.npos;
  }
 private:
  int code_;
};

// Raises PjrtError when `err` is non-null; always destroys it.
void check(const PJRT_Api* api, PJRT_Error* err, const char* what);
// Destroys `err` (if any) without raising: for destructors.
void ignore(const PJRT_Api* api, PJRT_Error* err) noexcept;

// Zero-initialised PJRT argument struct with its struct_size filled in.
template <class Args>
Args makeArgs(size_t structSize) {
  Args a{};
  a.struct_size = structSize;
  return a;
}
#define TPU_PJRT_ARGS(T) ::tpu::pjrt::makeArgs<T>(T##_STRUCT_SIZE)

}  // namespace tpu::pjrt
