/* The fake NCCL's CUDA driver (see nccl_fake.h for why it has its own):
 * four devices "jx fake GPU <n>" (JX_FAKE_CUDA_DEVICES=n: 1 to 8, for the
 * sharding tests' 8-device meshes), device memory = host memory, streams that
 * wait for the collectives enqueued on them. It runs no kernels
 * (cuModuleLoadData says CUDA_ERROR_NOT_SUPPORTED) unless built with
 * nccl_fake_kernels.c (NCCL_FAKE_KERNELS). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_driver.h"
#include "nccl_fake.h"

enum { MAX_DEVICES = 8 };

/* The device count: JX_FAKE_CUDA_DEVICES, read when the driver initializes. */
static int devices = 4;
enum {
  INVALID_VALUE = 1,
  NOT_INITIALIZED = 3,
  INVALID_DEVICE = 101,
  INVALID_CONTEXT = 201,
  INVALID_IMAGE = 200,
  NOT_FOUND = 500,
  LAUNCH_FAILED = 719,
  NOT_SUPPORTED = 801
};

pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t fake_cond = PTHREAD_COND_INITIALIZER;

static int initialized;
static struct CUctx_st contexts[MAX_DEVICES] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
static _Thread_local struct CUctx_st *current;

struct CUctx_st *fake_current_context(void) {
  return current;
}

/* ---- work items and their lists ---- */

fake_work *fake_work_new(void) {
  fake_work *w = calloc(1, sizeof *w);
  if (w) w->refs = 1;
  return w;
}

void fake_work_release(fake_work *w) {
  if (w && --w->refs == 0) free(w);
}

void fake_work_finish(fake_work *w, int error) {
  if (w->done) return;
  w->done = 1;
  w->error = error;
  pthread_cond_broadcast(&fake_cond);
}

int fake_deps_add(fake_deps *d, fake_work *w) {
  if (d->n == d->cap) {
    int cap = d->cap ? 2 * d->cap : 8;
    fake_work **items = realloc(d->items, (size_t)cap * sizeof *items);
    if (!items) return -1;
    d->items = items;
    d->cap = cap;
  }
  w->refs++;
  d->items[d->n++] = w;
  return 0;
}

void fake_deps_clear(fake_deps *d) {
  for (int k = 0; k < d->n; k++) fake_work_release(d->items[k]);
  d->n = 0;
}

static int deps_done(const fake_deps *d) {
  for (int k = 0; k < d->n; k++)
    if (!d->items[k]->done) return 0;
  return 1;
}

void fake_deps_wait(fake_deps *d) {
  while (!deps_done(d)) pthread_cond_wait(&fake_cond, &fake_lock);
  fake_deps_clear(d);
}

static void deps_free(fake_deps *d) {
  fake_deps_clear(d);
  free(d->items);
}

/* Work on stream s runs after everything s waits for. */
void fake_stream_drain(CUstream s) {
  pthread_mutex_lock(&fake_lock);
  fake_deps_wait(&s->deps);
  pthread_mutex_unlock(&fake_lock);
}

/* ---- devices and contexts ---- */

FAKE_EXPORT CUresult cuInit(unsigned flags) {
  if (flags) return INVALID_VALUE;
  const char *n = getenv("JX_FAKE_CUDA_DEVICES");
  if (n && atoi(n) >= 1 && atoi(n) <= MAX_DEVICES) devices = atoi(n);
  initialized = 1;
  return 0;
}
FAKE_EXPORT CUresult cuDriverGetVersion(int *v) {
  *v = 13000;
  return 0;
}
FAKE_EXPORT CUresult cuDeviceGetCount(int *n) {
  if (!initialized) return NOT_INITIALIZED;
  *n = devices;
  return 0;
}
FAKE_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal < 0 || ordinal >= devices) return INVALID_DEVICE;
  *d = ordinal;
  return 0;
}
FAKE_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  if (d < 0 || d >= devices || len < 1) return INVALID_VALUE;
  snprintf(name, (size_t)len, "jx fake GPU %d", d);
  return 0;
}
FAKE_EXPORT CUresult cuDeviceGetAttribute(int *v, int attribute, CUdevice d) {
  if (d < 0 || d >= devices) return INVALID_DEVICE;
  switch (attribute) {
  case JX_CU_ATTR_SM_COUNT: *v = 2; return 0;
  case JX_CU_ATTR_CC_MAJOR: *v = 9; return 0;
  case JX_CU_ATTR_CC_MINOR: *v = 0; return 0;
  default: return INVALID_VALUE;
  }
}
FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
  if (d < 0 || d >= devices) return INVALID_DEVICE;
  *bytes = (size_t)1 << 30;
  return 0;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
  if (d < 0 || d >= devices) return INVALID_DEVICE;
  *ctx = &contexts[d];
  return 0;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  return d >= 0 && d < devices ? 0 : INVALID_DEVICE;
}
FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (ctx && (ctx < contexts || ctx >= contexts + devices)) return INVALID_CONTEXT;
  current = ctx;
  return 0;
}
FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
  *free_bytes = *total = (size_t)1 << 30;
  return 0;
}

