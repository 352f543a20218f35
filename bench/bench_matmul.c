/* Eager f32 matmul: jx_matmul of two n x n matrices (n = 256, 512, 1024),
 * result allocation included, next to cblas_sgemm called directly on the
 * same data into a preallocated buffer in the same process: the ceiling the
 * eager path can reach. Prints one JSON line per size and implementation
 * ("impl":"jx" and "impl":"sgemm", with GFLOP/s and OpenBLAS's kernel).
 * jx switches OpenBLAS's own threads off and splits each GEMM over its pool
 * (src/prims/dot_blas.c); the direct call gets OpenBLAS's threads back, one
 * per CPU, so both use every core.
 * bench/compare.py runs it next to NumPy and JAX. */
#include "bench_util.h"
#include <cblas.h>
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { RUNS = 7 };

static void report(int n, const char *impl, double *t, int runs, int threads) {
  qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
  double med = t[runs / 2];
  printf("{\"bench\":\"matmul_f32_%d\",\"impl\":\"%s\",\"median_ns\":%.0f,\"min_ns\":%.0f,"
         "\"runs\":%d,\"gflop_per_s\":%.1f,\"openblas_core\":\"%s\",\"openblas_threads\":%d}\n",
         n, impl, med, t[0], runs, 2.0 * n * n * n / med, openblas_get_corename(), threads);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : RUNS;
  if (runs < 1 || runs > 100) runs = RUNS;
  static const int sizes[] = {256, 512, 1024};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    int n = sizes[s];
    jx_scope_begin();
    jx_array *a = jx_random_uniform(jx_random_key(0), JX_F32, JX_SHAPE(n, n), -1, 1);
    jx_array *b = jx_random_uniform(jx_random_key(1), JX_F32, JX_SHAPE(n, n), -1, 1);
    size_t bytes = sizeof(float) * (size_t)n * (size_t)n;
    float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
    if (!ha || !hb || !hc || jx_read(a, ha, bytes) || jx_read(b, hb, bytes)) {
      fprintf(stderr, "bench_matmul: setup failed: %s\n", jx_last_error());
      return 1;
    }
    double t_jx[100], t_blas[100];
    /* one loop per implementation, each with its warm-up, so that both find
     * OpenBLAS's threads in the same state (awake from the previous call) */
    for (int r = -1; r < runs; r++) {
      jx_scope_begin();
      double t0 = bench_now_ns();
      jx_block_until_ready(jx_matmul(a, b));
      double t1 = bench_now_ns();
      jx_scope_end();
      if (r >= 0) t_jx[r] = t1 - t0;
    }
    int jx_threads = openblas_get_num_threads(); /* 1 once jx owns the threading */
    int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    openblas_set_num_threads(cpus);
    for (int r = -1; r < runs; r++) {
      double t0 = bench_now_ns();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, ha, n, hb, n, 0.0f, hc,
                  n);
      double t1 = bench_now_ns();
      if (r >= 0) t_blas[r] = t1 - t0;
    }
    if (jx_last_status() != JX_OK) {
      fprintf(stderr, "bench_matmul: %s\n", jx_last_error());
      return 1;
    }
    report(n, "jx", t_jx, runs, jx_threads);
    report(n, "sgemm", t_blas, runs, cpus);
    free(ha);
    free(hb);
    free(hc);
    jx_scope_end();
  }
  jx_shutdown();
  return 0;
}
