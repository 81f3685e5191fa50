#pragma once
// Linux caps a process's memory mappings (vm.max_map_count, 65530 by default) and a process past it
// crashes inside the plugin. XLA:CPU maps each loaded program's code separately, and a large program
// (split for parallel code generation) takes dozens of mappings, so a bound on the number of cached
// programs alone does not keep a long run (many models, shapes and modes in one process) under the cap.
// The program caches ask this after each program they load and shed their older half when it says so.
#include <cstddef>

namespace tpu::runtime {

class MappingBudget {
 public:
  // True when the process's mappings exceed 3/4 of the cap. Reads /proc/self/maps every 16th call
  // while under half the cap, every call above it (a compile costs far more than the read).
  bool nearLimit();
  // The cap planned for: TORCH_TPU_MAX_MAP_COUNT, else /proc/sys/vm/max_map_count; 0 when unknown.
  static size_t cap();
  // The process's current number of mappings (lines of /proc/self/maps); 0 when unknown.
  static size_t mappings();

 private:
  size_t calls_ = 0;
  size_t last_ = 0;
};

}  // namespace tpu::runtime
