/* jx/fft.h against jax.numpy.fft (tests/golden/gen_fft.py), in JAX's
 * default mode (f32/c64) and x64 (f64/c128): every function eagerly and
 * under jit, the 1-D ones under vmap, gradients through the fft
 * primitive's transposes against jax.grad and jx_check_grads, and the
 * errors of bad arguments. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <complex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */
#include <jx/jx.h>

#include "array/array.h"
#include "base/threadpool.h"
#include "fft/fft_kernel.h"
#include "test_util.h"
#include "test_golden_close.h"

#define DIR JX_TEST_DATA "/fft/"

static jx_array *golden(int x64, const char *name) { return golden_at(DIR, x64, name); }

/* dtype and shape equal, elements within rtol of the largest |want| (at least 1) */
static void assert_close(const char *what, jx_array *got, jx_array *want, double rtol) {
  assert_close_golden(what, got, want, rtol, CLOSE_TO_MAX);
}

static double tol(int x64) { return x64 ? 1e-12 : 3e-6; }

typedef jx_array *(*case_fn)(jx_array *x, jx_array *z);
#define CASE(NAME, EXPR)                                                                           \
  static jx_array *c_##NAME(jx_array *x, jx_array *z) {                                            \
    (void)x, (void)z;                                                                              \
    return EXPR;                                                                                   \
  }
CASE(fft, jx_fft_fft(z, -1, -1, NULL))
CASE(fft_n8_axis0, jx_fft_fft(z, 8, 0, NULL))
CASE(fft_n4_real, jx_fft_fft(x, 4, -1, NULL))
CASE(ifft, jx_fft_ifft(z, -1, -1, NULL))
CASE(ifft_ortho, jx_fft_ifft(z, -1, -1, "ortho"))
CASE(fft_forward, jx_fft_fft(z, -1, -1, "forward"))
CASE(rfft, jx_fft_rfft(x, -1, -1, NULL))
CASE(rfft_n5, jx_fft_rfft(x, 5, -1, NULL))
CASE(rfft_axis0_ortho, jx_fft_rfft(x, -1, 0, "ortho"))
CASE(irfft, jx_fft_irfft(z, -1, -1, NULL))
CASE(irfft_n7, jx_fft_irfft(z, 7, -1, NULL))
CASE(irfft_axis0_forward, jx_fft_irfft(z, -1, 0, "forward"))
CASE(fft2, jx_fft_fft2(z, JX_SHAPE(), JX_AXES(), NULL))
CASE(ifft2_s, jx_fft_ifft2(z, JX_SHAPE(3, 8), JX_AXES(), NULL))
CASE(rfft2, jx_fft_rfft2(x, JX_SHAPE(), JX_AXES(), NULL))
CASE(irfft2, jx_fft_irfft2(z, JX_SHAPE(), JX_AXES(), NULL))
CASE(fftn_axes10, jx_fft_fftn(z, JX_SHAPE(), JX_AXES(1, 0), NULL))
CASE(rfftn_ortho, jx_fft_rfftn(x, JX_SHAPE(), JX_AXES(), "ortho"))
CASE(irfftn_s, jx_fft_irfftn(z, JX_SHAPE(4, 9), JX_AXES(), NULL))
CASE(fftshift, jx_fft_fftshift(x, JX_AXES()))
CASE(ifftshift_axis1, jx_fft_ifftshift(z, JX_AXES(1)))
CASE(fftfreq7, jx_fft_fftfreq(7, 0.5, jx_dtype_of(x)))
CASE(fftfreq8, jx_fft_fftfreq(8, 1.0, jx_dtype_of(x)))
CASE(rfftfreq7, jx_fft_rfftfreq(7, 2.0, jx_dtype_of(x)))

