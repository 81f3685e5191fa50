#include "PluginMallocHooks.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cerrno>
#include <cstring>
#include <vector>

#include "LargeBlockCache.h"

namespace tpu::runtime {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kAbsolute = R_X86_64_64, kGlobalData = R_X86_64_GLOB_DAT, kJumpSlot = R_X86_64_JUMP_SLOT;
#elif defined(__aarch64__)
constexpr uint32_t kAbsolute = R_AARCH64_ABS64, kGlobalData = R_AARCH64_GLOB_DAT, kJumpSlot = R_AARCH64_JUMP_SLOT;
#else
#define TPU_NO_GOT_HOOKS 1
#endif

std::atomic<LargeBlockCache*> gCache{nullptr};

// What the plugin's entries held: the process's malloc family.
struct Libc {
  void* (*malloc)(size_t);
  void (*free)(void*);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void* (*reallocarray)(void*, size_t, size_t);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  size_t (*malloc_usable_size)(void*);
} gLibc;

void* largeBlock(size_t bytes, size_t alignment, bool zeroed) {
  // An alignment that is not a power of two is malloc's to refuse (EINVAL), as it would without us.
  if (bytes < kLargeBytes || alignment == 0 || (alignment & (alignment - 1)) != 0) return nullptr;
  return gCache.load(std::memory_order_acquire)->allocate(bytes, alignment, zeroed);
}

bool ours(const void* p) { return gCache.load(std::memory_order_relaxed)->owns(p); }

void* hookMalloc(size_t n) {
  if (void* p = largeBlock(n, alignof(std::max_align_t), false)) return p;
  return gLibc.malloc(n);
}

void hookFree(void* p) {
  if (ours(p)) {
    gCache.load(std::memory_order_relaxed)->release(p);
  } else {
    gLibc.free(p);
  }
}

void* hookCalloc(size_t n, size_t size) {
  size_t bytes;
  if (!__builtin_mul_overflow(n, size, &bytes)) {
    if (void* p = largeBlock(bytes, alignof(std::max_align_t), true)) return p;
  }
  return gLibc.calloc(n, size);
}

void* hookRealloc(void* p, size_t n) {
  if (!p) return hookMalloc(n);
  if (!ours(p)) return gLibc.realloc(p, n);  // a block of malloc's stays malloc's, whatever its new size
  LargeBlockCache* cache = gCache.load(std::memory_order_relaxed);
  if (n == 0) {
    cache->release(p);
    return nullptr;
  }
  size_t have = cache->usableSize(p);
  if (n <= have && n >= have / 2) return p;
  void* q = hookMalloc(n);
  if (!q) return nullptr;  // p stays valid, as realloc promises
  std::memcpy(q, p, n < have ? n : have);
  cache->release(p);
  return q;
}

void* hookReallocarray(void* p, size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return hookRealloc(p, bytes);
}

int hookPosixMemalign(void** out, size_t alignment, size_t n) {
  if (void* p = largeBlock(n, alignment, false)) {
    *out = p;
    return 0;
  }
  return gLibc.posix_memalign(out, alignment, n);
}

void* hookAlignedAlloc(size_t alignment, size_t n) {
  if (void* p = largeBlock(n, alignment, false)) return p;
  return gLibc.aligned_alloc(alignment, n);
}

void* hookMemalign(size_t alignment, size_t n) {
  if (void* p = largeBlock(n, alignment, false)) return p;
  return gLibc.memalign(alignment, n);
}

void* hookValloc(size_t n) {
  if (void* p = largeBlock(n, static_cast<size_t>(getpagesize()), false)) return p;
  return gLibc.valloc(n);
}

size_t hookMallocUsableSize(void* p) {
  return ours(p) ? gCache.load(std::memory_order_relaxed)->usableSize(p) : gLibc.malloc_usable_size(p);
}

struct Hook {
  const char* name;
  void* hook;
  void** original;
};

template <typename F>
void** slotOf(F* field) { return reinterpret_cast<void**>(field); }

const Hook kHooks[] = {
    {"malloc", reinterpret_cast<void*>(&hookMalloc), slotOf(&gLibc.malloc)},
    {"free", reinterpret_cast<void*>(&hookFree), slotOf(&gLibc.free)},
    {"calloc", reinterpret_cast<void*>(&hookCalloc), slotOf(&gLibc.calloc)},
    {"realloc", reinterpret_cast<void*>(&hookRealloc), slotOf(&gLibc.realloc)},
    {"reallocarray", reinterpret_cast<void*>(&hookReallocarray), slotOf(&gLibc.reallocarray)},
    {"posix_memalign", reinterpret_cast<void*>(&hookPosixMemalign), slotOf(&gLibc.posix_memalign)},
    {"aligned_alloc", reinterpret_cast<void*>(&hookAlignedAlloc), slotOf(&gLibc.aligned_alloc)},
    {"memalign", reinterpret_cast<void*>(&hookMemalign), slotOf(&gLibc.memalign)},
    {"valloc", reinterpret_cast<void*>(&hookValloc), slotOf(&gLibc.valloc)},
    {"malloc_usable_size", reinterpret_cast<void*>(&hookMallocUsableSize), slotOf(&gLibc.malloc_usable_size)},
};

// Functions that take a block and may free or measure it; a plugin importing one of them cannot be hooked
// (its pointer could be ours).
const char* const kUnhookable[] = {"cfree", "pvalloc", "__libc_free", "__libc_realloc", "__libc_malloc",
                                   "__libc_calloc", "__libc_memalign"};

#ifndef TPU_NO_GOT_HOOKS
struct Patch {
  void** slot;
  const Hook* hook;
};

// The page range glibc made read-only after relocating the library (its RELRO segment, end rounded down).
struct ReadOnlyAfterRelocation {
  uintptr_t base = 0, begin = 0, end = 0;
};

int findRelro(dl_phdr_info* info, size_t, void* data) {
  auto* r = static_cast<ReadOnlyAfterRelocation*>(data);
  if (info->dlpi_addr != r->base) return 0;
  uintptr_t page = static_cast<uintptr_t>(getpagesize());
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_GNU_RELRO) continue;
    r->begin = (r->base + ph.p_vaddr) & ~(page - 1);
    r->end = (r->base + ph.p_vaddr + ph.p_memsz) & ~(page - 1);
  }
  return 1;
}

