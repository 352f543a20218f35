/* jx's packed f32 GEMM (src/prims/gemm_f32.c) against cblas_sgemm on the
 * GPT train step's products: 2048 rows (B x T at every size of
 * bench/compare.py's gpt workload) by d and 4 d (d = 128, 256, 512), in the
 * three layouts of the step: NN (forward x W), NT (input gradients dy W^T)
 * and TN (weight gradients x^T dy). OpenBLAS runs on one thread, as jx
 * runs it.
 *
 * Alternating rounds: in each round every shape is timed once per
 * implementation (jx, then sgemm, each the best of a few calls), as CPU
 * time of one thread and as wall time with the rows split in two halves on
 * two threads (jx's pool splits a GEMM by rows the same way). Prints one
 * JSON line per shape and layout with the medians of GFLOP/s and the
 * median and range of the jx / sgemm time ratio.
 *
 * Usage: bench_matmul_kernel [rounds] [d ...]  (default 5 rounds, d 128 256 512) */
#include "bench_util.h"
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prims/gemm_f32.h"

enum { ROWS = 2048, MAX_ROUNDS = 51, CALLS = 3 };

typedef struct {
  int lt, rt;
  int64_t m, n, k;
  const float *a, *b;
  float *c;
  int jx;
  int64_t r0, r1; /* rows of C */
} call;

static double thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void run(const call *c) {
  int64_t m = c->r1 - c->r0;
  int64_t lda = c->lt ? c->m : c->k, ldb = c->rt ? c->k : c->n;
  const float *a = c->a + (c->lt ? c->r0 : c->r0 * lda);
  float *out = c->c + c->r0 * c->n;
  if (c->jx) {
    if (!jx_sgemm_packed(c->lt, c->rt, m, c->n, c->k, a, lda, c->b, ldb, out, c->n, NULL)) abort();
  } else {
    cblas_sgemm(CblasRowMajor, c->lt ? CblasTrans : CblasNoTrans, c->rt ? CblasTrans : CblasNoTrans,
                (int)m, (int)c->n, (int)c->k, 1.0f, a, (int)lda, c->b, (int)ldb, 0.0f, out,
                (int)c->n);
  }
}

static void *run_thread(void *p) {
  run(p);
  return NULL;
}

/* Best of CALLS: one thread's CPU time, or wall time on two threads. */
static double best_ns(call c, int two) {
  double best = 1e30;
  for (int i = 0; i < CALLS; i++) {
    double t;
    if (!two) {
      double t0 = thread_cpu_ns();
      run(&c);
      t = thread_cpu_ns() - t0;
    } else {
      call h[2] = {c, c};
      h[0].r1 = h[1].r0 = c.m / 2 / 16 * 16;
      pthread_t th;
      double t0 = bench_now_ns();
      if (pthread_create(&th, NULL, run_thread, &h[1])) abort();
      run(&h[0]);
      pthread_join(th, NULL);
      t = bench_now_ns() - t0;
    }
    if (t < best) best = t;
  }
  return best;
}

static float *filled(int64_t n, unsigned seed) {
  float *v = aligned_alloc(64, sizeof(float) * (size_t)((n + 15) / 16 * 16));
  if (!v) abort();
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
  }
  return v;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return v[n / 2];
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 5;
  int ds[8] = {128, 256, 512}, nd = 3;
  if (argc > 2) {
    nd = 0;
    for (int i = 2; i < argc && nd < 8; i++) ds[nd++] = atoi(argv[i]);
  }
  openblas_set_num_threads(1);
  if (!jx_sgemm_packed_usable()) {
    fprintf(stderr, "bench_matmul_kernel: jx's GEMM does not run on this CPU\n");
    return 1;
  }
  for (int di = 0; di < nd; di++) {
    int64_t d = ds[di];
    /* {lt, rt, m, n, k}: forward x W, input gradient dy W^T, weight gradient x^T dy */
    const int64_t shapes[][5] = {
        {0, 0, ROWS, d, d}, {0, 0, ROWS, 4 * d, d}, {0, 0, ROWS, d, 4 * d},
        {0, 1, ROWS, d, d}, {0, 1, ROWS, d, 4 * d}, {0, 1, ROWS, 4 * d, d},
        {1, 0, d, d, ROWS}, {1, 0, d, 4 * d, ROWS}, {1, 0, 4 * d, d, ROWS},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
      call c = {(int)shapes[s][0],
                (int)shapes[s][1],
                shapes[s][2],
                shapes[s][3],
                shapes[s][4],
                NULL,
                NULL,
                NULL,
                0,
                0,
                shapes[s][2]};
      float *a = filled(c.m * c.k, 1), *b = filled(c.k * c.n, 2), *out = filled(c.m * c.n, 3);
      c.a = a, c.b = b, c.c = out;
      double cpu[2][MAX_ROUNDS], wall[2][MAX_ROUNDS], rc[MAX_ROUNDS], rw[MAX_ROUNDS];
      for (int r = -1; r < rounds; r++) /* round -1 warms up */
        for (int two = 0; two < 2; two++)
          for (int impl = 0; impl < 2; impl++) {
            c.jx = impl == 0;
            double t = best_ns(c, two);
            if (r >= 0) (two ? wall : cpu)[impl][r] = t;
          }
      for (int r = 0; r < rounds; r++)
        rc[r] = cpu[0][r] / cpu[1][r], rw[r] = wall[0][r] / wall[1][r];
      double flop = 2.0 * (double)(c.m * c.n * c.k);
      double rcm = median(rc, rounds), rwm = median(rw, rounds);
      printf(
          "{\"bench\":\"gemm_%s%s_%lldx%lldx%lld\",\"kernel\":\"%s\",\"rounds\":%d,"
          "\"cpu1_gflops_jx\":%.1f,\"cpu1_gflops_sgemm\":%.1f,\"cpu1_ratio\":%.3f,"
          "\"cpu1_ratio_range\":[%.3f,%.3f],\"wall2_gflops_jx\":%.1f,\"wall2_gflops_sgemm\":%.1f,"
          "\"wall2_ratio\":%.3f,\"wall2_ratio_range\":[%.3f,%.3f]}\n",
          c.lt ? "T" : "N", c.rt ? "T" : "N", (long long)c.m, (long long)c.n, (long long)c.k,
          jx_sgemm_packed_kernel(), rounds, flop / median(cpu[0], rounds),
          flop / median(cpu[1], rounds), rcm, rc[0], rc[rounds - 1], flop / median(wall[0], rounds),
          flop / median(wall[1], rounds), rwm, rw[0], rw[rounds - 1]);
      fflush(stdout);
      free(a);
      free(b);
      free(out);
    }
  }
  return 0;
}
