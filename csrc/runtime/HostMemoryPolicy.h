#pragma once
// How glibc's malloc serves large blocks in a process whose device is the host (the XLA CPU plugins).
//
// There, every device buffer and every program's temporaries are host memory from malloc. glibc serves a
// block over its mmap threshold (at most 32 MiB) with a fresh mmap and returns it with munmap on free, so a
// program whose temporaries are a few hundred MiB maps, zero-faults and unmaps them at every run (a Fused
// training step of a d512 GPT: ~50k page faults per step). A device allocator keeps such memory; the
// "keep" policy makes malloc do so: one arena (a thread arena cannot hold a block over 64 MiB and falls
// back to mmap), no mmap, and freed memory at the heap's top returned to the system only above 1 GiB.
// It must be set before the plugin's threads first call malloc (they keep the arena they get), so it is
// applied when the plugins are configured, at `import torch_tpu`. Its cost: every thread shares malloc's lock
// (a small model's Fused step ~14% slower; large steps gain more: docs/performance.md).
#include <string>

namespace tpu::runtime {

// Applies the policy named by TORCH_TPU_HOST_MALLOC ("keep", the default, or "system": glibc's own
// behaviour); throws std::invalid_argument naming the accepted values for any other value.
void applyHostMemoryPolicy();

// What is in effect, e.g. "keep (glibc malloc: one arena, no mmap, trim above 1 GiB)", for the doctor.
std::string hostMemoryPolicy();

}  // namespace tpu::runtime
