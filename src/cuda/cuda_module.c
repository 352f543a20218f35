#include "cuda_module.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../base/hash.h"
#include "../base/cache_dir.h"
#include "nvrtc.h"

/* Bump when the entry format or the NVRTC options change. */
#define JX_CUBIN_CACHE_VERSION "jx-cubin-1"
static const char magic[8] = {'J', 'X', 'C', 'U', 'B', 'I', 'N', '1'};

typedef struct {
  char magic[8];
  uint64_t key, size, hash; /* the payload's size and jx_hash_bytes */
} entry_header;

typedef struct cubin {
  uint64_t key;
  void *image;
  size_t size;
  struct cubin *next;
} cubin;

struct jx_cubin_cache {
  pthread_mutex_t lock;
  cubin *entries;
  jx_cubin_stats stats;
};

jx_cubin_cache *jx_cubin_cache_create(void) {
  jx_cubin_cache *c = calloc(1, sizeof *c);
  if (c) pthread_mutex_init(&c->lock, NULL);
  return c;
}

void jx_cubin_cache_destroy(jx_cubin_cache *c) {
  if (!c) return;
  while (c->entries) {
    cubin *e = c->entries;
    c->entries = e->next;
    free(e->image);
    free(e);
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
}

jx_cubin_stats jx_cubin_cache_stats(jx_cubin_cache *c) {
  pthread_mutex_lock(&c->lock);
  jx_cubin_stats s = c->stats;
  pthread_mutex_unlock(&c->lock);
  return s;
}

static jx_status key_of(const char *source, const char *arch, uint64_t *key) {
  int major = 0, minor = 0;
  jx_status st = jx_nvrtc_version(&major, &minor);
  if (st) return st;
  uint64_t h = jx_hash_str(JX_HASH_SEED, JX_CUBIN_CACHE_VERSION);
  h = jx_hash_u64(h, (uint64_t)major * 1000 + (uint64_t)minor);
  h = jx_hash_str(h, arch);
  *key = jx_hash_str(h, source);
  return JX_OK;
}

static jx_status path_of(uint64_t key, const char *arch, char *out, size_t cap) {
  char dir[1024];
  if (!jx_kernel_cache_dir(dir, sizeof dir))
    return jx_error_set(JX_ERR_IO, "CUDA: cannot create the kernel cache directory '%s'", dir);
  if ((size_t)snprintf(out, cap, "%s/%016llx.%s.cubin", dir, (unsigned long long)key, arch) >= cap)
    return jx_error_set(JX_ERR_IO, "CUDA: the kernel cache path under '%s' is too long", dir);
  return JX_OK;
}

static int valid_arch(const char *arch) {
  if (!arch || strncmp(arch, "sm_", 3) != 0 || !arch[3] || strlen(arch) > 12) return 0;
  for (const char *p = arch + 3; *p; p++)
    if (!(*p >= '0' && *p <= '9') && *p != 'a' && *p != 'f') return 0;
  return 1;
}

jx_status jx_cubin_cache_path(const char *source, const char *arch, char *out, size_t cap) {
  uint64_t key = 0;
  jx_status st = key_of(source, arch, &key);
  return st ? st : path_of(key, arch, out, cap);
}

/* The entry's payload (malloc'ed) when path holds a valid entry of key;
 * NULL when it is missing (*damaged = 0) or damaged (*damaged = 1). */
static void *read_entry(const char *path, uint64_t key, size_t *size, int *damaged) {
  *damaged = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  entry_header h;
  void *payload = NULL;
  *damaged = 1;
  if (fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, magic, sizeof magic) && h.key == key &&
      h.size > 0 && h.size < ((uint64_t)1 << 32) && (payload = malloc(h.size))) {
    /* the whole payload, nothing after it, and the bytes that were written */
    if (fread(payload, 1, h.size, f) == h.size && fgetc(f) == EOF &&
        jx_hash_bytes(JX_HASH_SEED, payload, h.size) == h.hash) {
      *damaged = 0;
      *size = h.size;
    } else {
      free(payload);
      payload = NULL;
    }
  }
  fclose(f);
  return payload;
}

/* Writes the entry to a temporary file and renames it into place. */
static jx_status write_entry(const char *path, uint64_t key, const void *image, size_t size) {
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%s.%x.tmp", path, (unsigned)getpid() ^ (unsigned)(uintptr_t)&tmp);
  entry_header h;
  memcpy(h.magic, magic, sizeof magic);
  h.key = key;
  h.size = size;
  h.hash = jx_hash_bytes(JX_HASH_SEED, image, size);
  FILE *f = fopen(tmp, "wb");
  int ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(image, 1, size, f) == size;
  if (f && fclose(f) != 0) ok = 0;
  if (ok && rename(tmp, path) != 0) ok = 0;
  if (!ok) {
    int e = errno;
    unlink(tmp);
    return jx_error_set(JX_ERR_IO, "CUDA: cannot write the kernel cache entry '%s': %s", path,
                        strerror(e));
  }
  return JX_OK;
}

