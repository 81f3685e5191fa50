#pragma once
// A compiled, loaded PJRT program.
#include <memory>
#include <string>
#include <vector>

#include "Buffer.h"
#include "pjrt_c_api.h"

namespace tpu::pjrt {

class Executable {
 public:
  Executable(const PJRT_Api* api, PJRT_LoadedExecutable* exe);
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  ~Executable();

  size_t numOutputs() const { return numOutputs_; }
  // Enqueues the program on `device`; returns at once with the (not yet
  // defined) output buffers. PJRT orders it after the producers of `args`.
  // `done`, when given, receives an event that fires when the program has finished.
  std::vector<std::unique_ptr<Buffer>> execute(const std::vector<PJRT_Buffer*>& args, PJRT_Device* device,
                                               Event* done = nullptr) const;
  // Bytes that Client::deserialize turns back into an equivalent executable.
  std::string serialize() const;

 private:
  const PJRT_Api* api_;
  PJRT_LoadedExecutable* exe_;
  PJRT_Executable* unloaded_ = nullptr;
  size_t numOutputs_ = 0;
};

}  // namespace tpu::pjrt
