/* The triad y = x + s * w split over threads: the memory bandwidth that a
 * fused elementwise kernel or a reduction competes with (it reads two
 * arrays and writes one). Include after bench_util.h. */
#ifndef JX_BENCH_TRIAD_H
#define JX_BENCH_TRIAD_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* y = x + s * w over [begin, end): one thread's share of the triad */
typedef struct {
  const float *x, *w;
  float *y;
  int64_t begin, end;
} bench_triad_part;

/* in chunks of 16, so that gcc vectorizes it at -O2 (its cheap cost model
 * takes only loops of known trip count): the memory's bandwidth, not a
 * scalar loop's */
static void *bench_triad_part_run(void *arg) {
  bench_triad_part *t = arg;
  const float *restrict x = t->x, *restrict w = t->w;
  float *restrict y = t->y;
  int64_t i = t->begin;
  for (; i + 16 <= t->end; i += 16)
    for (int k = 0; k < 16; k++) y[i + k] = x[i + k] + 0.5f * w[i + k];
  for (; i < t->end; i++) y[i] = x[i] + 0.5f * w[i];
  return NULL;
}

/* The threads the kernels use: JX_NUM_THREADS, else the online CPUs (1..64). */
static inline int bench_triad_threads(void) {
  const char *nt = getenv("JX_NUM_THREADS");
  int threads = nt ? atoi(nt) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  return threads < 1 ? 1 : threads > 64 ? 64 : threads;
}

/* One triad over n floats on `threads` threads (at most 64), in ns. */
static inline double bench_triad_ns(const float *x, const float *w, float *y, int64_t n,
                                    int threads) {
  pthread_t th[64];
  bench_triad_part parts[64];
  double t0 = bench_now_ns();
  for (int k = 0; k < threads; k++) {
    parts[k] = (bench_triad_part){x, w, y, n * k / threads, n * (k + 1) / threads};
    pthread_create(&th[k], NULL, bench_triad_part_run, &parts[k]);
  }
  for (int k = 0; k < threads; k++) pthread_join(th[k], NULL);
  return bench_now_ns() - t0;
}

#endif
