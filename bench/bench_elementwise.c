/* Eager elementwise throughput: jx_add and jx_exp over 16M f32 (64 MiB per
 * operand), one call timed at a time. Prints one JSON line per op. */
#include "bench_util.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 16 * 1024 * 1024, RUNS = 7 };

static void report(const char *name, double *t, int runs) {
  qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
  printf("{\"bench\":\"%s\",\"impl\":\"jx\",\"median_ns\":%.0f,\"min_ns\":%.0f,\"runs\":%d,"
         "\"elements\":%d,\"gb_per_s\":%.2f}\n",
         name, t[runs / 2], t[0], runs, N, 3.0 * 4 * N / t[runs / 2]);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : RUNS;
  if (runs < 1 || runs > 100) runs = RUNS;
  jx_array *x = jx_keep(jx_random_uniform(jx_random_key(0), JX_F32, JX_SHAPE(N), -4, 4));
  jx_array *y = jx_keep(jx_random_uniform(jx_random_key(1), JX_F32, JX_SHAPE(N), -4, 4));
  double t_add[100], t_exp[100];
  for (int r = -1; r < runs; r++) {
    jx_scope_begin();
    double t0 = bench_now_ns();
    jx_array *s = jx_add(x, y);
    jx_block_until_ready(s);
    double t1 = bench_now_ns();
    jx_array *e = jx_exp(x);
    jx_block_until_ready(e);
    double t2 = bench_now_ns();
    jx_scope_end();
    if (r >= 0) t_add[r] = t1 - t0, t_exp[r] = t2 - t1;
  }
  if (jx_last_status() != JX_OK) {
    fprintf(stderr, "bench_elementwise: %s\n", jx_last_error());
    return 1;
  }
  report("add_f32_16M", t_add, runs);
  report("exp_f32_16M", t_exp, runs);
  jx_release(x);
  jx_release(y);
  jx_shutdown();
  return 0;
}