static const struct {
  const char *name;
  case_fn f;
  int rows; /* acts on each row alike: checked under vmap over axis 0 */
} CASES[] = {
    {"fft", c_fft, 1},
    {"fft_n8_axis0", c_fft_n8_axis0, 0},
    {"fft_n4_real", c_fft_n4_real, 1},
    {"ifft", c_ifft, 1},
    {"ifft_ortho", c_ifft_ortho, 1},
    {"fft_forward", c_fft_forward, 1},
    {"rfft", c_rfft, 1},
    {"rfft_n5", c_rfft_n5, 1},
    {"rfft_axis0_ortho", c_rfft_axis0_ortho, 0},
    {"irfft", c_irfft, 1},
    {"irfft_n7", c_irfft_n7, 1},
    {"irfft_axis0_forward", c_irfft_axis0_forward, 0},
    {"fft2", c_fft2, 0},
    {"ifft2_s", c_ifft2_s, 0},
    {"rfft2", c_rfft2, 0},
    {"irfft2", c_irfft2, 0},
    {"fftn_axes10", c_fftn_axes10, 0},
    {"rfftn_ortho", c_rfftn_ortho, 0},
    {"irfftn_s", c_irfftn_s, 0},
    {"fftshift", c_fftshift, 0},
    {"ifftshift_axis1", c_ifftshift_axis1, 0},
    {"fftfreq7", c_fftfreq7, 0},
    {"fftfreq8", c_fftfreq8, 0},
    {"rfftfreq7", c_rfftfreq7, 0},
};

static void body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = ((case_fn)ctx)(in[0], in[1]);
}

static void functions_match_jax(int x64) {
  jx_config_enable_x64(x64);
  jx_array *in[2] = {golden(x64, "x"), golden(x64, "z")};
  for (size_t k = 0; k < sizeof CASES / sizeof *CASES; k++) {
    jx_scope_begin();
    jx_array *want = golden(x64, CASES[k].name), *out[1];
    char what[96];
    snprintf(what, sizeof what, "%s %s", mode_name(x64), CASES[k].name);
    assert_close(what, CASES[k].f(in[0], in[1]), want, tol(x64));
    jx_fn *f = jx_fn_create(CASES[k].name, 2, 1, body, (void *)CASES[k].f);
    jx_fn *jf = jx_jit(f, NULL);
    check_ok(jx_call(jf, in, out));
    snprintf(what, sizeof what, "%s %s jit", mode_name(x64), CASES[k].name);
    assert_close(what, out[0], want, tol(x64));
    if (CASES[k].rows) {
      jx_fn *vf = jx_vmap(f, JX_AXES(0), JX_AXES(0));
      check_ok(jx_call(vf, in, out));
      snprintf(what, sizeof what, "%s %s vmap", mode_name(x64), CASES[k].name);
      assert_close(what, out[0], want, tol(x64));
      jx_fn_release(vf);
    }
    jx_fn_release(jf);
    jx_fn_release(f);
    jx_scope_end();
  }
  jx_config_enable_x64(0);
}
static void functions_match_jax_x32(void **s) {
  (void)s;
  functions_match_jax(0);
}
static void functions_match_jax_x64(void **s) {
  (void)s;
  functions_match_jax(1);
}

/* ---- gradients ---- */
static jx_array *sum_all(jx_array *a) { return jx_sum(a, JX_AXES(), 0); }
static jx_array *ramp(jx_array *like, int64_t n) {
  return jx_astype(jx_arange(JX_F64, 0, (double)n, 1), jx_dtype_of(like));
}
static void g_rfft_x(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *p = jx_integer_pow(jx_abs(jx_fft_rfft(in[0], -1, -1, NULL)), 2);
  out[0] = sum_all(jx_mul(p, jx_reshape(ramp(p, 4), JX_SHAPE(4, 1))));
}
static void g_irfft_z(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *y = jx_fft_irfft(in[1], -1, -1, NULL);
  out[0] = sum_all(jx_mul(y, ramp(y, 10)));
}
static void g_fft_z(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *re = jx_real(jx_fft_fft(in[1], -1, -1, NULL));
  jx_array *im = jx_imag(jx_fft_ifft(in[1], -1, 0, NULL));
  out[0] = sum_all(jx_add(jx_mul(re, ramp(re, 6)), jx_integer_pow(im, 2)));
}
static void g_rfft2_irfft2(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *y = jx_mul(jx_fft_rfft2(in[0], JX_SHAPE(), JX_AXES(), NULL), jx_scalar(JX_F32, 1.5));
  out[0] = sum_all(jx_sin(jx_fft_irfft2(y, JX_SHAPE(), JX_AXES(), NULL)));
}
static void g_rfft_n5(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = sum_all(jx_imag(jx_fft_rfft(in[0], 5, -1, "ortho")));
}

