#include "cuda_copy.h"

#include <stdatomic.h>
#include <string.h>

static _Atomic uint64_t up_bytes, down_bytes;
static _Atomic int64_t up_copies, down_copies;

jx_cuda_copy_stats jx_cuda_copy_stats_get(void) {
  return (jx_cuda_copy_stats){atomic_load(&up_bytes), atomic_load(&down_bytes),
                              atomic_load(&up_copies), atomic_load(&down_copies)};
}

/* Allocates the staging buffers and their events on first use; under staging_lock. */
static jx_status ensure_staging(jx_cuda_device *d) {
  if (d->staging[1]) return JX_OK;
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  int dev = d->info.ordinal;
  for (int b = 0; b < 2; b++) {
    if (!d->staging_free[b]) {
      jx_status st = jx_cuda_check(cu->EventCreate(&d->staging_free[b], JX_CU_EVENT_DISABLE_TIMING),
                                   "cuEventCreate", dev);
      if (st) return st;
    }
    if (!d->staging[b]) {
      jx_status st = jx_cuda_check(cu->MemAllocHost(&d->staging[b], JX_CUDA_STAGING_BYTES),
                                   "cuMemAllocHost_v2", dev);
      if (st) return st;
    }
  }
  d->staging_bytes = JX_CUDA_STAGING_BYTES;
  return JX_OK;
}

/* What both directions do first: the staging lock taken (held on return,
 * whatever the status), d's context made current, the copy counted and the
 * staging buffers made. */
static jx_status begin_copy(jx_cuda_device *d, size_t bytes, _Atomic uint64_t *total_bytes,
                            _Atomic int64_t *copies) {
  pthread_mutex_lock(&d->staging_lock);
  jx_status st = jx_cuda_device_make_current(d);
  if (st) return st;
  atomic_fetch_add_explicit(total_bytes, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(copies, 1, memory_order_relaxed);
  return ensure_staging(d);
}

jx_status jx_cuda_copy_to_device(jx_cuda_device *d, CUdeviceptr dst, const void *src, size_t bytes,
                                 CUstream stream) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  int dev = d->info.ordinal;
  jx_status st = begin_copy(d, bytes, &up_bytes, &up_copies);
  for (size_t off = 0, i = 0; off < bytes && !st; off += d->staging_bytes, i++) {
    size_t n = bytes - off < d->staging_bytes ? bytes - off : d->staging_bytes;
    int b = (int)(i % 2);
    /* the buffer's previous copy (of this call or an earlier one) has left it */
    st = jx_cuda_check(cu->EventSynchronize(d->staging_free[b]), "cuEventSynchronize", dev);
    if (st) break;
    memcpy(d->staging[b], (const char *)src + off, n);
    st = jx_cuda_check(cu->MemcpyHtoDAsync(dst + off, d->staging[b], n, stream),
                       "cuMemcpyHtoDAsync_v2", dev);
    if (!st) st = jx_cuda_check(cu->EventRecord(d->staging_free[b], stream), "cuEventRecord", dev);
  }
  pthread_mutex_unlock(&d->staging_lock);
  return st;
}

jx_status jx_cuda_copy_to_host(jx_cuda_device *d, void *dst, CUdeviceptr src, size_t bytes,
                               CUstream stream) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  int dev = d->info.ordinal;
  jx_status st = begin_copy(d, bytes, &down_bytes, &down_copies);
  /* chunk i lands in buffer i % 2 while chunk i - 1 is copied out of the other */
  size_t chunk = d->staging_bytes, nchunks = chunk ? (bytes + chunk - 1) / chunk : 0;
  for (size_t i = 0; i <= nchunks && !st; i++) {
    if (i < nchunks) {
      int b = (int)(i % 2);
      size_t off = i * chunk, n = bytes - off < chunk ? bytes - off : chunk;
      st = jx_cuda_check(cu->EventSynchronize(d->staging_free[b]), "cuEventSynchronize", dev);
      if (!st)
        st = jx_cuda_check(cu->MemcpyDtoHAsync(d->staging[b], src + off, n, stream),
                           "cuMemcpyDtoHAsync_v2", dev);
      if (!st)
        st = jx_cuda_check(cu->EventRecord(d->staging_free[b], stream), "cuEventRecord", dev);
    }
    if (i > 0 && !st) {
      size_t j = i - 1, off = j * chunk, n = bytes - off < chunk ? bytes - off : chunk;
      int b = (int)(j % 2);
      st = jx_cuda_check(cu->EventSynchronize(d->staging_free[b]), "cuEventSynchronize", dev);
      if (!st) memcpy((char *)dst + off, d->staging[b], n);
    }
  }
  pthread_mutex_unlock(&d->staging_lock);
  return st;
}
