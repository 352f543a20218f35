/* Dispatch overhead, two fixed costs that arithmetic does not hide:
 *  - eager: jx_add of two f32[8] in a loop (checks, shape rule, allocation,
 *    scope bookkeeping, release). Target: <= 2 us per op (median).
 *  - a blocked call of a tiny jitted function (x * 2 + 1 on f32[8]):
 *    jx_call, then jx_block_until_ready on its output, so the time is the
 *    hand-off to the dispatch thread and back (async dispatch on), and the
 *    same call run on the calling thread (JX_ASYNC_DISPATCH=0) as the floor.
 *    Target: <= 2 us per call (median).
 * Prints one JSON line per figure; bench/compare.py runs it next to NumPy
 * and JAX. */
#include "bench_util.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { RUNS = 15, OPS = 20000, PER_SCOPE = 1000, CALLS = 5000 };

static void affine_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 1));
}

/* Median ns per blocked call of jf over runs rounds (one warm-up round). */
static double blocked_call_ns(jx_fn *jf, jx_array *x, int runs) {
  double per_call[1000];
  for (int r = -1; r < runs; r++) {
    double t0 = bench_now_ns();
    for (int i = 0; i < CALLS; i += PER_SCOPE) {
      jx_scope_begin();
      for (int k = 0; k < PER_SCOPE; k++) {
        jx_array *out;
        jx_call(jf, &x, &out);
        jx_block_until_ready(out);
      }
      jx_scope_end();
    }
    if (r >= 0) per_call[r] = (bench_now_ns() - t0) / CALLS;
  }
  qsort(per_call, (size_t)runs, sizeof *per_call, bench_cmp_double);
  return per_call[runs / 2];
}

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
  qsort(per_op, (size_t)runs, sizeof *per_op, bench_cmp_double);

  jx_fn *f = jx_fn_create("affine", 1, 1, affine_body, NULL), *jf = jx_jit(f, NULL);
  const char *async = getenv("JX_ASYNC_DISPATCH");
  double sync_ns = (setenv("JX_ASYNC_DISPATCH", "0", 1), blocked_call_ns(jf, a, runs));
  if (async)
    setenv("JX_ASYNC_DISPATCH", async, 1);
  else
    unsetenv("JX_ASYNC_DISPATCH");
  double call_ns = blocked_call_ns(jf, a, runs);
  if (jx_last_status() != JX_OK) {
    fprintf(stderr, "bench_dispatch: %s\n", jx_last_error());
    return 1;
  }
  printf("{\"bench\":\"dispatch_add_f32x8\",\"impl\":\"jx\",\"median_ns\":%.1f,\"min_ns\":%.1f,"
         "\"runs\":%d,\"ops_per_run\":%d}\n",
         per_op[runs / 2], per_op[0], runs, OPS);
  printf("{\"bench\":\"jit_call_blocked_f32x8\",\"impl\":\"jx\",\"median_ns\":%.1f,"
         "\"synchronous_median_ns\":%.1f,\"runs\":%d,\"calls_per_run\":%d}\n",
         call_ns, sync_ns, runs, CALLS);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_release(a);
  jx_release(b);
  jx_shutdown();
  return 0;
}
