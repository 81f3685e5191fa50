#pragma once
// Routes a loaded plugin's large malloc-family requests to a LargeBlockCache.
//
// The plugin is a shared library loaded RTLD_LOCAL after the process started, so its calls to malloc, free,
// posix_memalign, ... go through its own GOT entries, bound to glibc's. `install` rewrites those entries (and
// only the plugin's: torch, Python and every other library keep glibc's) to functions that send requests of
// kLargeBytes and more to the cache and all others, and every pointer the cache does not own, to the functions
// the entries held. C++'s operator new and delete are left alone: libstdc++ frees some of what inlined code
// allocates (a string's old buffer on growth), so a pointer from a hooked `new` could reach glibc's `free`.
// The C family is freed by the caller's own `free`, which is hooked.
#include <string>

namespace tpu::runtime {

class LargeBlockCache;

// Device-buffer sized: a thread's arena would otherwise grow and trim its heaps for them between runs, and
// glibc maps blocks from 32 MiB afresh each time.
constexpr size_t kLargeBytes = size_t(1) << 20;

// Rewrites the GOT entries of the library whose dlopen handle is `handle` so that its large blocks come from
// `cache` (which must outlive the library). Returns "" on success, else why nothing was changed (an
// architecture without support, a malloc-family entry not bound to the process's malloc, a pointer-taking
// function this file does not hook). Should mprotect refuse a page midway, `free` is already hooked (it is
// written first), so every block still reaches the right free.
std::string installPluginMallocHooks(void* handle, LargeBlockCache* cache);

}  // namespace tpu::runtime
