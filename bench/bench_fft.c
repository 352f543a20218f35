/* The Fourier transforms, jitted (bench/compare.py --workload fft times
 * jax.jit of the same jnp.fft functions and NumPy on the same shapes):
 *  - fft_2p20_c64: jnp.fft.fft of one complex64 vector of 2^20 points;
 *  - rfft2_1024_f32: jnp.fft.rfft2 of one float32 1024 x 1024 image
 *    (a c64 [1024, 513] result);
 *  - irfft2_1024_f32: jnp.fft.irfft2 of that spectrum back to the image
 *    (s = (1024, 1024)).
 * Prints JSON lines {"bench", "impl": "jx", "median_ns", "runs"}. */
#include "bench_util.h"
#include "bench_jit_rounds.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { RUNS = 11, LONG = 1 << 20, SIDE = 1024, WORKLOADS = 3 };

static void fft_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_fft_fft(in[0], -1, -1, NULL);
}

static void irfft2_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_fft_irfft2(in[0], JX_SHAPE(SIDE, SIDE), JX_AXES(), NULL);
}

static void rfft2_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_fft_rfft2(in[0], JX_SHAPE(), JX_AXES(), NULL);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : RUNS;
  if (runs < 1 || runs > 1000) runs = RUNS;
  jx_scope_begin(); /* the inputs' intermediates end here */
  jx_array *z = jx_keep(jx_complex(jx_random_normal(jx_random_key(0), JX_F32, JX_SHAPE(LONG)),
                                   jx_random_normal(jx_random_key(1), JX_F32, JX_SHAPE(LONG))));
  jx_array *img = jx_keep(jx_random_normal(jx_random_key(2), JX_F32, JX_SHAPE(SIDE, SIDE)));
  jx_array *spectrum = jx_keep(jx_fft_rfft2(img, JX_SHAPE(), JX_AXES(), NULL));
  jx_scope_end();
  bench_jit_workload w[WORKLOADS] = {
      {"fft_2p20_c64", jx_fn_create("fft", 1, 1, fft_body, NULL), 1, 1, {z}},
      {"rfft2_1024_f32", jx_fn_create("rfft2", 1, 1, rfft2_body, NULL), 1, 1, {img}},
      {"irfft2_1024_f32", jx_fn_create("irfft2", 1, 1, irfft2_body, NULL), 1, 1, {spectrum}},
  };
  int bad = bench_jit_rounds("bench_fft", w, WORKLOADS, runs);
  jx_release(z);
  jx_release(img);
  jx_release(spectrum);
  jx_shutdown();
  return bad;
}
