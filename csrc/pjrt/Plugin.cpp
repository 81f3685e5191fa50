#include "Plugin.h"

#include <dlfcn.h>

#include <stdexcept>

#include "Error.h"

namespace tpu::pjrt {

std::shared_ptr<Plugin> Plugin::load(const std::string& path, void (*afterOpen)(void* handle)) {
  // RTLD_LOCAL keeps the plugin's bundled LLVM/absl symbols away from torch's.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw std::runtime_error(std::string("dlopen failed: ") + dlerror());
  if (afterOpen) afterOpen(handle);
  using GetApiFn = const PJRT_Api* (*)();
  auto getApi = reinterpret_cast<GetApiFn>(dlsym(handle, "GetPjrtApi"));
  if (!getApi) {
    dlclose(handle);
    throw std::runtime_error("library has no GetPjrtApi symbol");
  }
  const PJRT_Api* api = getApi();
  if (!api) throw std::runtime_error("GetPjrtApi returned null");
  if (api->pjrt_api_version.major_version != PJRT_API_MAJOR) {
    throw std::runtime_error("PJRT C API major version " +
                             std::to_string(api->pjrt_api_version.major_version) +
                             " does not match the version torch_tpu was built for (" +
                             std::to_string(PJRT_API_MAJOR) + ")");
  }
  if (api->PJRT_Plugin_Initialize) {
    auto args = TPU_PJRT_ARGS(PJRT_Plugin_Initialize_Args);
    check(api, api->PJRT_Plugin_Initialize(&args), "PJRT_Plugin_Initialize");
  }
  return std::shared_ptr<Plugin>(new Plugin(handle, api, path));
}

std::string Plugin::versionAttribute(const std::string& name) const {
  if (!api_->PJRT_Plugin_Attributes) return "";
  auto args = TPU_PJRT_ARGS(PJRT_Plugin_Attributes_Args);
  check(api_, api_->PJRT_Plugin_Attributes(&args), "PJRT_Plugin_Attributes");
  for (size_t i = 0; i < args.num_attributes; ++i) {
    const PJRT_NamedValue& a = args.attributes[i];
    if (std::string(a.name, a.name_size) != name || a.type != PJRT_NamedValue_kInt64List) continue;
    std::string out;
    for (size_t k = 0; k < a.value_size; ++k) out += (k ? "." : "") + std::to_string(a.int64_array_value[k]);
    return out;
  }
  return "";
}

// The plugin stays mapped: its threads and static objects may outlive us.
Plugin::~Plugin() = default;

}  // namespace tpu::pjrt
