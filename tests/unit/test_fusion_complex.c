/* Complex values in fused kernels (the C renderer's jx_c64 / jx_c128: C99's
 * float/double _Complex and <complex.h>). A jitted chain of the complex
 * elementwise ops (exp, log, sqrt, rsqrt, sin, cos, tan, sinh, cosh, tanh,
 * pow, sign, abs, conj, real, imag, complex, select, integer_pow written out
 * and through the helper, converts between real and complex) is one kernel,
 * gives the eager kernels' bits, and matches JAX (tests/golden/gen_complex.py, c64 in
 * the default mode and c128 in x64); ended by a sum over the rows or over
 * the leading axis, it is still one kernel with the eager pairwise sums'
 * bits. A large lone complex op is a kernel; c128 -> bf16 (one rounding
 * from the double) stays on the reference kernel. Transposes, pad and
 * concatenate of complex arrays fuse as they do for f32. Under JX_PLATFORM=cuda
 * (cuda.unit.test_fusion_complex: the CUDA dialect in the emulator) the
 * kernels match the eager results within cuda_rtol and JAX alike. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "array/array.h"
#include "test_util.h"
#include "fusion_check.h"
#include "complex_check.h"

#define DIR JX_TEST_DATA "/complex/"

static jx_array *golden(int x64, const char *name) { return complex_golden(DIR, x64, name); }

/* gen_complex.py's chain(z, w, x) */
static jx_array *chain(jx_array *z, jx_array *w, jx_array *x) {
  jx_array *u = jx_sub(jx_mul(jx_exp(z), w), jx_div(jx_sqrt(z), jx_add(w, jx_conj(z))));
  jx_array *v =
      jx_add(jx_add(jx_mul(jx_sin(u), jx_cos(z)), jx_tanh(w)), jx_mul(jx_log(z), jx_pow(z, w)));
  jx_array *s = jx_mul(jx_where(jx_gt(x, jx_scalar(JX_F32, 0)), u, v), jx_sign(z));
  s = jx_sub(jx_add(s, jx_mul(jx_complex(x, jx_real(z)), jx_rsqrt(w))), jx_imag(w));
  return jx_sub(jx_add(jx_add(s, jx_abs(z)), jx_integer_pow(z, 3)), jx_integer_pow(w, -21));
}

static void f_chain(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = chain(in[0], in[1], in[2]);
}
static void f_chain_rows(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(chain(in[0], in[1], in[2]), JX_AXES(1), 0);
}
static void f_chain_cols(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(chain(in[0], in[1], in[2]), JX_AXES(0), 0);
}

static void f_trig_chain(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(jx_tan(in[0]), jx_sinh(in[1])), jx_cosh(jx_sub(in[0], in[1])));
}

static const struct {
  const char *name;
  jx_body f;
} CHAINS[] = {{"chain", f_chain},
              {"chain_rows", f_chain_rows},
              {"chain_cols", f_chain_cols},
              {"trig_chain", f_trig_chain}};

static void chain_matches(int x64) {
  jx_config_enable_x64(x64);
  jx_array *in[3] = {jx_keep(golden(x64, "z")), jx_keep(golden(x64, "w")),
                     jx_keep(golden(x64, "x"))};
  for (size_t k = 0; k < sizeof CHAINS / sizeof *CHAINS; k++) {
    jx_scope_begin();
    jx_fn *f = jx_fn_create(CHAINS[k].name, 3, 1, CHAINS[k].f, NULL);
    expect_one_kernel(jit_matches(f, 3, in));
    jx_fn *jf = jx_jit(f, NULL);
    jx_array *out[1];
    check_ok(jx_call(jf, in, out));
    char what[64];
    snprintf(what, sizeof what, "%s %s", x64 ? "c128" : "c64", CHAINS[k].name);
    assert_close(what, out[0], golden(x64, CHAINS[k].name), x64 ? 1e-12 : 2e-5);
    jx_fn_release(jf);
    jx_fn_release(f);
    jx_scope_end();
  }
  for (int i = 0; i < 3; i++) jx_release(in[i]);
  jx_config_enable_x64(0);
}

static void chain_matches_c64(void **state) {
  (void)state;
  chain_matches(0);
}
static void chain_matches_c128(void **state) {
  (void)state;
  chain_matches(1);
}

/* complex(a, b) of two real waves: an eager complex array */
static jx_array *complex_values(jx_dtype dt, jx_shape s, int seed) {
  jx_dtype part = dt == JX_C128 ? JX_F64 : JX_F32;
  jx_array *re = values(part, s, seed), *im = values(part, s, seed + 1); /* kept */
  jx_scope_begin();
  jx_array *z = jx_keep(jx_complex(re, im));
  jx_scope_end();
  jx_release(re);
  jx_release(im);
  return z;
}

/* the rows and the leading axis of big arrays: several leaves of the
 * pairwise trees, blocks of columns, rows over the pool */