jx_status jx_cubin_cache_get(jx_cubin_cache *c, const char *source, const char *name,
                             const char *arch, const void **image, size_t *size) {
  *image = NULL;
  *size = 0;
  if (!valid_arch(arch))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "CUDA: %s: architecture '%s' is not of the form sm_XX", name,
                        arch ? arch : "(null)");
  uint64_t key = 0;
  jx_status st = key_of(source, arch, &key);
  if (st) return st;
  pthread_mutex_lock(&c->lock);
  for (cubin *e = c->entries; e; e = e->next)
    if (e->key == key) {
      c->stats.memory_hits++;
      *image = e->image;
      *size = e->size;
      pthread_mutex_unlock(&c->lock);
      return JX_OK;
    }
  pthread_mutex_unlock(&c->lock);

  /* not under the lock: reading or compiling takes long; two threads asking
   * for one source at once may both compile it, and both entries are equal */
  char path[1100];
  st = path_of(key, arch, path, sizeof path);
  if (st) return st;
  int damaged = 0;
  size_t n = 0;
  char *bytes = read_entry(path, key, &n, &damaged);
  int compiled = 0;
  if (!bytes) {
    if (damaged) unlink(path);
    jx_nvrtc_options opt = {.arch = arch, .output = JX_NVRTC_CUBIN};
    st = jx_nvrtc_compile(source, name, &opt, &bytes, &n);
    if (!st) st = write_entry(path, key, bytes, n);
    if (st) {
      free(bytes);
      return st;
    }
    compiled = 1;
  }
  cubin *e = malloc(sizeof *e);
  if (!e) {
    free(bytes);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA: out of host memory");
  }
  *e = (cubin){key, bytes, n, NULL};
  pthread_mutex_lock(&c->lock);
  c->stats.corrupt += damaged;
  if (compiled)
    c->stats.compiles++;
  else
    c->stats.disk_hits++;
  e->next = c->entries;
  c->entries = e;
  pthread_mutex_unlock(&c->lock);
  *image = bytes;
  *size = n;
  return JX_OK;
}

int jx_cuda_module_source_mode(void) { return jx_env_flag("JX_CUDA_MODULE_SOURCE"); }

/* A second test switch, JX_CUDA_MODULE_NVRTC_CHECK=1 (tests/CMakeLists.txt's
 * cuda.* entries set it with JX_CUDA_MODULE_SOURCE=1): each module's source
 * is also compiled by NVRTC for the device's architecture where libnvrtc
 * loads, and an NVRTC error fails the load. */
static int nvrtc_check_mode(void) { return jx_env_flag("JX_CUDA_MODULE_NVRTC_CHECK"); }

/* Under both test switches: NVRTC compiles the source (through the cache,
 * whose cubin is not used) before the fake driver gets it, so every module
 * a test runs in the emulator is also one NVRTC accepts. Without libnvrtc
 * that check is skipped, said once. */
static jx_status nvrtc_check(jx_cuda_device *d, jx_cubin_cache *cache, const char *source,
                             const char *name) {
  static int said;
  if (!jx_nvrtc_available()) {
    if (!said++)
      fprintf(stderr, "jx: JX_CUDA_MODULE_NVRTC_CHECK: skipped, NVRTC not found (%s)\n",
              jx_nvrtc_load_error());
    return JX_OK;
  }
  const void *image = NULL;
  size_t size = 0;
  return jx_cubin_cache_get(cache, source, name, d->info.arch, &image, &size);
}

jx_status jx_cuda_module_load(jx_cuda_device *d, jx_cubin_cache *cache, const char *source,
                              const char *name, const char *const *kernels, int nkernels,
                              jx_cuda_module **out) {
  *out = NULL;
  const void *image = source; /* JX_CUDA_MODULE_SOURCE=1: the source text itself */
  size_t size = 0;
  jx_status st = !jx_cuda_module_source_mode()
                     ? jx_cubin_cache_get(cache, source, name, d->info.arch, &image, &size)
                 : nvrtc_check_mode() ? nvrtc_check(d, cache, source, name)
                                      : JX_OK;
  if (!st) st = jx_cuda_device_make_current(d);
  if (st) return st;
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  jx_cuda_module *m = calloc(1, sizeof *m);
  CUfunction *fns = calloc((size_t)(nkernels > 0 ? nkernels : 1), sizeof *fns);
  if (!m || !fns) {
    free(m);
    free(fns);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA: out of host memory");
  }
  m->device = d->info.ordinal;
  m->functions = fns;
  m->nfunctions = nkernels;
  st = jx_cuda_check(cu->ModuleLoadData(&m->module, image), "cuModuleLoadData", m->device);
  for (int k = 0; k < nkernels && !st; k++) {
    CUresult r = cu->ModuleGetFunction(&fns[k], m->module, kernels[k]);
    if (r != JX_CUDA_SUCCESS) {
      char what[512];
      jx_cuda_describe(r, what, sizeof what);
      st = jx_error_set(JX_ERR_INTERNAL,
                        "CUDA: cuModuleGetFunction on device %d: kernel '%s' of %s: %s", m->device,
                        kernels[k], name, what);
    }
  }
  if (st) {
    jx_cuda_module_unload(m);
    return st;
  }
  *out = m;
  return JX_OK;
}

void jx_cuda_module_unload(jx_cuda_module *m) {
  if (!m) return;
  if (m->module) jx_cuda_driver()->ModuleUnload(m->module);
  free(m->functions);
  free(m);
}
