/* Eager dispatch overhead: jx_add of two f32[8] in a loop, so that the time
 * is the op's fixed cost (checks, shape rule, allocation, scope bookkeeping,
 * release) rather than arithmetic. Target: <= 2 us per op (median).
 * Prints one JSON line; bench/compare.py runs it next to NumPy and JAX. */
#include "bench_util.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { RUNS = 15, OPS = 20000, PER_SCOPE = 1000 };

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : RUNS;
  if (runs < 1 || runs > 1000) runs = RUNS;
  float av[8] = {1, 2, 3, 4, 5, 6, 7, 8}, bv[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  jx_array *a = jx_keep(jx_array_from(JX_F32, JX_SHAPE(8), av));
  jx_array *b = jx_keep(jx_array_from(JX_F32, JX_SHAPE(8), bv));
  double per_op[1000];
  for (int r = -1; r < runs; r++) { /* run -1 warms up */
    double t0 = bench_now_ns();
    for (int i = 0; i < OPS; i += PER_SCOPE) {
      jx_scope_begin(); /* results are freed a scope at a time, as a program would */
      for (int k = 0; k < PER_SCOPE; k++) jx_add(a, b);
      jx_scope_end();
    }
    if (r >= 0) per_op[r] = (bench_now_ns() - t0) / OPS;
  }
  if (jx_last_status() != JX_OK) {
    fprintf(stderr, "bench_dispatch: %s\n", jx_last_error());
    return 1;
  }
  qsort(per_op, (size_t)runs, sizeof *per_op, bench_cmp_double);
  printf("{\"bench\":\"dispatch_add_f32x8\",\"impl\":\"jx\",\"median_ns\":%.1f,\"min_ns\":%.1f,"
         "\"runs\":%d,\"ops_per_run\":%d}\n",
         per_op[runs / 2], per_op[0], runs, OPS);
  jx_release(a);
  jx_release(b);
  jx_shutdown();
  return 0;
}
