#include "MappingBudget.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace tpu::runtime {

size_t MappingBudget::cap() {
  if (const char* env = std::getenv("TORCH_TPU_MAX_MAP_COUNT")) return static_cast<size_t>(std::atol(env));
  static const size_t kernel = [] {
    std::ifstream f("/proc/sys/vm/max_map_count");
    size_t v = 0;
    return (f >> v) ? v : size_t{0};
  }();
  return kernel;
}

size_t MappingBudget::mappings() {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1 << 16];
  size_t lines = 0;
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
  ::close(fd);
  return lines;
}

bool MappingBudget::nearLimit() {
  const size_t limit = cap();
  if (limit == 0) return false;
  if (last_ < limit / 2 && ++calls_ % 16 != 0) return false;
  last_ = mappings();
  return last_ > limit / 4 * 3;
}

}  // namespace tpu::runtime
