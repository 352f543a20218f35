/* Jitted workloads timed in alternating rounds, for the benchmark programs
 * that compare.py runs beside JAX and NumPy (bench_fft, bench_linalg): each
 * workload is jitted and called once (trace, compile, warm up), then the
 * workloads take turns, `runs` calls each, and one JSON line per workload
 * gives its median: {"bench", "impl": "jx", "median_ns", "runs"}. Include
 * after bench_util.h. */
#ifndef JX_BENCH_JIT_ROUNDS_H
#define JX_BENCH_JIT_ROUNDS_H

#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
  const char *name;
  jx_fn *f; /* the plain function; bench_jit_rounds jits it and releases both */
  int nin, nout;
  jx_array *in[4];
} bench_jit_workload;

/* ns for one call of f on w's inputs, its results blocked on */
static inline double bench_jit_time_call(jx_fn *f, const bench_jit_workload *w) {
  jx_array *out[8];
  jx_scope_begin();
  double t0 = bench_now_ns();
  jx_call(f, w->in, out);
  for (int o = 0; o < w->nout && o < 8; o++) jx_block_until_ready(out[o]);
  double t = bench_now_ns() - t0;
  jx_scope_end();
  return t;
}

/* Times the n workloads of w (at most 16) and prints their medians; 0, or 1
 * with the error on stderr under the program's name `prog`. */
static inline int bench_jit_rounds(const char *prog, bench_jit_workload *w, int n, int runs) {
  jx_fn *jit[16];
  if (n > 16) n = 16;
  double *t = malloc(sizeof *t * (size_t)(runs * n));
  for (int i = 0; i < n; i++) {
    jit[i] = jx_jit(w[i].f, NULL);
    (void)bench_jit_time_call(jit[i], &w[i]); /* trace, compile, warm up */
  }
  for (int r = 0; t && r < runs; r++) /* the workloads alternate */
    for (int i = 0; i < n; i++) t[i * runs + r] = bench_jit_time_call(jit[i], &w[i]);
  int bad = !t || jx_last_status() != JX_OK;
  if (bad) fprintf(stderr, "%s: %s\n", prog, t ? jx_last_error() : "out of memory");
  for (int i = 0; i < n; i++) {
    if (!bad) {
      qsort(t + i * runs, (size_t)runs, sizeof *t, bench_cmp_double);
      printf("{\"bench\":\"%s\",\"impl\":\"jx\",\"median_ns\":%.0f,\"runs\":%d}\n", w[i].name,
             t[i * runs + runs / 2], runs);
    }
    jx_fn_release(jit[i]);
    jx_fn_release(w[i].f);
  }
  free(t);
  return bad;
}

#endif
