/* A chain of six elementwise ops over 16M f32, eager (six passes over
 * memory) and under jit (one fused kernel), next to a triad-like copy
 * bandwidth measured in the same run. Prints JSON lines. */
#include "bench_util.h"
#include "bench_triad.h"
#include <jx/jx.h>
#include <stdlib.h>
#include <string.h>

enum { N = 16 * 1024 * 1024, RUNS = 7 };

/* y = max(tanh(x * w + 0.5) - sqrt(|x|), w) ... six ops */
static void chain(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *a = jx_mul(in[0], in[1]);
  jx_array *b = jx_add(a, jx_scalar(JX_F32, 0.5));
  jx_array *c = jx_tanh(b);
  jx_array *d = jx_sub(c, jx_sqrt(jx_abs(in[0])));
  out[0] = jx_maximum(d, in[1]);
}

static double median_ms(jx_fn *f, jx_array **in) {
  double t[RUNS];
  for (int r = 0; r < RUNS; r++) {
    jx_scope_begin();
    jx_array *out[1];
    double t0 = bench_now_s();
    jx_call(f, in, out);
    jx_block_until_ready(out[0]);
    t[r] = (bench_now_s() - t0) * 1e3;
    jx_scope_end();
  }
  qsort(t, RUNS, sizeof *t, bench_cmp_double);
  return t[RUNS / 2];
}

int main(void) {
  float *x = malloc(sizeof(float) * N), *w = malloc(sizeof(float) * N),
        *y = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 1000) * 0.001f - 0.5f;
    w[i] = (float)(i % 7) * 0.1f;
  }
  jx_array *in[2] = {jx_keep(jx_array_from(JX_F32, JX_SHAPE(N), x)),
                     jx_keep(jx_array_from(JX_F32, JX_SHAPE(N), w))};
  jx_fn *f = jx_fn_create("chain", 2, 1, chain, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *warm[1];
  jx_call(jf, in, warm); /* compile outside the timing */
  double eager = median_ms(f, in), jit = median_ms(jf, in);
  /* triad: y = x + s * w on as many threads as the kernels use, the
   * bandwidth the fused kernel competes with (both read two arrays and write one) */
  int threads = bench_triad_threads();
  double tt[RUNS];
  for (int r = 0; r < RUNS; r++) tt[r] = bench_triad_ns(x, w, y, N, threads) * 1e-6;
  qsort(tt, RUNS, sizeof *tt, bench_cmp_double);
  double bytes = 3.0 * sizeof(float) * N; /* two reads and a write, for both */
  printf("{\"bench\":\"fused_chain_f32_16M_eager\",\"impl\":\"jx\",\"median_ns\":%.0f,"
         "\"runs\":%d}\n",
         eager * 1e6, RUNS);
  printf("{\"bench\":\"fused_chain_f32_16M\",\"impl\":\"jx\",\"median_ns\":%.0f,\"runs\":%d,"
         "\"gb_per_s\":%.2f}\n",
         jit * 1e6, RUNS, bytes / jit / 1e6);
  printf("{\"bench\":\"fused_chain_f32_16M\",\"impl\":\"triad\",\"median_ns\":%.0f,"
         "\"runs\":%d,\"gb_per_s\":%.2f}\n",
         tt[RUNS / 2] * 1e6, RUNS, bytes / tt[RUNS / 2] / 1e6);
  jx_release(in[0]);
  jx_release(in[1]);
  jx_fn_release(jf);
  jx_fn_release(f);
  free(x);
  free(w);
  free(y);
  jx_shutdown();
  return 0;
}