static const struct {
  const char *name;
  jx_body f;
  int arg;
} GRADS[] = {{"grad_rfft_x", g_rfft_x, 0},
             {"grad_irfft_z", g_irfft_z, 1},
             {"grad_fft_z", g_fft_z, 1},
             {"grad_rfft2_irfft2", g_rfft2_irfft2, 0},
             {"grad_rfft_n5", g_rfft_n5, 0}};

static void grads_match_jax(int x64) {
  jx_config_enable_x64(x64);
  jx_array *in[2] = {golden(x64, "x"), golden(x64, "z")}, *out[1];
  for (size_t k = 0; k < sizeof GRADS / sizeof *GRADS; k++) {
    jx_scope_begin();
    jx_fn *f = jx_fn_create(GRADS[k].name, 2, 1, GRADS[k].f, NULL);
    jx_fn *g = jx_grad(f, JX_AXES(GRADS[k].arg));
    jx_fn *jg = jx_jit(g, NULL);
    char what[96];
    snprintf(what, sizeof what, "%s %s", mode_name(x64), GRADS[k].name);
    check_ok(jx_call(g, in, out));
    assert_close(what, out[0], golden(x64, GRADS[k].name), x64 ? 1e-11 : 2e-5);
    check_ok(jx_call(jg, in, out));
    assert_close(what, out[0], golden(x64, GRADS[k].name), x64 ? 1e-11 : 2e-5);
    if (x64) check_ok(jx_check_grads(f, in, 2, 0, 0));
    jx_fn_release(jg);
    jx_fn_release(g);
    jx_fn_release(f);
    jx_scope_end();
  }
  jx_config_enable_x64(0);
}
static void grads_match_jax_x32(void **s) {
  (void)s;
  grads_match_jax(0);
}
static void grads_match_jax_x64(void **s) {
  (void)s;
  grads_match_jax(1);
}

/* ---- bad input ---- */
static void bad_arguments_are_clear_errors(void **state) {
  (void)state;
  jx_array *x = jx_ones(JX_F32, JX_SHAPE(4, 6)), *z = jx_ones(JX_C64, JX_SHAPE(4, 6));
  assert_true(jx_is_poisoned(jx_fft_rfft(z, -1, -1, NULL)));
  assert_error_has("jx_fft_rfft: the input is c64[4,6]; the real transforms take real input");
  assert_true(jx_is_poisoned(jx_fft_fft(x, -1, 2, NULL)));
  assert_error_has("axis 2 is out of range for rank 2");
  assert_true(jx_is_poisoned(jx_fft_fft(x, -1, -1, "orthonormal")));
  assert_error_has("invalid norm \"orthonormal\"");
  assert_true(jx_is_poisoned(jx_fft_fft2(x, JX_SHAPE(3), JX_AXES(0, 1), NULL)));
  assert_error_has("s has 1 entries but axes 2");
  assert_true(jx_is_poisoned(
      jx_fft_fftn(jx_ones(JX_C64, JX_SHAPE(2, 2, 2, 2)), JX_SHAPE(), JX_AXES(), NULL)));
  assert_error_has("at most 3");
  assert_true(jx_is_poisoned(jx_fft_fftn(z, JX_SHAPE(), JX_AXES(1, 1), NULL)));
  assert_error_has("axis 1 appears twice");
  assert_true(jx_is_poisoned(jx_fft_irfft(z, 0, -1, NULL)));
  assert_error_has("invalid length 0");
  assert_true(jx_is_poisoned(jx_fft_fftfreq(0, 1, JX_F32)));
  assert_error_has("needs n >= 1");
  jx_clear_error();
}

