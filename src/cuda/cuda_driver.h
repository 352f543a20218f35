/* The CUDA driver API (libcuda.so.1) through a function table filled by
 * dlsym. The few types and constants jx needs are declared here with the
 * driver's C ABI, so that building jx needs no CUDA header. Symbols are the
 * versioned names cuda.h maps its calls to (cuMemAlloc -> cuMemAlloc_v2);
 * the per-thread-default-stream variants (_ptsz) are not used: jx always
 * passes its own streams.
 *
 * The driver is looked up as $JX_CUDA_DRIVER_PATH, else libcuda.so.1 and
 * libcuda.so on the loader's path only: the toolkit's lib64 holds a stub
 * libcuda that loads but runs nothing (cuInit says so, and the message does). */
#ifndef JX_SRC_CUDA_CUDA_DRIVER_H
#define JX_SRC_CUDA_CUDA_DRIVER_H

#include <jx/base.h>
#include <stddef.h>

typedef int CUresult; /* CUDA_SUCCESS == 0 */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

enum {
  JX_CUDA_SUCCESS = 0,
  JX_CUDA_ERROR_OUT_OF_MEMORY = 2,
  JX_CUDA_ERROR_STUB_LIBRARY = 34,
  JX_CUDA_ERROR_NO_DEVICE = 100,
  JX_CUDA_ERROR_NOT_READY = 600
};
enum { /* CUdevice_attribute values */
       JX_CU_ATTR_SM_COUNT = 16,
       JX_CU_ATTR_CC_MAJOR = 75,
       JX_CU_ATTR_CC_MINOR = 76
};
enum { JX_CU_STREAM_NON_BLOCKING = 0x1, JX_CU_EVENT_DISABLE_TIMING = 0x2 };

typedef struct {
  CUresult (*Init)(unsigned flags);
  CUresult (*DriverGetVersion)(int *version);
  CUresult (*DeviceGetCount)(int *count);
  CUresult (*DeviceGet)(CUdevice *dev, int ordinal);
  CUresult (*DeviceGetName)(char *name, int len, CUdevice dev);
  CUresult (*DeviceGetAttribute)(int *value, int attribute, CUdevice dev);
  CUresult (*DeviceTotalMem)(size_t *bytes, CUdevice dev);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
  CUresult (*DevicePrimaryCtxRelease)(CUdevice dev);
  CUresult (*CtxSetCurrent)(CUcontext ctx);
  CUresult (*MemGetInfo)(size_t *free_bytes, size_t *total_bytes);
  CUresult (*MemAlloc)(CUdeviceptr *ptr, size_t bytes);
  CUresult (*MemFree)(CUdeviceptr ptr);
  CUresult (*MemAllocHost)(void **ptr, size_t bytes);
  CUresult (*MemFreeHost)(void *ptr);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream s);
  CUresult (*MemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream s);
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);
  CUresult (*MemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream s);
  CUresult (*StreamCreate)(CUstream *s, unsigned flags);
  CUresult (*StreamDestroy)(CUstream s);
  CUresult (*StreamSynchronize)(CUstream s);
  CUresult (*StreamWaitEvent)(CUstream s, CUevent e, unsigned flags);
  CUresult (*EventCreate)(CUevent *e, unsigned flags);
  CUresult (*EventRecord)(CUevent e, CUstream s);
  CUresult (*EventSynchronize)(CUevent e);
  CUresult (*EventQuery)(CUevent e);
  CUresult (*EventElapsedTime)(float *ms, CUevent start, CUevent end);
  CUresult (*EventDestroy)(CUevent e);
  CUresult (*ModuleLoadData)(CUmodule *m, const void *image);
  CUresult (*ModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
  CUresult (*ModuleUnload)(CUmodule m);
  CUresult (*LaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                           unsigned by, unsigned bz, unsigned shared_bytes, CUstream s,
                           void **params, void **extra);
  CUresult (*GetErrorName)(CUresult r, const char **name);
  CUresult (*GetErrorString)(CUresult r, const char **text);
} jx_cuda_driver_api;

/* The table, loading the library on the first call (thread-safe), or NULL
 * when libcuda cannot be opened or lacks a symbol; records no error. */
const jx_cuda_driver_api *jx_cuda_driver(void);

/* Why jx_cuda_driver() is NULL ("CUDA driver not found: ..."), or "". */
const char *jx_cuda_driver_load_error(void);

/* JX_OK for CUDA_SUCCESS; else records and returns an error naming the call,
 * the CUDA error's name and text and the device (device < 0: none), e.g.
 * "CUDA: cuMemAlloc_v2 on device 0: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
 * CUDA_ERROR_OUT_OF_MEMORY maps to JX_ERR_OUT_OF_MEMORY, others to
 * JX_ERR_INTERNAL. */
jx_status jx_cuda_check(CUresult r, const char *call, int device);

/* "CUDA_ERROR_X (text)" for r into out; works without the driver. */
void jx_cuda_describe(CUresult r, char *out, size_t cap);

#endif
