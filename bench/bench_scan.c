/* Two jitted 1000-step scans (bench/compare.py's run_scan times
 * jax.lax.scan under jax.jit on the same bodies and shapes):
 *  - an elementwise body: c' = c * 0.99 + sin(x_t) * 0.01, y_t = tanh(c'),
 *    carry f32[256], xs f32[1000,256]: the per-iteration cost of a compiled
 *    loop (the body's fused kernel, the x slice, the y copy, the loop's
 *    bookkeeping);
 *  - an RNN cell: h' = tanh(x_t W + h U + b), y_t = h', batch 8, input 32,
 *    hidden 64 (W, U, b captured constants): two small f32 contractions
 *    (16 Ki and 32 Ki multiply-adds) per step.
 * Prints JSON lines: scan_1000_jit and rnn_scan_1000_jit (median of runs),
 * scan_1000_first_call (trace + compile + one run), scan_1000_eager (the
 * interpreter, for reference). */
#include "bench_util.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { STEPS = 1000, WIDTH = 256, RUNS = 21, BATCH = 8, INPUT = 32, HIDDEN = 64 };

static void body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *c = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 0.99)),
                       jx_mul(jx_sin(in[1]), jx_scalar(JX_F32, 0.01)));
  out[0] = c;
  out[1] = jx_tanh(c);
}

typedef struct {
  jx_array *w, *u, *b;
} rnn_weights;

static void rnn_cell(void *ctx, jx_array *const *in, jx_array **out) {
  const rnn_weights *p = ctx;
  jx_array *h = jx_tanh(jx_add(jx_add(jx_matmul(in[1], p->w), jx_matmul(in[0], p->u)), p->b));
  out[0] = h;
  out[1] = h;
}

/* on an error jx_scan poisons out[] and records it; main reports it */
static void scan_fn(void *ctx, jx_array *const *in, jx_array **out) {
  (void)jx_scan(ctx, 1, in, 1, in + 1, -1, 0, out);
}

/* seconds for one call of f (results blocked on) */
static double time_call(jx_fn *f, jx_array *const *in) {
  jx_array *out[2];
  jx_scope_begin();
  double t0 = bench_now_ns();
  jx_call(f, in, out);
  jx_block_until_ready(out[0]);
  jx_block_until_ready(out[1]);
  double t = bench_now_ns() - t0;
  jx_scope_end();
  return t;
}

static void report(const char *name, double ns, int runs) {
  printf("{\"bench\":\"%s\",\"impl\":\"jx\",\"median_ns\":%.0f,\"runs\":%d,\"steps\":%d,"
         "\"us_per_step\":%.3f}\n",
         name, ns, runs, STEPS, ns / STEPS / 1e3);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : RUNS;
  if (runs < 1 || runs > 1000) runs = RUNS;
  jx_array *in[2] = {
      jx_keep(jx_random_uniform(jx_random_key(0), JX_F32, JX_SHAPE(WIDTH), -1, 1)),
      jx_keep(jx_random_uniform(jx_random_key(1), JX_F32, JX_SHAPE(STEPS, WIDTH), -3, 3))};
  jx_fn *b = jx_fn_create("scan_body", 2, 2, body, NULL);
  jx_fn *f = jx_fn_create("scan_1000", 2, 2, scan_fn, b);
  jx_fn *jf = jx_jit(f, NULL);
  rnn_weights w = {
      jx_keep(jx_random_normal(jx_random_key(2), JX_F32, JX_SHAPE(INPUT, HIDDEN))),
      jx_keep(jx_mul(jx_random_normal(jx_random_key(3), JX_F32, JX_SHAPE(HIDDEN, HIDDEN)),
                     jx_scalar(JX_F32, 0.125))),
      jx_keep(jx_zeros(JX_F32, JX_SHAPE(HIDDEN)))};
  jx_array *rin[2] = {
      jx_keep(jx_zeros(JX_F32, JX_SHAPE(BATCH, HIDDEN))),
      jx_keep(jx_random_normal(jx_random_key(4), JX_F32, JX_SHAPE(STEPS, BATCH, INPUT)))};
  jx_fn *rb = jx_fn_create("rnn_cell", 2, 2, rnn_cell, &w);
  jx_fn *rf = jx_fn_create("rnn_scan_1000", 2, 2, scan_fn, rb);
  jx_fn *rjf = jx_jit(rf, NULL);
  double first = time_call(jf, in), *t = malloc(sizeof *t * (size_t)runs);
  double *rt = malloc(sizeof *rt * (size_t)runs);
  double eager = time_call(f, in);
  (void)time_call(rjf, rin);
  for (int r = 0; t && rt && r < runs; r++) { /* the two workloads alternate */
    t[r] = time_call(jf, in);
    rt[r] = time_call(rjf, rin);
  }
  if (!t || !rt || jx_last_status() != JX_OK) {
    fprintf(stderr, "bench_scan: %s\n", t && rt ? jx_last_error() : "out of memory");
    return 1;
  }
  qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
  qsort(rt, (size_t)runs, sizeof *rt, bench_cmp_double);
  report("scan_1000_jit", t[runs / 2], runs);
  report("rnn_scan_1000_jit", rt[runs / 2], runs);
  report("scan_1000_first_call", first, 1);
  report("scan_1000_eager", eager, 1);
  free(t);
  free(rt);
  jx_fn_release(rjf);
  jx_fn_release(rf);
  jx_fn_release(rb);
  for (int i = 0; i < 2; i++) jx_release(rin[i]);
  jx_release(w.w);
  jx_release(w.u);
  jx_release(w.b);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_fn_release(b);
  jx_release(in[0]);
  jx_release(in[1]);
  jx_shutdown();
  return 0;
}