/* sharded jit: an rfft along the unsharded axis keeps the rows' split, one
 * along the sharded axis gathers it; both give the unsharded numbers */
static void sharded_transforms_keep_the_other_axes_split(void **state) {
  (void)state;
  const char *names[] = {"x"};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), names);
  jx_sharding *rows = jx_sharding_create(m, "x");
  jx_array *in[2] = {jx_device_put(golden(0, "x"), rows), golden(0, "z")}, *out[1];
  const struct {
    case_fn f;
    const char *name, *spec;
  } cases[] = {{c_rfft, "rfft", "x"}, {c_rfft_axis0_ortho, "rfft_axis0_ortho", NULL}};
  for (int k = 0; k < 2; k++) {
    jx_fn *f = jx_fn_create(cases[k].name, 2, 1, body, (void *)cases[k].f);
    jx_fn *jf = jx_jit(f, NULL);
    check_ok(jx_call(jf, in, out));
    assert_close(cases[k].name, out[0], golden(0, cases[k].name), tol(0));
    if (cases[k].spec) {
      assert_non_null(jx_sharding_of(out[0]));
      assert_string_equal(jx_sharding_spec(jx_sharding_of(out[0])), cases[k].spec);
    }
    jx_fn_release(jf);
    jx_fn_release(f);
  }
  jx_sharding_release(rows);
  jx_mesh_release(m);
}

/* rank 3, transforms over the trailing dims while another dim is split: the
 * split stays where it was (no gather of the batch), and the numbers are
 * the unsharded jit's */
static void rfft2_last_two(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_fft_rfft2(in[0], JX_SHAPE(), JX_AXES(), NULL);
}
static void fft_last(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_fft_fft(in[0], -1, -1, NULL);
}
static void irfft_last(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_fft_irfft(in[0], 8, -1, "ortho");
}
static void sharded_batches_match_unsharded(void **state) {
  (void)state;
  const char *names[] = {"x"};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), names);
  jx_array *x = jx_random_normal(jx_random_key(7), JX_F32, JX_SHAPE(4, 6, 8));
  jx_array *z = jx_fft_rfft(x, -1, -1, NULL); /* c64[4, 6, 5] */
  const struct {
    jx_body f;
    const char *name, *spec;
    jx_array *in;
  } cases[] = {{rfft2_last_two, "rfft2 over dims 1, 2", "x", x},
               {fft_last, "fft over dim 2", "None,x", x},
               {irfft_last, "irfft over dim 2", "x", z}};
  for (int k = 0; k < 3; k++) {
    jx_scope_begin();
    jx_sharding *sh = jx_sharding_create(m, cases[k].spec);
    jx_fn *f = jx_fn_create(cases[k].name, 1, 1, cases[k].f, NULL), *jf = jx_jit(f, NULL);
    jx_array *in = jx_device_put(cases[k].in, sh), *got, *want;
    check_ok(jx_call(jf, &cases[k].in, &want));
    check_ok(jx_call(jf, &in, &got));
    check_ok(jx_block_until_ready(want)); /* assert_close waits for got only */
    assert_close(cases[k].name, got, want, 1e-6);
    assert_non_null(jx_sharding_of(got));
    assert_string_equal(jx_sharding_spec(jx_sharding_of(got)), cases[k].spec);
    jx_fn_release(jf);
    jx_fn_release(f);
    jx_sharding_release(sh);
    jx_scope_end();
  }
  jx_mesh_release(m);
}

/* a transform large enough to run on the pool and be measured, against a
 * direct sum at a few bins, and back */
