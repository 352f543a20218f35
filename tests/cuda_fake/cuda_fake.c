/* A fake CUDA driver for tests: a shared library exporting the driver
 * symbols src/cuda/cuda_driver.c loads, implemented on the host, so that the
 * CUDA executor (src/cuda/cuda_exec.h) runs end to end on a machine without
 * a GPU. Point the loader at it with JX_CUDA_DRIVER_PATH and set
 * JX_CUDA_MODULE_SOURCE=1 (cuda_module.h): modules then arrive as CUDA
 * source, which tests/cuda_emu's runner compiles with the system C++
 * compiler and runs.
 *
 * What it is: one device, "jx fake GPU", sm_90, 2 SMs, 1 GiB; device memory
 * is host memory (a device pointer is a host address), copies are memcpy,
 * streams and events are synchronous (every call has finished when it
 * returns). What it is not: a GPU. It runs no cubin (an ELF image is refused
 * with CUDA_ERROR_NOT_SUPPORTED) and launches only the fused kernels' signature
 * (const jx_cuda_kargs, int64_t row_begin, int64_t row_end: render_cuda.h),
 * recognised by the executor's kernel names; there is no cuBLASLt behind it,
 * so GEMMs cannot run against it. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compile/render_cuda.h"
#include "cuda/cuda_driver.h"
#include "cuda_emu/cuda_emu_runner.h"
#include "cuda_emu/step_launch.h"

#define EXPORT __attribute__((visibility("default")))

enum {
  NOT_INITIALIZED = 3,
  INVALID_VALUE = 1,
  INVALID_DEVICE = 101,
  INVALID_IMAGE = 200,
  NOT_FOUND = 500,
  NOT_SUPPORTED = 801,
  LAUNCH_FAILED = 719
};

static int initialized;
static struct CUctx_st { int device; } context;

struct CUmod_st {
  cuda_emu_module *emu;
};
struct CUfunc_st {
  void *kernel;
  cuda_emu_module *emu;
};
struct CUstream_st {
  int unused;
};
/* Work runs synchronously here, so an event's time is the host's clock at
 * its record: elapsed times measure the emulated work between two events. */
struct CUevent_st {
  double recorded_ms;
};

EXPORT CUresult cuInit(unsigned flags) {
  if (flags) return INVALID_VALUE;
  initialized = 1;
  return 0;
}
EXPORT CUresult cuDriverGetVersion(int *v) {
  *v = 13000;
  return 0;
}
EXPORT CUresult cuDeviceGetCount(int *n) {
  if (!initialized) return NOT_INITIALIZED;
  *n = 1;
  return 0;
}
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal != 0) return INVALID_DEVICE;
  *d = 0;
  return 0;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  if (d != 0 || len < 1) return INVALID_VALUE;
  snprintf(name, (size_t)len, "jx fake GPU");
  return 0;
}
EXPORT CUresult cuDeviceGetAttribute(int *v, int attribute, CUdevice d) {
  if (d != 0) return INVALID_DEVICE;
  switch (attribute) {
  case JX_CU_ATTR_SM_COUNT: *v = 2; return 0;
  case JX_CU_ATTR_CC_MAJOR: *v = 9; return 0;
  case JX_CU_ATTR_CC_MINOR: *v = 0; return 0;
  default: return INVALID_VALUE;
  }
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
  if (d != 0) return INVALID_DEVICE;
  *bytes = (size_t)1 << 30;
  return 0;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
  if (d != 0) return INVALID_DEVICE;
  *ctx = &context;
  return 0;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { return d == 0 ? 0 : INVALID_DEVICE; }
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) { return ctx == &context ? 0 : INVALID_VALUE; }
EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
  *free_bytes = *total = (size_t)1 << 30;
  return 0;
}

/* ---- memory: host memory, 256-byte aligned as cuMemAlloc's ---- */
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  void *m = bytes ? aligned_alloc(256, (bytes + 255) / 256 * 256) : NULL;
  if (!m) return bytes ? JX_CUDA_ERROR_OUT_OF_MEMORY : INVALID_VALUE;
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  free((void *)(uintptr_t)p);
  return 0;
}
EXPORT CUresult cuMemAllocHost_v2(void **p, size_t bytes) {
  *p = malloc(bytes ? bytes : 1);
  return *p ? 0 : JX_CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuMemFreeHost(void *p) {
  free(p);
  return 0;
}
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  (void)s;
  memcpy((void *)(uintptr_t)dst, src, n);
  return 0;
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  (void)s;
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return 0;
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  (void)s;
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return 0;
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  (void)s;
  memset((void *)(uintptr_t)dst, v, n);
  return 0;
}