static void sums_of_big_chains(void **state) {
  (void)state;
  TEST_SKIP_ON_CUDA("the emulator takes minutes over 300 x 517; chain_matches covers the dialect");
  const jx_dtype dts[] = {JX_C64, JX_C128};
  for (int d = 0; d < 2; d++) {
    jx_config_enable_x64(dts[d] == JX_C128);
    jx_shape s = JX_SHAPE(300, 517);
    jx_array *in[3] = {complex_values(dts[d], s, 1), complex_values(dts[d], s, 3),
                       values(dts[d] == JX_C128 ? JX_F64 : JX_F32, s, 5)};
    for (size_t k = 0; k < sizeof CHAINS / sizeof *CHAINS; k++) {
      jx_scope_begin();
      jx_fn *f = jx_fn_create(CHAINS[k].name, 3, 1, CHAINS[k].f, NULL);
      expect_one_kernel(jit_matches(f, 3, in));
      jx_fn_release(f);
      jx_scope_end();
    }
    for (int i = 0; i < 3; i++) jx_release(in[i]);
    jx_config_enable_x64(0);
  }
}

static void f_exp(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_exp(in[0]);
}
static void f_to_bf16(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_astype(in[0], JX_BF16);
}
/* c128 -> c64 -> f32 (the real part) -> c128 again */
static void f_converts(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *c = jx_astype(jx_mul(in[0], in[0]), JX_C64);
  jx_array *r = jx_astype(jx_add(c, jx_complex_scalar(JX_C64, 0.5, -1)), JX_F32);
  out[0] = jx_add(jx_astype(r, JX_C128), jx_astype(c, JX_C128));
}

static void lone_ops_and_converts(void **state) {
  (void)state;
  jx_config_enable_x64(1);
  jx_array *z64 = complex_values(JX_C64, JX_SHAPE(64, 80), 7);
  jx_array *z128 = complex_values(JX_C128, JX_SHAPE(64, 80), 9);
  jx_fn *f = jx_fn_create("exp", 1, 1, f_exp, NULL);
  expect_one_kernel(jit_matches(f, 1, &z64)); /* 5120 elements: worth a kernel */
  expect_one_kernel(jit_matches(f, 1, &z128));
  jx_fn_release(f);
  f = jx_fn_create("converts", 1, 1, f_converts, NULL);
  expect_one_kernel(jit_matches(f, 1, &z128));
  jx_fn_release(f);
  /* c128 -> bf16 rounds once from the real part's double: the reference's */
  f = jx_fn_create("to_bf16", 1, 1, f_to_bf16, NULL);
  plan r = jit_matches(f, 1, &z128);
  if (r.kernels >= 0) {
    assert_int_equal(r.kernels, 0);
    assert_int_equal(r.eager, 1);
  }
  r = jit_matches(f, 1, &z64); /* c64's float real part rounds once either way */
  if (r.kernels >= 0) assert_int_equal(r.kernels, 1);
  jx_fn_release(f);
  jx_release(z64);
  jx_release(z128);
  jx_config_enable_x64(0);
}

/* views and windows of complex arrays (transposes read in place, pad and
 * concatenate as selects over windowed loads) fuse as f32 ones do */
static void f_views(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *t = jx_transpose(in[0], JX_AXES());
  jx_array *u = jx_mul(jx_exp(t), jx_transpose(in[1], JX_AXES()));
  out[0] = jx_add(jx_concatenate(2, (jx_array *[]){t, jx_sin(t)}, 1),
                  jx_pad(jx_neg(t), JX_SHAPE(0, 1), JX_SHAPE(0, 63), 0.0));
  out[0] = jx_concatenate(2, (jx_array *[]){out[0], u}, 1);
}

static void views_and_windows(void **state) {
  (void)state;
  jx_config_enable_x64(1);
  jx_fn *f = jx_fn_create("views", 2, 1, f_views, NULL);
  jx_array *x[2] = {values(JX_F32, JX_SHAPE(64, 80), 11), values(JX_F32, JX_SHAPE(64, 80), 13)};
  plan real = jit_matches(f, 2, x);
  const jx_dtype dts[] = {JX_C64, JX_C128};
  for (int d = 0; d < 2; d++) {
    jx_array *in[2] = {complex_values(dts[d], JX_SHAPE(64, 80), 11),
                       complex_values(dts[d], JX_SHAPE(64, 80), 13)};
    plan r = jit_matches(f, 2, in);
    assert_int_equal(r.kernels, real.kernels);
    assert_int_equal(r.eager, real.eager);
    jx_release(in[0]);
    jx_release(in[1]);
  }
  jx_fn_release(f);
  jx_release(x[0]);
  jx_release(x[1]);
  jx_config_enable_x64(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chain_matches_c64),  cmocka_unit_test(chain_matches_c128),
      cmocka_unit_test(sums_of_big_chains), cmocka_unit_test(lone_ops_and_converts),
      cmocka_unit_test(views_and_windows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
