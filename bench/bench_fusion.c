#define _POSIX_C_SOURCE 199309L
/* A chain of six elementwise ops over 16M f32, eager (six passes over
 * memory) and under jit (one fused kernel), next to a triad-like copy
 * bandwidth measured in the same run. Prints JSON lines. */
#include <jx/jx.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 16 * 1024 * 1024, RUNS = 7 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

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
    double t0 = now();
    jx_call(f, in, out);
    jx_block_until_ready(out[0]);
    t[r] = (now() - t0) * 1e3;
    jx_scope_end();
  }
  qsort(t, RUNS, sizeof *t, cmp);
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
  /* triad-like: y = x + s * w, the bandwidth the fused kernel competes with */
  double tt[RUNS];
  for (int r = 0; r < RUNS; r++) {
    double t0 = now();
    for (int i = 0; i < N; i++) y[i] = x[i] + 0.5f * w[i];
    tt[r] = (now() - t0) * 1e3;
  }
  qsort(tt, RUNS, sizeof *tt, cmp);
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
