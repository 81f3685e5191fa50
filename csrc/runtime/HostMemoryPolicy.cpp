#include "HostMemoryPolicy.h"

#include <malloc.h>

#include <cstdlib>
#include <stdexcept>

namespace tpu::runtime {
namespace {

const char* kVariable = "TORCH_TPU_HOST_MALLOC";
constexpr int kTrimAbove = 1 << 30;  // bytes free at the heap's top before malloc returns them
std::string gPolicy = "system (glibc malloc's defaults)";

}  // namespace

void applyHostMemoryPolicy() {
  const char* value = std::getenv(kVariable);
  std::string policy = value && *value ? value : "keep";
  if (policy == "system") return;
  if (policy != "keep") {
    throw std::invalid_argument(std::string(kVariable) + "=" + policy +
                                " is not a host malloc policy: use keep (the default on the CPU plugins: large "
                                "blocks stay mapped between program runs) or system (glibc's defaults)");
  }
  // mallopt returns 1 for a setting it took.
  bool ok = mallopt(M_ARENA_MAX, 1) == 1 && mallopt(M_MMAP_MAX, 0) == 1 &&
            mallopt(M_TRIM_THRESHOLD, kTrimAbove) == 1;
  gPolicy = ok ? "keep (glibc malloc: one arena, no mmap, trim above 1 GiB)"
               : "keep requested, but glibc refused a mallopt setting: its defaults may still apply";
}

std::string hostMemoryPolicy() { return gPolicy; }

}  // namespace tpu::runtime