static void long_transform_matches_direct_sum(void **state) {
  (void)state;
  enum { N = 1 << 16 }; /* the smallest measured, on the pool */
  double *v = malloc(sizeof *v * 2 * N);
  for (int i = 0; i < 2 * N; i++) v[i] = sin(0.37 * i) + 0.001 * i;
  jx_array *z = jx_array_from(JX_C128, JX_SHAPE(N), v);
  jx_array *y = jx_fft_fft(z, -1, -1, NULL);
  check_ok(jx_block_until_ready(y));
  const double _Complex *x = (const double _Complex *)v;
  for (int k = 0; k < N; k += N / 3 + 1) {
    double _Complex s = 0;
    for (int j = 0; j < N; j++)
      s += x[j] * cexp(-2 * 3.14159265358979323846 * I * (double)j * k / N);
    assert_true(cabs(jx_load_c128(jx_array_data(y), JX_C128, k) - s) < 1e-9 * N);
  }
  /* back by ifft(y) = conj(fft(conj(y))) / N: the same plan, measured once */
  jx_array *back =
      jx_div(jx_conj(jx_fft_fft(jx_conj(y), -1, -1, NULL)), jx_scalar(JX_F64, (double)N));
  check_ok(jx_block_until_ready(back));
  for (int j = 0; j < N; j += 977)
    assert_true(cabs(jx_load_c128(jx_array_data(back), JX_C128, j) - x[j]) < 1e-12 * N);
  free(v);
  /* its plan was measured, and what FFTW found is in the cache directory
   * for the next process (ctest gives each test a directory of its own) */
  const char *dir = getenv("JX_CACHE_DIR");
  if (!dir) skip();
  char path[1024];
  snprintf(path, sizeof path, "%s/fftw3-wisdom.f64", dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char head[64] = {0};
  assert_non_null(fgets(head, sizeof head, f));
  assert_non_null(strstr(head, "fftw_wisdom"));
  fclose(f);
}

/* the kernel on arrays off FFTW's SIMD alignment: a plan of its own (one
 * made for aligned arrays would read them wrongly), the same numbers as a
 * direct sum, after the aligned plan of the same transform is cached */
static void unaligned_arrays_get_their_own_plan(void **state) {
  (void)state;
  enum { N = 256, BATCH = 4 };
  float _Complex *buf = aligned_alloc(64, sizeof *buf * (N * BATCH + 8) * 2); /* 64 | size */
  float _Complex *in = buf, *out = buf + N * BATCH + 1; /* out is 8 bytes off */
  for (int i = 0; i < N * BATCH; i++) in[i] = (float)sin(0.3 * i) + I * (float)cos(0.7 * i);
  const int64_t n[1] = {N};
  for (int shift = 0; shift < 2; shift++) { /* in aligned, then 8 bytes off */
    float _Complex *x = in + shift;
    if (shift) memmove(x, in, sizeof *in * N * BATCH);
    assert_true(jx_fft_run(JX_FFT_FFT, 0, 1, n, BATCH, x, shift ? out : out - 1));
    const float _Complex *y = shift ? out : out - 1;
    for (int b = 0; b < BATCH; b++)
      for (int k = 0; k < N; k += 37) {
        double _Complex want = 0;
        for (int j = 0; j < N; j++)
          want += x[b * N + j] * cexp(-2 * 3.14159265358979323846 * I * (double)j * k / N);
        assert_true(cabs(y[b * N + k] - want) < 1e-4 * N);
      }
  }
  free(buf);
}

/* a 2-D real transform large enough to run columns first over the pool
 * (fft_kernel.c: the c2c of pairs of real columns in blocks, with a wider
 * last block, then the c2c of pairs of rows k, n0 - k, the first pairing
 * with itself, and for an even n0 the middle one too), of two images of an
 * even and one of an odd height, against direct sums at bins in the
 * first, a middle and the last column block and in rows of both halves,
 * the same bits on one thread as on the pool, the same numbers into an
 * output 8 bytes off FFTW's alignment (the column blocks' unaligned plans),
 * and the same bits from an input 4 bytes off it (its rows are copied into
 * the output before any transform) */
static void *alloc_aligned(size_t bytes) { /* aligned_alloc wants a multiple of 64 */
  return aligned_alloc(64, (bytes + 63) / 64 * 64);
}
static void rfft2_columns_first_matches(int B, int N0) {
  enum { N1 = 1040, H = N1 / 2 + 1 }; /* 520 complex columns, 521 in the result */
  float *x = alloc_aligned(sizeof *x * B * N0 * N1);
  float _Complex *y = alloc_aligned(sizeof *y * B * N0 * H),
                 *y1 = alloc_aligned(sizeof *y1 * B * N0 * H);
  uint32_t seed = 1; /* values in [-1, 1): every bin's magnitude about sqrt(N0 * N1) / 2 */
  for (int i = 0; i < B * N0 * N1; i++)
    x[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / (1 << 23) - 1;
  const int64_t n[2] = {N0, N1};
  assert_true(jx_fft_run(JX_FFT_RFFT, 0, 2, n, B, x, y));
  jx_pool_run_inline(1); /* one thread: the same bits */
  assert_true(jx_fft_run(JX_FFT_RFFT, 0, 2, n, B, x, y1));
  jx_pool_run_inline(0);
  assert_memory_equal(y, y1, sizeof *y * B * N0 * H);
  float _Complex *y2 = alloc_aligned(sizeof *y2 * (B * N0 * H + 1)), *off = y2 + 1;
  assert_int_equal((uintptr_t)off % 16, 8);
  assert_true(jx_fft_run(JX_FFT_RFFT, 0, 2, n, B, x, off));
  for (int i = 0; i < B * N0 * H; i++) /* bins of about 500; float rounding about 1e-3 */
    assert_true(cabsf(off[i] - y[i]) < 1e-2f);
  free(y2);
  float *x2 = alloc_aligned(sizeof *x2 * (B * N0 * N1 + 1)), *xoff = x2 + 1;
  memcpy(xoff, x, sizeof *x * B * N0 * N1);
  assert_true(jx_fft_run(JX_FFT_RFFT, 0, 2, n, B, xoff, y1));
  assert_memory_equal(y, y1, sizeof *y * B * N0 * H);
  free(x2);
  const double tau = 2 * 3.14159265358979323846;
  double _Complex *w = malloc(sizeof *w * N1);
  const int bins[][2] = {{0, 0},       {1, 1},          {N0 - 1, 300},
                         {517, H - 1}, {N0 / 2, H - 3}, {N0 / 2 + 1, 7}};
  for (int b = 0; b < B; b++)
    for (size_t k = 0; k < sizeof bins / sizeof *bins; k++) {
      int k0 = bins[k][0], k1 = bins[k][1];
      for (int c = 0; c < N1; c++) w[c] = cexp(-tau * I * (double)((int64_t)c * k1 % N1) / N1);
      double _Complex want = 0;
      for (int r = 0; r < N0; r++) { /* the row's DFT at k1, then the column's at k0 */
        const float *row = x + ((size_t)b * N0 + r) * N1;
        double _Complex at = 0;
        for (int c = 0; c < N1; c++) at += row[c] * w[c];
        want += at * cexp(-tau * I * (double)((int64_t)r * k0 % N0) / N0);
      }
      assert_true(cabs(y[((size_t)b * N0 + k0) * H + k1] - want) < 1e-6 * N0 * N1);
    }
  free(w);
  free(x);
  free(y);
  free(y1);
}

static void rfft2_columns_first_matches_direct_sum_on_any_threads(void **state) {
  (void)state;
  rfft2_columns_first_matches(2, 1026);
  rfft2_columns_first_matches(1, 1029);
}

int main(void) {
  setenv("JX_NUM_CPU_DEVICES", "2", 1); /* the sharded test's mesh */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(functions_match_jax_x32),
      cmocka_unit_test(functions_match_jax_x64),
      cmocka_unit_test(grads_match_jax_x32),
      cmocka_unit_test(grads_match_jax_x64),
      cmocka_unit_test(bad_arguments_are_clear_errors),
      cmocka_unit_test(long_transform_matches_direct_sum),
      cmocka_unit_test(unaligned_arrays_get_their_own_plan),
      cmocka_unit_test(rfft2_columns_first_matches_direct_sum_on_any_threads),
      cmocka_unit_test(sharded_transforms_keep_the_other_axes_split),
      cmocka_unit_test(sharded_batches_match_unsharded),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
