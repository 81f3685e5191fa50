#pragma once
// Process-wide runtime: the chosen PJRT plugin and its client. Created on
// first use from the candidate plugins the Python layer discovered.
#include <memory>
#include <string>
#include <vector>

#include "csrc/pjrt/Client.h"

namespace tpu::runtime {

struct PluginCandidate {
  std::string name;  // "TORCH_TPU_PJRT_PLUGIN", "libtpu", "cuda", "cpu"
  std::string path;
};

class Runtime {
 public:
  // Sets the candidates tried, in order, by the first get(). Before any get().
  static void configure(std::vector<PluginCandidate> candidates);
  // The runtime; throws std::runtime_error naming every plugin tried when none starts.
  static Runtime& get();
  // True when get() would succeed; never throws.
  static bool available();
  // True once get() has started a plugin (never starts one).
  static bool started();

  pjrt::Client& client() { return *client_; }
  size_t deviceCount() const { return client_->devices().size(); }
  const std::string& pluginPath() const { return pluginPath_; }
  const std::string& pluginName() const { return pluginName_; }
  // "cpu (XLA:CPU via PJRT)"-style description of what really runs the ops.
  std::string description() const;

 private:
  Runtime(std::unique_ptr<pjrt::Client> client, std::string name, std::string path)
      : client_(std::move(client)), pluginName_(std::move(name)), pluginPath_(std::move(path)) {}
  std::unique_ptr<pjrt::Client> client_;
  std::string pluginName_, pluginPath_;
};

}  // namespace tpu::runtime
