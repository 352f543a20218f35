/* Eager reduction: jx_sum over the last axis of a 4096x4096 f32 (64 MiB).
 * Prints one JSON line. */
#include "bench_util.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 4096, RUNS = 7 };

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : RUNS;
  if (runs < 1 || runs > 100) runs = RUNS;
  jx_array *x = jx_keep(jx_random_uniform(jx_random_key(0), JX_F32, JX_SHAPE(N, N), -1, 1));
  double t[100];
  for (int r = -1; r < runs; r++) {
    jx_scope_begin();
    double t0 = bench_now_ns();
    jx_array *s = jx_sum(x, JX_AXES(-1), 0);
    jx_block_until_ready(s);
    double t1 = bench_now_ns();
    jx_scope_end();
    if (r >= 0) t[r] = t1 - t0;
  }
  if (jx_last_status() != JX_OK) {
    fprintf(stderr, "bench_reduce: %s\n", jx_last_error());
    return 1;
  }
  qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
  printf("{\"bench\":\"sum_lastaxis_f32_4096x4096\",\"impl\":\"jx\",\"median_ns\":%.0f,"
         "\"min_ns\":%.0f,\"runs\":%d,\"gb_per_s\":%.2f}\n",
         t[runs / 2], t[0], runs, 4.0 * N * N / t[runs / 2]);
  jx_release(x);
  jx_shutdown();
  return 0;
}
