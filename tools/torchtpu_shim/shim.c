// A PJRT plugin that forwards to another one: lets Google's TorchTPU (which loads the plugin named by
// TPU_LIBRARY_PATH and passes TPU-only client options) run on an XLA CPU PJRT plugin, for
// benchmarks/side_by_side.py. Every PJRT_Api slot is the target's own, except PJRT_Client_Create, which
// drops the create options the CPU client rejects ("Unexpected option name passed to PJRT_Client_Create").
//
// PJRT_SHIM_PLUGIN=/path/to/plugin.so names the target (default: SHIM_DEFAULT_PLUGIN, set at build time);
// PJRT_SHIM_VERBOSE=1 prints the options TorchTPU passes and the ones dropped.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt_c_api.h"

#ifndef SHIM_DEFAULT_PLUGIN
#define SHIM_DEFAULT_PLUGIN ""
#endif

// Options that only libtpu's client understands.
static const char* const kDropped[] = {"premapped_buffer_size"};

static PJRT_Client_Create* real_client_create;
static int verbose;

static int dropped(const PJRT_NamedValue* v) {
  for (size_t i = 0; i < sizeof(kDropped) / sizeof(kDropped[0]); ++i)
    if (v->name_size == strlen(kDropped[i]) && memcmp(v->name, kDropped[i], v->name_size) == 0) return 1;
  return 0;
}

static PJRT_Error* shim_client_create(PJRT_Client_Create_Args* args) {
  // The caller's args (a newer header's struct_size) are passed through; only the options list is swapped
  // for the filtered copy during the call and restored after it.
  const PJRT_NamedValue* options = args->create_options;
  size_t n = args->num_options, kept = 0;
  PJRT_NamedValue* filtered = calloc(n ? n : 1, sizeof(PJRT_NamedValue));
  if (!filtered) return real_client_create(args);
  for (size_t i = 0; i < n; ++i) {
    // NamedValue entries are laid out with the caller's struct_size, which may differ from ours.
    const PJRT_NamedValue* v =
        (const PJRT_NamedValue*)((const char*)options + i * (options[0].struct_size ? options[0].struct_size
                                                                                  : sizeof(PJRT_NamedValue)));
    int drop = dropped(v);
    if (verbose) fprintf(stderr, "pjrt shim: client option %.*s%s\n", (int)v->name_size, v->name, drop ? " (dropped)" : "");
    if (!drop) {
      size_t size = v->struct_size < sizeof(PJRT_NamedValue) ? v->struct_size : sizeof(PJRT_NamedValue);
      memcpy(&filtered[kept], v, size);
      filtered[kept].struct_size = sizeof(PJRT_NamedValue);
      ++kept;
    }
  }
  args->create_options = filtered;
  args->num_options = kept;
  PJRT_Error* error = real_client_create(args);
  args->create_options = options;
  args->num_options = n;
  free(filtered);
  return error;
}

const PJRT_Api* GetPjrtApi(void) {
  static PJRT_Api* api;
  if (api) return api;
  verbose = getenv("PJRT_SHIM_VERBOSE") && *getenv("PJRT_SHIM_VERBOSE") == '1';
  const char* path = getenv("PJRT_SHIM_PLUGIN");
  if (!path || !*path) path = SHIM_DEFAULT_PLUGIN;
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    fprintf(stderr, "pjrt shim: cannot load %s: %s\n", path, dlerror());
    return NULL;
  }
  const PJRT_Api* (*get)(void) = (const PJRT_Api* (*)(void))dlsym(handle, "GetPjrtApi");
  const PJRT_Api* real = get ? get() : NULL;
  if (!real) {
    fprintf(stderr, "pjrt shim: %s has no GetPjrtApi\n", path);
    return NULL;
  }
  // Slots are only ever appended to PJRT_Api, so PJRT_Client_Create sits at the same offset in the
  // target's (newer) table as in the header we build against; the copy keeps every later slot.
  size_t size = real->struct_size > sizeof(PJRT_Api) ? real->struct_size : sizeof(PJRT_Api);
  PJRT_Api* copy = calloc(1, size);
  if (!copy) return NULL;
  memcpy(copy, real, real->struct_size);
  real_client_create = real->PJRT_Client_Create;
  copy->PJRT_Client_Create = shim_client_create;
  if (verbose)
    fprintf(stderr, "pjrt shim: forwarding to %s (PJRT API %d.%d)\n", path, real->pjrt_api_version.major_version,
            real->pjrt_api_version.minor_version);
  api = copy;
  return api;
}
