#pragma once
// How host memory serves the XLA CPU plugins' large blocks.
//
// There, every device buffer and every program's temporaries are host memory from malloc. glibc serves a
// block over its mmap threshold (at most 32 MiB) with a fresh mmap and returns it with munmap on free, so a
// program whose temporaries are a few hundred MiB maps, zero-faults and unmaps them at every run (a Fused
// training step of a d512 GPT: ~50k page faults per step). A device allocator keeps such memory. Policies
// (TORCH_TPU_HOST_MALLOC):
//   cache   (default) the plugin's requests from kLargeBytes up come from a LargeBlockCache, which keeps freed
//           blocks mapped (PluginMallocHooks.h); everything else stays with glibc's per-thread arenas.
//   keep    glibc itself keeps them: one arena (a thread arena cannot hold a block over 64 MiB and falls back
//           to mmap), no mmap, the heap's top returned only above 1 GiB. Every thread then shares malloc's
//           lock (a small model's steps 10-20% slower, XLA's compiles slower too: docs/performance.md).
//           Also what `cache` falls back to where the plugin's entries cannot be hooked.
//   system  glibc's defaults.
// keep must be set before the plugin's threads first call malloc (they keep the arena they get): the policy
// is read when the plugins are configured, at `import torch_tpu`, and the hooks are installed when the plugin
// is opened, before it starts a thread.
#include <string>

namespace tpu::runtime {

// Reads TORCH_TPU_HOST_MALLOC and applies what can be applied before a plugin is open; throws
// std::invalid_argument naming the accepted values for any other value.
void applyHostMemoryPolicy();

// Called with a CPU plugin's dlopen handle before its first use: installs the `cache` policy's hooks.
void adoptPluginAllocations(void* handle);

// What is in effect, e.g. "cache (...)", for the doctor and the tests.
std::string hostMemoryPolicy();

class LargeBlockCache;
// The cache of the `cache` policy once a plugin has been adopted, else null (its stats for the bindings, its
// trim for torch.tpu.empty_cache()).
LargeBlockCache* hostBlockCache();

}  // namespace tpu::runtime
