/* Timing GPU work with CUDA events, shared by the bench_cuda_* programs:
 * the median of `runs` event-timed calls on one stream after `warmup`
 * untimed ones. Include after bench_util.h. */
#ifndef JX_BENCH_CUDA_TIMING_H
#define JX_BENCH_CUDA_TIMING_H

#include <jx/base.h>
#include <stdlib.h>

#include "cuda/cuda_driver.h"

/* *median_ms of `runs` (at most 64) calls of call(ctx), each between two
 * events recorded on stream s; the first error of a call or of CUDA. */
static inline jx_status bench_cuda_median_ms(jx_status (*call)(const void *ctx), const void *ctx,
                                             CUstream s, int warmup, int runs, double *median_ms) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  CUevent start, end;
  double t[64];
  if (runs < 1 || runs > 64) return jx_report_error(JX_ERR_INVALID_ARGUMENT, "runs %d", runs);
  jx_status st = jx_cuda_check(cu->EventCreate(&start, 0), "cuEventCreate", 0);
  if (!st) st = jx_cuda_check(cu->EventCreate(&end, 0), "cuEventCreate", 0);
  for (int i = 0; i < warmup && !st; i++) st = call(ctx);
  for (int i = 0; i < runs && !st; i++) {
    float ms = 0;
    st = jx_cuda_check(cu->EventRecord(start, s), "cuEventRecord", 0);
    if (!st) st = call(ctx);
    if (!st) st = jx_cuda_check(cu->EventRecord(end, s), "cuEventRecord", 0);
    if (!st) st = jx_cuda_check(cu->EventSynchronize(end), "cuEventSynchronize", 0);
    if (!st) st = jx_cuda_check(cu->EventElapsedTime(&ms, start, end), "cuEventElapsedTime", 0);
    t[i] = ms;
  }
  if (st) return st;
  qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
  *median_ms = t[runs / 2];
  cu->EventDestroy(start);
  cu->EventDestroy(end);
  return JX_OK;
}

#endif
