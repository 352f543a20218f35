/* CUDA devices: discovery (count, name, compute capability, SMs, memory)
 * and the state jx keeps per device: its primary context, three streams
 * (compute, copies, communication: collectives overlap compute and are
 * ordered against it with events), the caching allocator and the pinned
 * staging buffers of host<->device copies. A device opened stays open for
 * the life of the process, as its primary context does. */
#ifndef JX_SRC_CUDA_CUDA_DEVICE_H
#define JX_SRC_CUDA_CUDA_DEVICE_H

#include <jx/base.h>
#include <pthread.h>
#include <stddef.h>

#include "cuda_alloc.h"
#include "cuda_driver.h"

typedef struct {
  int ordinal;
  CUdevice handle;
  char name[256];
  int cc_major, cc_minor; /* compute capability: 9.0 on H100/H200 */
  int sm_count;
  size_t total_memory;
  char arch[16]; /* "sm_90": what NVRTC compiles for */
} jx_cuda_device_info;

typedef struct {
  jx_cuda_device_info info;
  CUcontext context;
  CUstream compute, copy, comm;
  jx_cuda_allocator *memory;
  /* pinned staging (cuda_copy.c): two buffers, so one fills while the other copies */
  pthread_mutex_t staging_lock;
  void *staging[2];
  CUevent staging_free[2];
  size_t staging_bytes;
} jx_cuda_device;

/* The number of usable CUDA devices: 0 when the driver is missing, cuInit
 * fails or there is no GPU. Never records an error; thread-safe; the driver
 * is initialized on the first call. */
int jx_cuda_probe(void);

/* Why jx_cuda_probe() is 0 ("CUDA driver not found: ...", "CUDA: cuInit:
 * CUDA_ERROR_NO_DEVICE (...)"), or "" when devices exist. */
const char *jx_cuda_probe_error(void);

/* The driver's CUDA version (13000 for 13.0), or 0 when it is not loaded. */
int jx_cuda_driver_version(void);

/* Device `ordinal`'s description, or NULL when there is no such device. */
const jx_cuda_device_info *jx_cuda_device_describe(int ordinal);

/* Opens device `ordinal` on the first call (retains its primary context,
 * creates the streams and the allocator, capped by JX_CUDA_MEMORY_CAP) and
 * makes its context current on the calling thread. Errors: no driver
 * (JX_ERR_UNIMPLEMENTED), no such device (JX_ERR_INVALID_ARGUMENT), a
 * malformed cap, or the failing CUDA call. Thread-safe. */
jx_status jx_cuda_device_open(int ordinal, jx_cuda_device **out);

/* The CUDA device this process runs its unsharded programs on: the GPU
 * jx_process_gpu picks (its local index among the job's processes on its
 * host, one GPU each, counted in the devices CUDA_VISIBLE_DEVICES leaves)
 * when several processes share the host, else device 0. Errors: no driver
 * (JX_ERR_UNIMPLEMENTED), more processes on the host than GPUs
 * (JX_ERR_INVALID_ARGUMENT, naming the counts). */
jx_status jx_cuda_process_device(int *ordinal);

/* Makes d's context current on the calling thread (CUDA contexts are per thread). */
jx_status jx_cuda_device_make_current(const jx_cuda_device *d);

#endif
