#pragma once
// Hand-written encoder for the few fields of xla.CompileOptionsProto we set.
#include <cstdint>
#include <string>

namespace tpu::pjrt {

struct CompileOptions {
  int64_t numReplicas = 1;
  int64_t numPartitions = 1;
  int64_t deviceOrdinal = -1;
};

// Serialized xla.CompileOptionsProto.
std::string encodeCompileOptions(const CompileOptions& opts);

}  // namespace tpu::pjrt
