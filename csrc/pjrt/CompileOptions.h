#pragma once
// Hand-written encoder for the few fields of xla.CompileOptionsProto we set.
#include <cstdint>
#include <string>

namespace tpu::pjrt {

struct CompileOptions {
  int64_t numReplicas = 1;
  int64_t numPartitions = 1;
  int64_t deviceOrdinal = -1;
  // A portable executable is bound to no device: PJRT_LoadedExecutable_Execute
  // runs it on the `execute_device` it is given, so one program serves every device.
  bool portable = true;
};

// Serialized xla.CompileOptionsProto.
std::string encodeCompileOptions(const CompileOptions& opts);

}  // namespace tpu::pjrt
