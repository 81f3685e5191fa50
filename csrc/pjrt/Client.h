#pragma once
// A PJRT client: devices, host<->device transfers and compilation.
#include <memory>
#include <string>
#include <vector>

#include "Buffer.h"
#include "CompileOptions.h"
#include "ElementType.h"
#include "Executable.h"
#include "Plugin.h"

namespace tpu::pjrt {

// An integer option of PJRT_Client_Create (the CPU plugins' "cpu_device_count").
struct ClientOption {
  std::string name;
  int64_t value;
};

class Client {
 public:
  explicit Client(std::shared_ptr<Plugin> plugin, const std::vector<ClientOption>& options = {});
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  const PJRT_Api* api() const { return plugin_->api(); }
  const Plugin& plugin() const { return *plugin_; }
  const std::string& platformName() const { return platformName_; }
  const std::string& platformVersion() const { return platformVersion_; }
  const std::vector<PJRT_Device*>& devices() const { return devices_; }
  std::string deviceKind(size_t index) const;
  // PJRT_Device_MemoryStats: bytes in use and the limit (-1 where the plugin does not say).
  // False when the plugin does not implement it (the XLA CPU plugin).
  struct MemoryStats {
    int64_t bytesInUse = 0;
    int64_t bytesLimit = -1;
  };
  bool memoryStats(size_t index, MemoryStats& out) const;

  // Copies `data` (row-major, dense) into a new device buffer before returning.
  std::unique_ptr<Buffer> bufferFromHost(const void* data, ElementType type,
                                         const std::vector<int64_t>& dims, size_t device) const;
  // Starts that copy and returns without waiting for it: `data` must stay alive
  // and unchanged until `doneWithHost` fires (the buffer itself is usable at once;
  // programs that read it wait for its definition).
  struct AsyncUpload {
    std::unique_ptr<Buffer> buffer;
    Event doneWithHost;
  };
  AsyncUpload bufferFromHostAsync(const void* data, ElementType type, const std::vector<int64_t>& dims,
                                  size_t device) const;
  // A buffer that may alias `data` instead of copying it (kImmutableZeroCopy; the XLA CPU plugin
  // aliases 64-byte aligned dense data). `doneWithHost` fires once the plugin no longer reads `data`:
  // right after a copy, or, where it aliases, once the buffer and every program using it are gone.
  // Until then `data` must stay alive and unchanged.
  AsyncUpload bufferAliasingHost(const void* data, ElementType type, const std::vector<int64_t>& dims,
                                 size_t device) const;
  // Compiles StableHLO MLIR text.
  std::unique_ptr<Executable> compile(const std::string& mlir, const CompileOptions& opts) const;
  std::unique_ptr<Executable> deserialize(const std::string& bytes) const;

 private:
  AsyncUpload upload(const void* data, ElementType type, const std::vector<int64_t>& dims, size_t device,
                     PJRT_HostBufferSemantics semantics) const;

  std::shared_ptr<Plugin> plugin_;
  PJRT_Client* client_ = nullptr;
  std::vector<PJRT_Device*> devices_;
  std::string platformName_, platformVersion_;
};

}  // namespace tpu::pjrt
