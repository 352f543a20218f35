/* Device-resident arrays on CUDA devices (cuda_resident.h). */
#include "cuda_resident.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "../base/error.h"
#include "cuda_copy.h"

struct jx_cuda_ready {
  atomic_int refs;
  jx_cuda_device *device;
  CUevent event;
};

typedef struct {
  jx_device_copy base; /* first: array.c sees only this */
  jx_cuda_ready *ready;
} cuda_copy;

jx_cuda_ready *jx_cuda_ready_record(jx_cuda_device *d) {
  jx_cuda_ready *r = calloc(1, sizeof *r);
  if (!r) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA executor: out of host memory");
    return NULL;
  }
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  int dev = d->info.ordinal;
  jx_status st =
      jx_cuda_check(cu->EventCreate(&r->event, JX_CU_EVENT_DISABLE_TIMING), "cuEventCreate", dev);
  if (!st) st = jx_cuda_check(cu->EventRecord(r->event, d->compute), "cuEventRecord", dev);
  if (st) {
    if (r->event) cu->EventDestroy(r->event);
    free(r);
    return NULL;
  }
  atomic_init(&r->refs, 1);
  r->device = d;
  return r;
}

void jx_cuda_ready_release(jx_cuda_ready *r) {
  if (!r || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1) return;
  jx_cuda_driver()->EventDestroy(r->event);
  free(r);
}

static _Atomic int64_t downloads;

int64_t jx_cuda_resident_downloads(void) {
  return atomic_load_explicit(&downloads, memory_order_relaxed);
}

/* Runs on whichever thread reads the value (the copy makes d's context
 * current there), ordered after the work queued on d's compute stream. */
static jx_status download(jx_device_copy *c, void *dst, size_t bytes) {
  jx_cuda_device *d = c->device;
  atomic_fetch_add_explicit(&downloads, 1, memory_order_relaxed);
  if (!bytes) return JX_OK;
  return jx_cuda_copy_to_host(d, dst, (CUdeviceptr)c->ptr, bytes, d->compute);
}

static jx_status wait_ready(jx_device_copy *c) {
  jx_cuda_device *d = c->device;
  jx_cuda_ready *r = ((cuda_copy *)c)->ready;
  jx_status st = jx_cuda_device_make_current(d);
  if (st) return st;
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  return r ? jx_cuda_check(cu->EventSynchronize(r->event), "cuEventSynchronize", d->info.ordinal)
           : jx_cuda_check(cu->StreamSynchronize(d->compute), "cuStreamSynchronize",
                           d->info.ordinal);
}

/* Later work on the compute stream that reuses the block is ordered after
 * every reader queued before, so the block may go back at once. */
static void release(jx_device_copy *c) {
  jx_cuda_device *d = c->device;
  jx_cuda_allocator_free(d->memory, c->ptr);
  jx_cuda_ready_release(((cuda_copy *)c)->ready);
  free(c);
}

int jx_cuda_resident_attach(jx_array *a, jx_cuda_device *d, uint64_t ptr, jx_cuda_ready *ready) {
  cuda_copy *c = malloc(sizeof *c);
  if (!c) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA executor: out of host memory");
    return -1;
  }
  c->base = (jx_device_copy){d, ptr, download, wait_ready, release};
  c->ready = ready;
  if (!jx_array_attach_device_copy(a, &c->base)) {
    free(c);
    return 0;
  }
  if (ready) atomic_fetch_add_explicit(&ready->refs, 1, memory_order_relaxed);
  return 1;
}

uint64_t jx_cuda_resident_ptr(const jx_array *a, const jx_cuda_device *d) {
  const jx_device_copy *c = jx_array_device_copy(a);
  return c && c->device == d && c->release == release ? c->ptr : 0;
}

jx_status jx_cuda_resident_take(jx_array *a, jx_cuda_device *d, const char *fn, int input,
                                uint64_t *ptr) {
  *ptr = 0;
  if (!jx_cuda_resident_ptr(a, d))
    return jx_error_set(JX_ERR_INTERNAL,
                        "CUDA executor: the donated array has no copy on device %d",
                        d->info.ordinal);
  jx_device_copy *c = jx_array_take_device_copy(a, fn, input);
  if (!c) return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  *ptr = c->ptr;
  jx_cuda_ready_release(((cuda_copy *)c)->ready);
  free(c);
  return JX_OK;
}