/* ---- streams and events: synchronous, so always complete ---- */
EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags) {
  (void)flags;
  *s = calloc(1, sizeof **s);
  return *s ? 0 : JX_CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  free(s);
  return 0;
}
EXPORT CUresult cuStreamSynchronize(CUstream s) { return s ? 0 : INVALID_VALUE; }
EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  (void)flags;
  return s && e ? 0 : INVALID_VALUE;
}
EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags) {
  (void)flags;
  *e = calloc(1, sizeof **e);
  return *e ? 0 : JX_CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  (void)s;
  if (!e) return INVALID_VALUE;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  e->recorded_ms = (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
  return 0;
}
EXPORT CUresult cuEventSynchronize(CUevent e) { return e ? 0 : INVALID_VALUE; }
EXPORT CUresult cuEventQuery(CUevent e) { return e ? 0 : INVALID_VALUE; }
EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
  if (!a || !b) return INVALID_VALUE;
  *ms = (float)(b->recorded_ms - a->recorded_ms);
  return 0;
}
EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  free(e);
  return 0;
}

/* ---- modules: CUDA source, compiled and run by tests/cuda_emu ---- */

/* The emulator's compile is serialized: it is slow, and tests load one
 * module at a time anyway. */
static pthread_mutex_t compile_lock = PTHREAD_MUTEX_INITIALIZER;

EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) {
  const char *src = image;
  if (!src) return INVALID_VALUE;
  if (!memcmp(src, "\177ELF", 4)) {
    fprintf(stderr, "jx fake GPU: cuModuleLoadData: a cubin cannot run here; set "
                    "JX_CUDA_MODULE_SOURCE=1 so that modules arrive as CUDA source\n");
    return NOT_SUPPORTED;
  }
  char log[4096];
  pthread_mutex_lock(&compile_lock);
  cuda_emu_module *emu = cuda_emu_compile(src, "jx fake GPU module", log, sizeof log);
  pthread_mutex_unlock(&compile_lock);
  if (!emu) {
    fprintf(stderr, "jx fake GPU: cuModuleLoadData: %s\n", log);
    return INVALID_IMAGE;
  }
  *m = malloc(sizeof **m);
  if (!*m) {
    cuda_emu_unload(emu);
    return JX_CUDA_ERROR_OUT_OF_MEMORY;
  }
  (*m)->emu = emu;
  return 0;
}

/* Functions live as long as their module: they are kept in a list freed at
 * unload (a module of n kernels has n entries). */
typedef struct fn_entry {
  struct CUfunc_st f;
  CUmodule owner;
  struct fn_entry *next;
} fn_entry;
static fn_entry *functions;
static pthread_mutex_t functions_lock = PTHREAD_MUTEX_INITIALIZER;

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  if (!m || !name) return INVALID_VALUE;
  /* only the executor's fused kernels: their signature is the one launches assume */
  void *k = strncmp(name, "jx_cuda_step", 12) ? NULL : cuda_emu_kernel(m->emu, name);
  if (!k) return NOT_FOUND;
  fn_entry *e = malloc(sizeof *e);
  if (!e) return JX_CUDA_ERROR_OUT_OF_MEMORY;
  e->f = (struct CUfunc_st){k, m->emu};
  e->owner = m;
  pthread_mutex_lock(&functions_lock);
  e->next = functions;
  functions = e;
  pthread_mutex_unlock(&functions_lock);
  *f = &e->f;
  return 0;
}

EXPORT CUresult cuModuleUnload(CUmodule m) {
  if (!m) return INVALID_VALUE;
  pthread_mutex_lock(&functions_lock);
  for (fn_entry **p = &functions; *p;) {
    fn_entry *e = *p;
    if (e->owner == m) {
      *p = e->next;
      free(e);
    } else {
      p = &e->next;
    }
  }
  pthread_mutex_unlock(&functions_lock);
  cuda_emu_unload(m->emu);
  free(m);
  return 0;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shared_bytes, CUstream s,
                               void **params, void **extra) {
  (void)s;
  if (!f || !params || extra || shared_bytes) return INVALID_VALUE;
  cuda_emu_step_args args = cuda_emu_step_args_from(params);
  int r = cuda_emu_launch_step(f->emu, f->kernel, (cuda_emu_dim3){gx, gy, gz},
                               (cuda_emu_dim3){bx, by, bz}, &args);
  return r ? LAUNCH_FAILED : 0;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **name) {
  switch (r) {
  case 0: *name = "CUDA_SUCCESS"; return 0;
  case INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return 0;
  case JX_CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
  case NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
  case INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; return 0;
  case INVALID_IMAGE: *name = "CUDA_ERROR_INVALID_IMAGE"; return 0;
  case NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; return 0;
  case LAUNCH_FAILED: *name = "CUDA_ERROR_LAUNCH_FAILED"; return 0;
  case NOT_SUPPORTED: *name = "CUDA_ERROR_NOT_SUPPORTED"; return 0;
  default: *name = NULL; return INVALID_VALUE;
  }
}
EXPORT CUresult cuGetErrorString(CUresult r, const char **text) {
  const char *name = NULL;
  if (cuGetErrorName(r, &name)) return INVALID_VALUE;
  *text = "reported by the fake driver (tests/cuda_fake)";
  return 0;
}
