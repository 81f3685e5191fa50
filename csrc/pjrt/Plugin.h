#pragma once
// Loading a PJRT plugin shared library and checking its C API version.
#include <memory>
#include <string>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

class Plugin {
 public:
  // dlopen + GetPjrtApi + version check + PJRT_Plugin_Initialize. Throws
  // std::runtime_error with the reason when the library cannot be used. `afterOpen` gets the dlopen handle
  // before any of the plugin's functions runs (the host memory policy hooks its allocations there).
  static std::shared_ptr<Plugin> load(const std::string& path, void (*afterOpen)(void* handle) = nullptr);
  ~Plugin();

  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  int apiMajor() const { return api_->pjrt_api_version.major_version; }
  int apiMinor() const { return api_->pjrt_api_version.minor_version; }
  // An int64-array plugin attribute printed as "a.b.c" (`stablehlo_current_version`,
  // `stablehlo_minimum_version`), or "" where the plugin does not report it.
  std::string versionAttribute(const std::string& name) const;

 private:
  Plugin(void* handle, const PJRT_Api* api, std::string path)
      : handle_(handle), api_(api), path_(std::move(path)) {}
  void* handle_;
  const PJRT_Api* api_;
  std::string path_;
};

}  // namespace tpu::pjrt