/* ---- memory: host memory; copies wait for the stream's pending work ---- */

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  if (!current) return INVALID_CONTEXT;
  void *m = bytes ? aligned_alloc(256, (bytes + 255) / 256 * 256) : NULL;
  if (!m) return bytes ? JX_CUDA_ERROR_OUT_OF_MEMORY : INVALID_VALUE;
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  free((void *)(uintptr_t)p);
  return 0;
}
FAKE_EXPORT CUresult cuMemAllocHost_v2(void **p, size_t bytes) {
  *p = malloc(bytes ? bytes : 1);
  return *p ? 0 : JX_CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_EXPORT CUresult cuMemFreeHost(void *p) {
  free(p);
  return 0;
}
FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  if (!s) return INVALID_VALUE;
  if (s->ctx != current) return INVALID_CONTEXT; /* a stream of another context */
  fake_stream_drain(s);
  memcpy((void *)(uintptr_t)dst, src, n);
  return 0;
}
FAKE_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  if (!s) return INVALID_VALUE;
  if (s->ctx != current) return INVALID_CONTEXT; /* a stream of another context */
  fake_stream_drain(s);
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return 0;
}
FAKE_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  if (!s) return INVALID_VALUE;
  if (s->ctx != current) return INVALID_CONTEXT; /* a stream of another context */
  fake_stream_drain(s);
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return 0;
}
FAKE_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  if (!s) return INVALID_VALUE;
  fake_stream_drain(s);
  memset((void *)(uintptr_t)dst, v, n);
  return 0;
}

/* ---- streams and events ---- */

FAKE_EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags) {
  (void)flags;
  if (!current) return INVALID_CONTEXT;
  *s = calloc(1, sizeof **s);
  if (!*s) return JX_CUDA_ERROR_OUT_OF_MEMORY;
  (*s)->ctx = current;
  return 0;
}
FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  if (!s) return INVALID_VALUE;
  pthread_mutex_lock(&fake_lock);
  deps_free(&s->deps);
  pthread_mutex_unlock(&fake_lock);
  free(s);
  return 0;
}
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  if (!s) return INVALID_VALUE;
  fake_stream_drain(s);
  return 0;
}
FAKE_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  (void)flags;
  if (!s || !e) return INVALID_VALUE;
  CUresult r = 0;
  pthread_mutex_lock(&fake_lock);
  for (int k = 0; k < e->deps.n && !r; k++)
    if (!e->deps.items[k]->done && fake_deps_add(&s->deps, e->deps.items[k]))
      r = JX_CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_unlock(&fake_lock);
  return r;
}
FAKE_EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags) {
  (void)flags;
  *e = calloc(1, sizeof **e);
  return *e ? 0 : JX_CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  if (!e || !s) return INVALID_VALUE;
  CUresult r = 0;
  pthread_mutex_lock(&fake_lock);
  fake_deps_clear(&e->deps);
  for (int k = 0; k < s->deps.n && !r; k++)
    if (fake_deps_add(&e->deps, s->deps.items[k])) r = JX_CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_unlock(&fake_lock);
  return r;
}
FAKE_EXPORT CUresult cuEventSynchronize(CUevent e) {
  if (!e) return INVALID_VALUE;
  pthread_mutex_lock(&fake_lock);
  fake_deps_wait(&e->deps);
  pthread_mutex_unlock(&fake_lock);
  return 0;
}
FAKE_EXPORT CUresult cuEventQuery(CUevent e) {
  if (!e) return INVALID_VALUE;
  pthread_mutex_lock(&fake_lock);
  int done = deps_done(&e->deps);
  pthread_mutex_unlock(&fake_lock);
  return done ? 0 : JX_CUDA_ERROR_NOT_READY;
}
FAKE_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
  (void)a;
  (void)b;
  *ms = 0;
  return 0;
}
FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  if (!e) return INVALID_VALUE;
  pthread_mutex_lock(&fake_lock);
  deps_free(&e->deps);
  pthread_mutex_unlock(&fake_lock);
  free(e);
  return 0;
}

/* ---- kernels: none here (nccl_fake_kernels.c runs them in the emulator
 * when the library is built with NCCL_FAKE_KERNELS) ---- */
#ifndef NCCL_FAKE_KERNELS

FAKE_EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) {
  (void)m;
  (void)image;
  return NOT_SUPPORTED;
}
FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  (void)f;
  (void)m;
  (void)name;
  return NOT_SUPPORTED;
}
FAKE_EXPORT CUresult cuModuleUnload(CUmodule m) {
  (void)m;
  return NOT_SUPPORTED;
}
FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes,
                                    CUstream s, void **params, void **extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared_bytes;
  (void)s, (void)params, (void)extra;
  return NOT_SUPPORTED;
}
#endif

FAKE_EXPORT CUresult cuGetErrorName(CUresult r, const char **name) {
  switch (r) {
  case 0: *name = "CUDA_SUCCESS"; return 0;
  case INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return 0;
  case JX_CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
  case NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
  case INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; return 0;
  case INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
  case JX_CUDA_ERROR_NOT_READY: *name = "CUDA_ERROR_NOT_READY"; return 0;
  case NOT_SUPPORTED: *name = "CUDA_ERROR_NOT_SUPPORTED"; return 0;
  case INVALID_IMAGE: *name = "CUDA_ERROR_INVALID_IMAGE"; return 0;
  case NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; return 0;
  case LAUNCH_FAILED: *name = "CUDA_ERROR_LAUNCH_FAILED"; return 0;
  default: *name = NULL; return INVALID_VALUE;
  }
}
FAKE_EXPORT CUresult cuGetErrorString(CUresult r, const char **text) {
  const char *name = NULL;
  if (cuGetErrorName(r, &name)) return INVALID_VALUE;
  *text = "reported by the fake driver (tests/cuda_fake/nccl_fake_driver.c)";
  return 0;
}
