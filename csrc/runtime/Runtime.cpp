#include "Runtime.h"

#include "HostMemoryPolicy.h"

#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace tpu::runtime {
namespace {

std::mutex gMutex;
std::vector<PluginCandidate> gCandidates;
Runtime* gRuntime = nullptr;
std::string gFailure;  // why the runtime could not start, once tried

const char* kInstallHint =
    "Install a PJRT plugin: `pip install xla-cpu-pjrt` (CPU), `pip install jax-cuda13-pjrt` (NVIDIA GPU) or "
    "`pip install libtpu` (TPU), or point TORCH_TPU_PJRT_PLUGIN at a plugin .so. `python -m torch_tpu.doctor` reports what was "
    "found (plugins, versions, devices, cache, environment).";

// A plugin whose device is the host: the CPU candidates, or an explicit plugin named so (xla_cpu_pjrt.so,
// pjrt_c_api_cpu_plugin.so).
bool isCpuPlugin(const PluginCandidate& c) {
  if (c.name == "cpu") return true;
  std::string file = c.path.substr(c.path.find_last_of('/') + 1);
  return c.name == "TORCH_TPU_PJRT_PLUGIN" && file.find("cpu") != std::string::npos;
}

// TORCH_TPU_CPU_DEVICES: how many devices a CPU plugin makes (its default is 4). XLA sizes the client's
// thread pools to max(cores, devices), so on a host with fewer cores than devices its threads outnumber the
// cores (docs/performance.md).
std::vector<pjrt::ClientOption> clientOptions(const PluginCandidate& c) {
  const char* value = std::getenv("TORCH_TPU_CPU_DEVICES");
  if (!isCpuPlugin(c) || !value || !*value) return {};
  char* end = nullptr;
  long n = std::strtol(value, &end, 10);
  if (*end || n < 1 || n > 2048) {
    throw std::invalid_argument(std::string("TORCH_TPU_CPU_DEVICES=") + value +
                                " is not a device count: use a whole number from 1 to 2048, or unset it for the "
                                "plugin's default (4)");
  }
  return {{"cpu_device_count", n}};
}

}  // namespace

void Runtime::configure(std::vector<PluginCandidate> candidates) {
  std::lock_guard<std::mutex> lock(gMutex);
  // Before any plugin thread exists (HostMemoryPolicy.h); the first candidate is the one that normally starts.
  if (!gRuntime && !candidates.empty() && isCpuPlugin(candidates.front())) applyHostMemoryPolicy();
  gCandidates = std::move(candidates);
}

Runtime& Runtime::get() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gRuntime) return *gRuntime;
  if (!gFailure.empty()) throw std::runtime_error(gFailure);
  std::string tried;
  for (const PluginCandidate& c : gCandidates) {
    try {
      std::vector<pjrt::ClientOption> options = clientOptions(c);  // a bad value fails before the plugin opens
      auto client = std::make_unique<pjrt::Client>(
          pjrt::Plugin::load(c.path, isCpuPlugin(c) ? &adoptPluginAllocations : nullptr), options);
      if (client->devices().empty()) throw std::runtime_error("the plugin reports no devices");
      gRuntime = new Runtime(std::move(client), c.name, c.path);  // lives for the process
      return *gRuntime;
    } catch (const std::exception& e) {
      tried += "\n  " + c.name + " (" + c.path + "): " + e.what();
    }
  }
  if (tried.empty()) tried = "\n  (no PJRT plugin found)";
  gFailure = "torch_tpu: no PJRT plugin could be started for device 'tpu'. Tried:" + tried + "\n" + kInstallHint;
  throw std::runtime_error(gFailure);
}

bool Runtime::available() {
  try {
    get();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

bool Runtime::started() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gRuntime != nullptr;
}

std::string Runtime::description() const {
  std::string platform = client_->platformName();
  std::string upper;
  for (char ch : platform) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return platform + " (XLA:" + upper + " via PJRT, plugin " + pluginName_ + ")";
}

}  // namespace tpu::runtime
