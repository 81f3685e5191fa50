#include "CompileOptions.h"

namespace tpu::pjrt {
namespace {

// Protobuf wire format: varint (type 0) and length-delimited (type 2) fields.
void putVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void putIntField(std::string& out, int field, int64_t v) {
  putVarint(out, static_cast<uint64_t>(field) << 3);
  putVarint(out, static_cast<uint64_t>(v));
}

void putMessageField(std::string& out, int field, const std::string& msg) {
  putVarint(out, (static_cast<uint64_t>(field) << 3) | 2);
  putVarint(out, msg.size());
  out += msg;
}

// xla.ExecutableBuildOptionsProto field numbers.
constexpr int kDeviceOrdinal = 1;
constexpr int kNumReplicas = 4;
constexpr int kNumPartitions = 5;
// xla.CompileOptionsProto field numbers.
constexpr int kExecutableBuildOptions = 3;
constexpr int kCompilePortableExecutable = 4;

}  // namespace

std::string encodeCompileOptions(const CompileOptions& opts) {
  std::string build;
  putIntField(build, kDeviceOrdinal, opts.deviceOrdinal);
  putIntField(build, kNumReplicas, opts.numReplicas);
  putIntField(build, kNumPartitions, opts.numPartitions);
  std::string out;
  putMessageField(out, kExecutableBuildOptions, build);
  if (opts.portable) putIntField(out, kCompilePortableExecutable, 1);
  return out;
}

}  // namespace tpu::pjrt
