#include "cuda_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"
#include <jx/distributed.h>

enum { MAX_DEVICES = 64 };

static struct {
  int count, driver_version;
  char error[1024];
  jx_cuda_device_info info[MAX_DEVICES];
  jx_cuda_device *open[MAX_DEVICES];
} devices;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

/* Sets devices.error to "CUDA: <call>: <CUDA error>" and returns 0 when r fails. */
static int probe_ok(CUresult r, const char *call) {
  if (r == JX_CUDA_SUCCESS) return 1;
  char what[512];
  jx_cuda_describe(r, what, sizeof what);
  snprintf(devices.error, sizeof devices.error, "CUDA: %s: %s%s", call, what,
           r == JX_CUDA_ERROR_STUB_LIBRARY
               ? " (the libcuda loaded is the toolkit's stub: install the NVIDIA driver)"
               : "");
  return 0;
}

static void probe(void) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  if (!cu) {
    snprintf(devices.error, sizeof devices.error, "%s", jx_cuda_driver_load_error());
    return;
  }
  int n = 0;
  if (!probe_ok(cu->Init(0), "cuInit")) return;
  if (cu->DriverGetVersion(&devices.driver_version) != JX_CUDA_SUCCESS) devices.driver_version = 0;
  if (!probe_ok(cu->DeviceGetCount(&n), "cuDeviceGetCount")) return;
  if (n > MAX_DEVICES) n = MAX_DEVICES;
  for (int k = 0; k < n; k++) {
    jx_cuda_device_info *d = &devices.info[k];
    d->ordinal = k;
    if (!probe_ok(cu->DeviceGet(&d->handle, k), "cuDeviceGet") ||
        !probe_ok(cu->DeviceGetName(d->name, (int)sizeof d->name, d->handle), "cuDeviceGetName") ||
        !probe_ok(cu->DeviceGetAttribute(&d->cc_major, JX_CU_ATTR_CC_MAJOR, d->handle),
                  "cuDeviceGetAttribute") ||
        !probe_ok(cu->DeviceGetAttribute(&d->cc_minor, JX_CU_ATTR_CC_MINOR, d->handle),
                  "cuDeviceGetAttribute") ||
        !probe_ok(cu->DeviceGetAttribute(&d->sm_count, JX_CU_ATTR_SM_COUNT, d->handle),
                  "cuDeviceGetAttribute") ||
        !probe_ok(cu->DeviceTotalMem(&d->total_memory, d->handle), "cuDeviceTotalMem_v2"))
      return; /* devices.count stays 0: a half-described machine is not used */
    snprintf(d->arch, sizeof d->arch, "sm_%d%d", d->cc_major, d->cc_minor);
  }
  if (n == 0) snprintf(devices.error, sizeof devices.error, "CUDA: the driver sees no device");
  devices.count = n;
}

int jx_cuda_probe(void) {
  pthread_once(&probe_once, probe);
  return devices.count;
}

const char *jx_cuda_probe_error(void) {
  pthread_once(&probe_once, probe);
  return devices.count ? "" : devices.error;
}

int jx_cuda_driver_version(void) {
  pthread_once(&probe_once, probe);
  return devices.driver_version;
}

const jx_cuda_device_info *jx_cuda_device_describe(int ordinal) {
  if (ordinal < 0 || ordinal >= jx_cuda_probe()) return NULL;
  return &devices.info[ordinal];
}

/* The allocator's view of the device: cuMemAlloc/cuMemFree in d's context. */
static int device_alloc(void *ctx, size_t bytes, uint64_t *ptr) {
  jx_cuda_device *d = ctx;
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  CUdeviceptr p = 0;
  if (cu->CtxSetCurrent(d->context) != JX_CUDA_SUCCESS) return 1;
  CUresult r = cu->MemAlloc(&p, bytes);
  *ptr = p;
  return r != JX_CUDA_SUCCESS;
}

static void device_free(void *ctx, uint64_t ptr) {
  jx_cuda_device *d = ctx;
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  if (cu->CtxSetCurrent(d->context) == JX_CUDA_SUCCESS) cu->MemFree((CUdeviceptr)ptr);
}

static jx_status open_device(int ordinal, jx_cuda_device **out) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  const jx_cuda_device_info *info = &devices.info[ordinal];
  size_t cap = 0;
  jx_status st =
      jx_cuda_memory_cap_parse(jx_env_string("JX_CUDA_MEMORY_CAP"), info->total_memory, &cap);
  if (st) return st;
  jx_cuda_device *d = calloc(1, sizeof *d);
  if (!d) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA: out of host memory");
  d->info = *info;
  pthread_mutex_init(&d->staging_lock, NULL);
  st = jx_cuda_check(cu->DevicePrimaryCtxRetain(&d->context, info->handle),
                     "cuDevicePrimaryCtxRetain", ordinal);
  if (!st) st = jx_cuda_check(cu->CtxSetCurrent(d->context), "cuCtxSetCurrent", ordinal);
  CUstream *streams[] = {&d->compute, &d->copy, &d->comm};
  for (int k = 0; k < 3 && !st; k++)
    st = jx_cuda_check(cu->StreamCreate(streams[k], JX_CU_STREAM_NON_BLOCKING), "cuStreamCreate",
                       ordinal);
  if (!st) {
    char name[320];
    snprintf(name, sizeof name, "CUDA device %d (%s)", ordinal, info->name);
    d->memory =
        jx_cuda_allocator_create((jx_cuda_memory_ops){device_alloc, device_free, d}, cap, name);
    if (!d->memory) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA: out of host memory");
  }
  if (st) {
    for (int k = 0; k < 3; k++)
      if (*streams[k]) cu->StreamDestroy(*streams[k]);
    if (d->context) cu->DevicePrimaryCtxRelease(info->handle);
    pthread_mutex_destroy(&d->staging_lock);
    free(d);
    return st;
  }
  *out = d;
  return JX_OK;
}

jx_status jx_cuda_device_open(int ordinal, jx_cuda_device **out) {
  *out = NULL;
  int n = jx_cuda_probe();
  if (n == 0) return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s", jx_cuda_probe_error());
  if (ordinal < 0 || ordinal >= n)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "CUDA: there is no device %d (this machine has %d: 0..%d)", ordinal, n,
                        n - 1);
  pthread_mutex_lock(&open_lock);
  jx_status st = JX_OK;
  if (!devices.open[ordinal]) st = open_device(ordinal, &devices.open[ordinal]);
  *out = devices.open[ordinal];
  pthread_mutex_unlock(&open_lock);
  if (st) return st;
  return jx_cuda_device_make_current(*out);
}

jx_status jx_cuda_process_device(int *ordinal) {
  *ordinal = 0;
  int n = jx_cuda_probe();
  if (n == 0) return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s", jx_cuda_probe_error());
  int g = jx_process_gpu(n);
  if (g == -2) return jx_last_status();
  if (g >= 0) *ordinal = g;
  return JX_OK;
}

jx_status jx_cuda_device_make_current(const jx_cuda_device *d) {
  return jx_cuda_check(jx_cuda_driver()->CtxSetCurrent(d->context), "cuCtxSetCurrent",
                       d->info.ordinal);
}
