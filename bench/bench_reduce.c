/* Reductions, next to a triad measured in the same run (alternating rounds):
 *  - sum_lastaxis_f32_4096x4096: eager jx_sum over the last axis (64 MiB);
 *  - colsum_f32_4096x4096_jit: a jitted sum over the leading axis, one
 *    fused column reduction;
 *  - gelu_bias_grad_f32_8192x1024_jit: the GPT's MLP backward, jitted: the
 *    gradient of sum(gelu(x + b) * g) with respect to the bias b, the
 *    GELU's backward fused into the column sum over the rows (two 32 MiB
 *    reads);
 *  - triad: y = x + s * w over 16M f32 on as many threads as the kernels
 *    use (two reads and a write, vectorized), the bandwidth the reductions
 *    compete with.
 * Each row's gb_per_s counts the bytes read (and written, for the triad);
 * each row after the triad also prints its fraction of it. Prints JSON
 * lines. */
#include "bench_util.h"
#include "bench_triad.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 4096, ROWS = 8192, COLS = 1024, TRIAD_N = 16 * 1024 * 1024, RUNS = 7 };

static void colsum(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(in[0], JX_AXES(0), 0);
}

/* sum(gelu(x + b) * g): its gradient in b is the bias gradient of a GELU layer */
static void gelu_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_mul(jx_gelu(jx_add(in[0], in[1])), in[2]), JX_AXES(), 0);
}

/* ns of one call of f (blocked on its result) */
static double time_call(jx_fn *f, jx_array *const *in) {
  jx_array *out[1];
  jx_scope_begin();
  double t0 = bench_now_ns();
  jx_call(f, in, out);
  jx_block_until_ready(out[0]);
  double t = bench_now_ns() - t0;
  jx_scope_end();
  return t;
}

static double eager_rowsum(jx_array *x) {
  jx_scope_begin();
  double t0 = bench_now_ns();
  jx_block_until_ready(jx_sum(x, JX_AXES(-1), 0));
  double t = bench_now_ns() - t0;
  jx_scope_end();
  return t;
}

static void report(const char *name, const char *impl, double *t, int runs, double bytes,
                   double triad_gbps) {
  qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
  double gbps = bytes / t[runs / 2];
  printf("{\"bench\":\"%s\",\"impl\":\"%s\",\"median_ns\":%.0f,\"min_ns\":%.0f,\"runs\":%d,"
         "\"gb_per_s\":%.2f",
         name, impl, t[runs / 2], t[0], runs, gbps);
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
  float *tx = malloc(sizeof(float) * TRIAD_N), *tw = malloc(sizeof(float) * TRIAD_N),
        *ty = malloc(sizeof(float) * TRIAD_N);
  double *t[4];
  for (int k = 0; k < 4; k++) t[k] = malloc(sizeof(double) * (size_t)runs);
  if (!tx || !tw || !ty || !t[0] || !t[1] || !t[2] || !t[3]) {
    fprintf(stderr, "bench_reduce: out of memory\n");
    return 1;
  }
  for (int64_t i = 0; i < TRIAD_N; i++) {
    tx[i] = (float)(i % 1000) * 0.001f - 0.5f;
    tw[i] = (float)(i % 7) * 0.1f;
  }
  (void)eager_rowsum(x); /* first calls: compile, fault pages in */
  (void)time_call(jcs, &x);
  (void)time_call(jgrad, g);
  (void)bench_triad_ns(tx, tw, ty, TRIAD_N, threads);
  for (int r = 0; r < runs; r++) { /* the four alternate */
    t[0][r] = eager_rowsum(x);
    t[1][r] = time_call(jcs, &x);
    t[2][r] = time_call(jgrad, g);
    t[3][r] = bench_triad_ns(tx, tw, ty, TRIAD_N, threads);
  }
  if (jx_last_status() != JX_OK) {
    fprintf(stderr, "bench_reduce: %s\n", jx_last_error());
    return 1;
  }
  report("triad_f32_16M", "triad", t[3], runs, 3.0 * sizeof(float) * TRIAD_N, 0);
  double triad_gbps = 3.0 * sizeof(float) * TRIAD_N / t[3][runs / 2];
  report("sum_lastaxis_f32_4096x4096", "jx", t[0], runs, 4.0 * N * N, triad_gbps);
  report("colsum_f32_4096x4096_jit", "jx", t[1], runs, 4.0 * N * N, triad_gbps);
  report("gelu_bias_grad_f32_8192x1024_jit", "jx", t[2], runs, 2 * 4.0 * ROWS * COLS, triad_gbps);
  for (int k = 0; k < 4; k++) free(t[k]);
  free(tx);
  free(tw);
  free(ty);
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