bool writeSlot(void** slot, void* value, const ReadOnlyAfterRelocation& relro) {
  auto at = reinterpret_cast<uintptr_t>(slot);
  if (at < relro.begin || at >= relro.end) {
    *slot = value;
    return true;
  }
  size_t pageSize = static_cast<size_t>(getpagesize());
  void* page = reinterpret_cast<void*>(at & ~(pageSize - 1));
  if (mprotect(page, pageSize, PROT_READ | PROT_WRITE) != 0) return false;
  *slot = value;
  mprotect(page, pageSize, PROT_READ);
  return true;
}
#endif

}  // namespace

std::string installPluginMallocHooks(void* handle, LargeBlockCache* cache) {
#ifdef TPU_NO_GOT_HOOKS
  (void)handle;
  (void)cache;
  return "GOT hooks are built for x86_64 and aarch64 only";
#else
  if (!cache || !cache->ok()) return "the large-block cache could not reserve its address range";
  LargeBlockCache* current = gCache.load(std::memory_order_acquire);
  if (current && current != cache) return "hooks already send large blocks to another cache";
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return "dlinfo found no link map";
  // Dynamic entries hold addresses (glibc relocates them in place) or, where the section is read-only,
  // offsets from the load base.
  auto address = [&](ElfW(Addr) v) { return v < map->l_addr ? map->l_addr + v : v; };
  const ElfW(Sym)* symbols = nullptr;
  const char* names = nullptr;
  const ElfW(Rela)* rela = nullptr;
  const ElfW(Rela)* plt = nullptr;
  size_t relaBytes = 0, pltBytes = 0;
  bool pltIsRela = true;
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symbols = reinterpret_cast<const ElfW(Sym)*>(address(d->d_un.d_ptr)); break;
      case DT_STRTAB: names = reinterpret_cast<const char*>(address(d->d_un.d_ptr)); break;
      case DT_RELA: rela = reinterpret_cast<const ElfW(Rela)*>(address(d->d_un.d_ptr)); break;
      case DT_RELASZ: relaBytes = d->d_un.d_val; break;
      case DT_JMPREL: plt = reinterpret_cast<const ElfW(Rela)*>(address(d->d_un.d_ptr)); break;
      case DT_PLTRELSZ: pltBytes = d->d_un.d_val; break;
      case DT_PLTREL: pltIsRela = d->d_un.d_val == DT_RELA; break;
      default: break;
    }
  }
  if (!symbols || !names || !pltIsRela) return "the library's dynamic section has no RELA relocations";

  // What the entries must hold: the process's own malloc family (the same for every library hooked).
  for (const Hook& h : kHooks) *h.original = dlsym(RTLD_DEFAULT, h.name);
  std::vector<Patch> patches;
  std::string refusal;
  auto scan = [&](const ElfW(Rela)* table, size_t bytes) {
    for (size_t i = 0; table && i < bytes / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela)& r = table[i];
      uint32_t type = ELF64_R_TYPE(r.r_info);
      if (type != kJumpSlot && type != kGlobalData && !(type == kAbsolute && r.r_addend == 0)) continue;
      const ElfW(Sym)& sym = symbols[ELF64_R_SYM(r.r_info)];
      if (sym.st_shndx != SHN_UNDEF) continue;  // the library's own definition, not an import
      const char* name = names + sym.st_name;
      for (const char* bad : kUnhookable) {
        if (std::strcmp(name, bad) == 0) refusal = std::string("the library imports ") + name;
      }
      for (const Hook& h : kHooks) {
        if (std::strcmp(name, h.name) != 0) continue;
        auto** slot = reinterpret_cast<void**>(map->l_addr + r.r_offset);
        if (*slot == h.hook) break;  // installed before (the same library opened again)
        if (*slot != *h.original) {
          refusal = std::string("its ") + name + " entry is not bound to the process's " + name;
        }
        patches.push_back({slot, &h});
        break;
      }
    }
  };
  scan(rela, relaBytes);
  scan(plt, pltBytes);
  if (!refusal.empty()) return refusal;
  if (patches.empty()) return "";  // nothing of the malloc family imported, or already installed

  gCache.store(cache, std::memory_order_release);
  ReadOnlyAfterRelocation relro;
  relro.base = map->l_addr;
  dl_iterate_phdr(findRelro, &relro);
  // free first: once any allocator entry hands out a large block, the library's free must know it.
  std::stable_partition(patches.begin(), patches.end(),
                        [](const Patch& p) { return std::strcmp(p.hook->name, "free") == 0; });
  for (const Patch& p : patches) {
    if (!writeSlot(p.slot, p.hook->hook, relro)) return "mprotect refused to open a GOT page";
  }
  return "";
#endif
}

}  // namespace tpu::runtime
