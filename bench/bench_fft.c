/* The Fourier transforms, jitted (bench/compare.py --workload fft times
 * jax.jit of the same jnp.fft functions and NumPy on the same shapes):
 *  - fft_2p20_c64: jnp.fft.fft of one complex64 vector of 2^20 points;
 *  - rfft2_1024_f32: jnp.fft.rfft2 of one float32 1024 x 1024 image
 *    (a c64 [1024, 513] result).
 * Prints JSON lines {"bench", "impl": "jx", "median_ns", "runs"}. */
#include "bench_util.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { RUNS = 11, LONG = 1 << 20, SIDE = 1024, WORKLOADS = 2 };

static void fft_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_fft_fft(in[0], -1, -1, NULL);
}

static void rfft2_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_fft_rfft2(in[0], JX_SHAPE(), JX_AXES(), NULL);
}

typedef struct {
  const char *name;
  jx_fn *f;
  jx_array *in;
} workload;

/* ns for one call of w (its result blocked on) */
static double time_call(const workload *w) {
  jx_array *out;
  jx_scope_begin();
  double t0 = bench_now_ns();
  jx_call(w->f, &w->in, &out);
  jx_block_until_ready(out);
  double t = bench_now_ns() - t0;
  jx_scope_end();
  return t;
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : RUNS;
  if (runs < 1 || runs > 1000) runs = RUNS;
  jx_scope_begin(); /* the inputs' intermediates end here */
  jx_array *z = jx_keep(jx_complex(jx_random_normal(jx_random_key(0), JX_F32, JX_SHAPE(LONG)),
                                   jx_random_normal(jx_random_key(1), JX_F32, JX_SHAPE(LONG))));
  jx_array *img = jx_keep(jx_random_normal(jx_random_key(2), JX_F32, JX_SHAPE(SIDE, SIDE)));
  jx_scope_end();
  workload w[WORKLOADS] = {
      {"fft_2p20_c64", jx_fn_create("fft", 1, 1, fft_body, NULL), z},
      {"rfft2_1024_f32", jx_fn_create("rfft2", 1, 1, rfft2_body, NULL), img},
  };
  double *t = malloc(sizeof *t * (size_t)(runs * WORKLOADS));
  jx_fn *jf[WORKLOADS]; /* the plain functions; w[i].f is jitted */
  for (int i = 0; i < WORKLOADS; i++) {
    jf[i] = w[i].f;
    w[i].f = jx_jit(jf[i], NULL);
    (void)time_call(&w[i]); /* trace, compile, plan, warm up */
  }
  for (int r = 0; t && r < runs; r++) /* the workloads alternate */
    for (int i = 0; i < WORKLOADS; i++) t[i * runs + r] = time_call(&w[i]);
  if (!t || jx_last_status() != JX_OK) {
    fprintf(stderr, "bench_fft: %s\n", t ? jx_last_error() : "out of memory");
    return 1;
  }
  for (int i = 0; i < WORKLOADS; i++) {
    qsort(t + i * runs, (size_t)runs, sizeof *t, bench_cmp_double);
    printf("{\"bench\":\"%s\",\"impl\":\"jx\",\"median_ns\":%.0f,\"runs\":%d}\n", w[i].name,
           t[i * runs + runs / 2], runs);
    jx_fn_release(jf[i]);
    jx_fn_release(w[i].f);
  }
  free(t);
  jx_release(z);
  jx_release(img);
  jx_shutdown();
  return 0;
}
