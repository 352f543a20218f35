/* Device code: a CUDA C++ translation unit compiled by NVRTC for a device's
 * architecture, its cubin cached on disk in the kernel cache directory
 * (src/base/cache_dir.h) next to the CPU kernels, then loaded with
 * cuModuleLoadData. The cache key hashes a cache version, NVRTC's version,
 * the architecture and the source; entries are written atomically (temp file
 * + rename), so processes may share the directory, and each carries its
 * key, size and a hash of its bytes, so a truncated or damaged entry is
 * detected and rebuilt rather than handed to the driver. */
#ifndef JX_SRC_CUDA_CUDA_MODULE_H
#define JX_SRC_CUDA_CUDA_MODULE_H

#include <jx/base.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_device.h"

typedef struct {
  int64_t compiles;    /* NVRTC runs */
  int64_t disk_hits;   /* entries read from the disk cache */
  int64_t memory_hits; /* requests this cache object had already served */
  int64_t corrupt;     /* disk entries found damaged (then rebuilt) */
} jx_cubin_stats;

/* Cubins in memory, in front of the disk cache. Thread-safe. */
typedef struct jx_cubin_cache jx_cubin_cache;
jx_cubin_cache *jx_cubin_cache_create(void); /* NULL when out of memory */
void jx_cubin_cache_destroy(jx_cubin_cache *c);
jx_cubin_stats jx_cubin_cache_stats(jx_cubin_cache *c);

/* The cubin of `source` for `arch` ("sm_90"): from memory, from disk, or
 * compiled (NVRTC's errors: "NVRTC not found: ...", "nvrtc: NAME: ...").
 * *image belongs to the cache and lives as long as it. */
jx_status jx_cubin_cache_get(jx_cubin_cache *c, const char *source, const char *name,
                             const char *arch, const void **image, size_t *size);

/* The disk entry's path for source and arch (for tests and tools). */
jx_status jx_cubin_cache_path(const char *source, const char *arch, char *out, size_t cap);

/* 1 when JX_CUDA_MODULE_SOURCE=1: a test switch, for tests/cuda_fake's
 * driver, which runs CUDA source in a CPU emulator and cannot run cubins.
 * jx_cuda_module_load then hands cuModuleLoadData the NUL-terminated source
 * itself (as a driver takes PTX text) instead of NVRTC's cubin; nothing
 * else changes. A real driver refuses such an image, so it is never set
 * outside tests. */
int jx_cuda_module_source_mode(void);

/* A module loaded on a device and the functions asked for, in order. */
typedef struct {
  int device;
  CUmodule module;
  int nfunctions;
  CUfunction *functions;
} jx_cuda_module;

/* Compiles (through the cache) and loads `source` on device d, looking up
 * each of `kernels` (extern "C" names). The caller unloads the module. */
jx_status jx_cuda_module_load(jx_cuda_device *d, jx_cubin_cache *cache, const char *source,
                              const char *name, const char *const *kernels, int nkernels,
                              jx_cuda_module **out);
void jx_cuda_module_unload(jx_cuda_module *m);

#endif
