/* Reductions, next to a triad measured in the same run (alternating rounds):
 *  - sum_lastaxis_f32_4096x4096: eager jx_sum over the last axis (64 MiB);
 *  - colsum_f32_4096x4096_jit: a jitted sum over the leading axis (a lone
 *    reduction: the eager column sum, reduce.c);
 *  - colsum_sq_f32_4096x4096_jit: a jitted sum(x * x, 0), a fused column
 *    reduction bound by memory (the kernel reads x once);
 *  - gelu_bias_grad_f32_8192x1024_jit: the GPT's MLP backward, jitted: the
 *    gradient of sum(gelu(x + b) * g) with respect to the bias b, the
 *    GELU's backward fused into the column sum over the rows (two 32 MiB
 *    reads);
 *  - axpy_f32_16Mx1_jit, axpy_f32_4096x4096_jit: the triad's x + 0.5 * w
 *    jitted (one elementwise kernel) over the same 16M f32 as [16M, 1] and
 *    as [4096, 4096]: a kernel over trailing dims of 1 runs as one long row
 *    (fusion.h's collapsed), not a row per element;
 *  - triad: y = x + s * w over 16M f32 on as many threads as the kernels
 *    use (two reads and a write, vectorized), the bandwidth the reductions
 *    compete with. Like STREAM it counts 12 bytes an element, not the
 *    cache line of y that the store first reads (16 bytes moved), so a
 *    reduction, which only reads, can pass 1.0 of it (the eager row sum
 *    does).
 * Each row's gb_per_s counts the bytes read (and written, for the triad and
 * the axpy rows); each row after the triad also prints its fraction of it,
 * and cpu_ms the median CPU time of the process (all threads) per call,
 * which other processes on a shared machine disturb less than wall time.
 * Prints JSON lines. */
#include "bench_util.h"
#include "bench_triad.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 4096, ROWS = 8192, COLS = 1024, TRIAD_N = 16 * 1024 * 1024, RUNS = 7, TIMED = 7 };

static void colsum(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(in[0], JX_AXES(0), 0);
}

static void colsum_sq(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_mul(in[0], in[0]), JX_AXES(0), 0);
}

/* sum(gelu(x + b) * g): its gradient in b is the bias gradient of a GELU layer */
static void gelu_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_mul(jx_gelu(jx_add(in[0], in[1])), in[2]), JX_AXES(), 0);
}

static void axpy(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(in[0], jx_mul(in[1], jx_scalar(JX_F32, 0.5)));
}

/* One call of f (blocked on its result; f NULL: the eager row sum of in[0]):
 * its wall time in ns, and the process's CPU time in *cpu. */
static double time_call(jx_fn *f, jx_array *const *in, double *cpu) {
  jx_array *out[1];
  jx_scope_begin();
  double c0 = bench_cpu_ns(), t0 = bench_now_ns();
  if (f)
    jx_call(f, in, out);
  else
    out[0] = jx_sum(in[0], JX_AXES(-1), 0);
  jx_block_until_ready(out[0]);
  double t = bench_now_ns() - t0;
  *cpu = bench_cpu_ns() - c0;
  jx_scope_end();
  return t;
}

