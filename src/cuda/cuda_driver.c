#include "cuda_driver.h"

#include <pthread.h>
#include <stdio.h>

#include "../base/error.h"
#include "cuda_loader.h"

static jx_cuda_driver_api api;
static void *lib;
static char load_error[1024];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
  static const char *const sonames[] = {"libcuda.so.1", "libcuda.so", NULL};
  static const jx_cuda_library driver = {
      "CUDA driver", "JX_CUDA_DRIVER_PATH", sonames, 0,
      "install the NVIDIA driver (its libcuda.so.1 comes with it, not with the toolkit)"};
#define SYM(field, name)                                                                           \
  { (void **)&api.field, name, NULL, 0 }
  const jx_cuda_symbol syms[] = {
      SYM(Init, "cuInit"),
      SYM(DriverGetVersion, "cuDriverGetVersion"),
      SYM(DeviceGetCount, "cuDeviceGetCount"),
      SYM(DeviceGet, "cuDeviceGet"),
      SYM(DeviceGetName, "cuDeviceGetName"),
      SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
      SYM(DeviceTotalMem, "cuDeviceTotalMem_v2"),
      SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
      SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
      SYM(CtxSetCurrent, "cuCtxSetCurrent"),
      SYM(MemGetInfo, "cuMemGetInfo_v2"),
      SYM(MemAlloc, "cuMemAlloc_v2"),
      SYM(MemFree, "cuMemFree_v2"),
      SYM(MemAllocHost, "cuMemAllocHost_v2"),
      SYM(MemFreeHost, "cuMemFreeHost"),
      SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
      SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
      SYM(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
      SYM(MemsetD8Async, "cuMemsetD8Async"),
      SYM(StreamCreate, "cuStreamCreate"),
      SYM(StreamDestroy, "cuStreamDestroy_v2"),
      SYM(StreamSynchronize, "cuStreamSynchronize"),
      SYM(StreamWaitEvent, "cuStreamWaitEvent"),
      SYM(EventCreate, "cuEventCreate"),
      SYM(EventRecord, "cuEventRecord"),
      SYM(EventSynchronize, "cuEventSynchronize"),
      SYM(EventQuery, "cuEventQuery"),
      /* CUDA 12.8 added the _v2 (same signature); older drivers have only the first */
      {(void **)&api.EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime", 0},
      SYM(EventDestroy, "cuEventDestroy_v2"),
      SYM(ModuleLoadData, "cuModuleLoadData"),
      SYM(ModuleGetFunction, "cuModuleGetFunction"),
      SYM(ModuleUnload, "cuModuleUnload"),
      SYM(LaunchKernel, "cuLaunchKernel"),
      SYM(GetErrorName, "cuGetErrorName"),
      SYM(GetErrorString, "cuGetErrorString"),
  };
#undef SYM
  lib = jx_cuda_library_open(&driver, syms, (int)(sizeof syms / sizeof syms[0]), load_error,
                             sizeof load_error);
}

const jx_cuda_driver_api *jx_cuda_driver(void) {
  pthread_once(&load_once, load);
  return lib ? &api : NULL;
}

const char *jx_cuda_driver_load_error(void) {
  pthread_once(&load_once, load);
  return load_error;
}

void jx_cuda_describe(CUresult r, char *out, size_t cap) {
  const char *name = NULL, *text = NULL;
  if (jx_cuda_driver()) {
    if (api.GetErrorName(r, &name) != JX_CUDA_SUCCESS) name = NULL;
    if (api.GetErrorString(r, &text) != JX_CUDA_SUCCESS) text = NULL;
  }
  if (name)
    snprintf(out, cap, "%s (%s)", name, text ? text : "no description");
  else
    snprintf(out, cap, "CUDA error %d", r);
}

jx_status jx_cuda_check(CUresult r, const char *call, int device) {
  if (r == JX_CUDA_SUCCESS) return JX_OK;
  char what[512];
  jx_cuda_describe(r, what, sizeof what);
  jx_status code = r == JX_CUDA_ERROR_OUT_OF_MEMORY ? JX_ERR_OUT_OF_MEMORY : JX_ERR_INTERNAL;
  if (device >= 0) return jx_error_set(code, "CUDA: %s on device %d: %s", call, device, what);
  return jx_error_set(code, "CUDA: %s: %s", call, what);
}
