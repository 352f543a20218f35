/* all_reduce (sum, f32) on a local communicator of 8 rank threads, 1 KiB to
 * 64 MiB per rank. Prints one JSON line per size: the median time of a call
 * (over repetitions; a repetition's time is the slowest rank's, measured from
 * a common barrier), the algorithm bandwidth bytes / time, and, measured in the
 * same run, the bandwidth of one thread's memcpy of the same size. */
#include "bench_util.h"
#include "parallel/comm.h"
#include <jx/jx.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RANKS = 8, MAXREPS = 400 };

typedef struct {
  jx_comm *c;
  size_t count;
  int reps;
  double t[RANKS][MAXREPS];
  int failed;
} bench;

typedef struct {
  bench *b;
  int rank;
} targ;

static void *rank_main(void *p) {
  targ *a = p;
  bench *b = a->b;
  int r = a->rank;
  /* each rank touches its own buffers first, as a device would own its memory */
  float *send = malloc(b->count * sizeof *send), *recv = malloc(b->count * sizeof *recv);
  for (size_t i = 0; i < b->count; i++) send[i] = (float)((i + (size_t)r) % 17);
  memset(recv, 0, b->count * sizeof *recv);
  int bad =
      jx_comm_all_reduce(b->c, r, send, recv, b->count, JX_F32, JX_REDUCE_SUM, 60); /* warm-up */
  for (int k = 0; k < b->reps && !bad; k++) {
    bad |= jx_comm_barrier(b->c, r, 60);
    double t0 = bench_now_ns();
    bad |= jx_comm_all_reduce(b->c, r, send, recv, b->count, JX_F32, JX_REDUCE_SUM, 60);
    b->t[r][k] = bench_now_ns() - t0;
  }
  if (bad) {
    fprintf(stderr, "bench_allreduce: rank %d: %s\n", r, jx_last_error());
    b->failed = 1;
  }
  free(send);
  free(recv);
  return NULL;
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
  return t[n / 2];
}

/* one thread's memcpy of the same size, median over reps (after one warm-up) */
static double memcpy_ns(size_t bytes, int reps) {
  char *a = malloc(bytes), *b = malloc(bytes);
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double t[MAXREPS];
  for (int k = -1; k < reps; k++) {
    double t0 = bench_now_ns();
    memcpy(b, a, bytes);
    __asm__ volatile("" : : "r"(b) : "memory"); /* keep the copy */
    if (k >= 0) t[k] = bench_now_ns() - t0;
  }
  free(a);
  free(b);
  return median(t, reps);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 7;
  if (runs < 1 || runs > 100) runs = 7;
  static const size_t sizes[] = {1 << 10, 16 << 10, 256 << 10, 4 << 20, 64 << 20};
  static const char *const names[] = {"1KiB", "16KiB", "256KiB", "4MiB", "64MiB"};
  bench *b = calloc(1, sizeof *b);
  b->c = jx_comm_local_create(RANKS, "bench_allreduce", NULL);
  for (int s = 0; s < 5; s++) {
    size_t bytes = sizes[s];
    /* more repetitions for small sizes, where a single call is noise */
    int reps = bytes <= (256 << 10) ? 200 : runs * 3;
    if (reps > MAXREPS) reps = MAXREPS;
    b->count = bytes / sizeof(float);
    b->reps = reps;
    pthread_t th[RANKS];
    targ a[RANKS];
    for (int r = 0; r < RANKS; r++) {
      a[r] = (targ){b, r};
      pthread_create(&th[r], NULL, rank_main, &a[r]);
    }
    for (int r = 0; r < RANKS; r++) pthread_join(th[r], NULL);
    if (b->failed) return 1;
    double t[MAXREPS];
    for (int k = 0; k < reps; k++) {
      t[k] = 0;
      for (int r = 0; r < RANKS; r++) t[k] = b->t[r][k] > t[k] ? b->t[r][k] : t[k];
    }
    double med = median(t, reps), cp = memcpy_ns(bytes, reps);
    printf("{\"bench\":\"allreduce_f32_8x_%s\",\"impl\":\"jx\",\"median_ns\":%.0f,\"min_ns\":%.0f,"
           "\"runs\":%d,\"bytes\":%zu,\"algbw_gb_per_s\":%.2f,\"memcpy_gb_per_s\":%.2f,"
           "\"of_memcpy\":%.2f}\n",
           names[s], med, t[0], reps, bytes, bytes / med, bytes / cp, cp / med);
    fflush(stdout);
  }
  jx_comm_release(b->c);
  free(b);
  jx_shutdown();
  return 0;
}