static void report(const char *name, const char *impl, double *t, double *cpu, int runs,
                   double bytes, double triad_gbps) {
  qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
  qsort(cpu, (size_t)runs, sizeof *cpu, bench_cmp_double);
  double gbps = bytes / t[runs / 2];
  printf("{\"bench\":\"%s\",\"impl\":\"%s\",\"median_ns\":%.0f,\"min_ns\":%.0f,\"runs\":%d,"
         "\"gb_per_s\":%.2f,\"cpu_ms\":%.2f",
         name, impl, t[runs / 2], t[0], runs, gbps, cpu[runs / 2] * 1e-6);
  if (triad_gbps > 0) printf(",\"of_triad\":%.2f", gbps / triad_gbps);
  printf("}\n");
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : RUNS;
  if (runs < 1 || runs > 100) runs = RUNS;
  int threads = bench_triad_threads();
  jx_scope_begin(); /* the samplers' intermediates */
  jx_array *x = jx_keep(jx_random_uniform(jx_random_key(0), JX_F32, JX_SHAPE(N, N), -1, 1));
  jx_array *g[3] = {
      jx_keep(jx_random_uniform(jx_random_key(1), JX_F32, JX_SHAPE(ROWS, COLS), -3, 3)),
      jx_keep(jx_random_uniform(jx_random_key(2), JX_F32, JX_SHAPE(COLS), -1, 1)),
      jx_keep(jx_random_uniform(jx_random_key(3), JX_F32, JX_SHAPE(ROWS, COLS), -1, 1))};
  jx_scope_end();
  jx_fn *cs = jx_fn_create("colsum", 1, 1, colsum, NULL);
  jx_fn *jcs = jx_jit(cs, NULL);
  jx_fn *loss = jx_fn_create("gelu_loss", 3, 1, gelu_loss, NULL);
  jx_fn *grad = jx_grad(loss, JX_AXES(1));
  jx_fn *jgrad = jx_jit(grad, NULL);
  jx_fn *sq = jx_fn_create("colsum_sq", 1, 1, colsum_sq, NULL);
  jx_fn *jsq = jx_jit(sq, NULL);
  jx_fn *ax = jx_fn_create("axpy", 2, 1, axpy, NULL);
  jx_fn *jax_ = jx_jit(ax, NULL);
  float *tx = malloc(sizeof(float) * TRIAD_N), *tw = malloc(sizeof(float) * TRIAD_N),
        *ty = malloc(sizeof(float) * TRIAD_N);
  double *t[TIMED], *c[TIMED];
  int ok = tx && tw && ty;
  for (int k = 0; k < TIMED; k++) {
    t[k] = malloc(sizeof(double) * (size_t)runs);
    c[k] = malloc(sizeof(double) * (size_t)runs);
    ok = ok && t[k] && c[k];
  }
  if (!ok) {
    fprintf(stderr, "bench_reduce: out of memory\n");
    return 1;
  }
  for (int64_t i = 0; i < TRIAD_N; i++) {
    tx[i] = (float)(i % 1000) * 0.001f - 0.5f;
    tw[i] = (float)(i % 7) * 0.1f;
  }
  /* the triad's operands as jx arrays of both shapes */
  jx_array *tall[2], *square[2];
  jx_scope_begin();
  for (int k = 0; k < 2; k++) {
    tall[k] = jx_keep(jx_array_from(JX_F32, JX_SHAPE(TRIAD_N, 1), k ? tw : tx));
    square[k] = jx_keep(jx_reshape(tall[k], JX_SHAPE(N, N)));
  }
  jx_scope_end();
  jx_fn *fns[TIMED - 1] = {NULL, jcs, jgrad, jax_, jax_, jsq};
  jx_array *const *ins[TIMED - 1] = {&x, &x, g, tall, square, &x};
  for (int r = -1; r < runs; r++) /* all alternate; the first round compiles, faults pages in */
    for (int k = 0; k < TIMED; k++) {
      double cpu, c0 = bench_cpu_ns();
      double ns = k < TIMED - 1 ? time_call(fns[k], ins[k], &cpu)
                                : bench_triad_ns(tx, tw, ty, TRIAD_N, threads);
      if (k == TIMED - 1) cpu = bench_cpu_ns() - c0;
      if (r >= 0) {
        t[k][r] = ns;
        c[k][r] = cpu;
      }
    }
  if (jx_last_status() != JX_OK) {
    fprintf(stderr, "bench_reduce: %s\n", jx_last_error());
    return 1;
  }
  const double tb = 3.0 * sizeof(float) * TRIAD_N;
  report("triad_f32_16M", "triad", t[6], c[6], runs, tb, 0);
  double triad_gbps = tb / t[6][runs / 2];
  report("sum_lastaxis_f32_4096x4096", "jx", t[0], c[0], runs, 4.0 * N * N, triad_gbps);
  report("colsum_f32_4096x4096_jit", "jx", t[1], c[1], runs, 4.0 * N * N, triad_gbps);
  report("colsum_sq_f32_4096x4096_jit", "jx", t[5], c[5], runs, 4.0 * N * N, triad_gbps);
  report("gelu_bias_grad_f32_8192x1024_jit", "jx", t[2], c[2], runs, 2 * 4.0 * ROWS * COLS,
         triad_gbps);
  report("axpy_f32_16Mx1_jit", "jx", t[3], c[3], runs, tb, triad_gbps);
  report("axpy_f32_4096x4096_jit", "jx", t[4], c[4], runs, tb, triad_gbps);
  for (int k = 0; k < TIMED; k++) {
    free(t[k]);
    free(c[k]);
  }
  for (int k = 0; k < 2; k++) {
    jx_release(tall[k]);
    jx_release(square[k]);
  }
  free(tx);
  free(tw);
  free(ty);
  jx_fn_release(jsq);
  jx_fn_release(sq);
  jx_fn_release(jax_);
  jx_fn_release(ax);
  jx_fn_release(jgrad);
  jx_fn_release(grad);
  jx_fn_release(loss);
  jx_fn_release(jcs);
  jx_fn_release(cs);
  jx_release(x);
  for (int k = 0; k < 3; k++) jx_release(g[k]);
  jx_shutdown();
  return 0;
}
