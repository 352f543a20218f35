/* The complex inverse trigonometric and hyperbolic functions (asin, acos,
 * atan, asinh, acosh, atanh), expm1, log1p and exp2 in fused kernels: the C
 * renderer calls the eager kernels' own functions (<complex.h>'s, and
 * complex_special.h's for the three C99 lacks), so a jitted chain of them is
 * one kernel with the eager bits, and it matches JAX
 * (tests/golden/gen_complex_special.py: c64 in the default mode, c128 in
 * x64). On the branch cuts (the real axis beyond +-1 for asin, acos, atanh,
 * below 1 for acosh, the imaginary axis beyond +-i for asinh and atan), on
 * both signs of zero, every function gives the eager bits too. Under
 * JX_PLATFORM=cuda (cuda.unit.test_fusion_complex_special: the CUDA
 * dialect's device functions in the emulator) the kernels match the eager
 * results within cuda_rtol, cuts and signed zeros included, and JAX alike. */
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

#include "test_util.h"
#include "fusion_check.h"
#include "complex_check.h"

#define DIR JX_TEST_DATA "/complex_special/"

/* gen_complex_special.py's chains */
static void f_inverse(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *z = in[0], *w = in[1];
  jx_array *a = jx_add(jx_mul(jx_asin(z), jx_acos(w)), jx_atan(jx_sub(z, w)));
  out[0] = jx_add(jx_sub(a, jx_mul(jx_asinh(w), jx_acosh(z))), jx_atanh(jx_mul(z, w)));
}
static void f_special(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *z = in[0], *w = in[1];
  jx_array *a = jx_add(jx_mul(jx_expm1(z), jx_exp2(w)), jx_log1p(jx_mul(z, w)));
  out[0] = jx_sub(a, jx_expm1(jx_log1p(w)));
}
static void f_special_rows(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *a = jx_add(jx_log1p(jx_mul(jx_asinh(in[0]), in[1])), jx_exp2(in[0]));
  out[0] = jx_sum(a, JX_AXES(1), 0);
}

static const struct {
  const char *name;
  jx_body f;
} CHAINS[] = {{"inverse", f_inverse}, {"special", f_special}, {"special_rows", f_special_rows}};

static void chains_match(int x64) {
  jx_config_enable_x64(x64);
  jx_array *in[2] = {jx_keep(complex_golden(DIR, x64, "z")),
                     jx_keep(complex_golden(DIR, x64, "w"))};
  for (size_t k = 0; k < sizeof CHAINS / sizeof *CHAINS; k++) {
    jx_scope_begin();
    jx_fn *f = jx_fn_create(CHAINS[k].name, 2, 1, CHAINS[k].f, NULL);
    expect_one_kernel(jit_matches(f, 2, in));
    jx_fn *jf = jx_jit(f, NULL);
    jx_array *out[1];
    check_ok(jx_call(jf, in, out));
    char what[64];
    snprintf(what, sizeof what, "%s %s", x64 ? "c128" : "c64", CHAINS[k].name);
    assert_close(what, out[0], complex_golden(DIR, x64, CHAINS[k].name), x64 ? 1e-12 : 2e-5);
    jx_fn_release(jf);
    jx_fn_release(f);
    jx_scope_end();
  }
  jx_release(in[0]);
  jx_release(in[1]);
  jx_config_enable_x64(0);
}

static void chains_match_c64(void **state) {
  (void)state;
  chains_match(0);
}
static void chains_match_c128(void **state) {
  (void)state;
  chains_match(1);
}

/* three of the nine functions on z (group *ctx: 0 the inverse
 * trigonometric, 1 the inverse hyperbolic, 2 expm1, log1p and exp2),
 * as three outputs of one kernel (jit_matches_eager compares at most 4) */
static void f_group(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *z = in[0];
  jx_array *(*const fns[3][3])(jx_array *) = {{(jx_asin), (jx_acos), (jx_atan)},
                                              {(jx_asinh), (jx_acosh), (jx_atanh)},
                                              {(jx_expm1), (jx_log1p), (jx_exp2)}};
  int g = *(const int *)ctx;
  for (int i = 0; i < 3; i++) out[i] = fns[g][i](z);
}

/* The points where the inverse functions' cuts and signed zeros decide the
 * result (C99 Annex G's conventions, which JAX's principal values follow
 * off the cuts): +-2 and +-0.5 on the real axis, +-2i and +-0.5i on the
 * imaginary, each with both signs of the zero part, and 0 itself. */
static void cuts_match(void **state) {
  (void)state;
  enum { N = 2 * 2 * 4 + 4 };
  double re[N], im[N];
  int n = 0;
  const double along[] = {2, -2, 0.5, -0.5};
  for (int a = 0; a < 4; a++)
    for (int zero = 0; zero < 2; zero++) {
      double z0 = zero ? -0.0 : 0.0;
      re[n] = along[a], im[n++] = z0; /* on the real axis */
      re[n] = z0, im[n++] = along[a]; /* on the imaginary */
    }
  for (int s = 0; s < 4; s++) re[n] = s & 1 ? -0.0 : 0.0, im[n++] = s & 2 ? -0.0 : 0.0;
  assert_int_equal(n, N);
  const jx_dtype dts[] = {JX_C64, JX_C128};
  static const int groups[3] = {0, 1, 2};
  for (int d = 0; d < 2; d++) {
    jx_config_enable_x64(dts[d] == JX_C128);
    jx_dtype part = dts[d] == JX_C128 ? JX_F64 : JX_F32;
    float ref[N], imf[N];
    for (int i = 0; i < N; i++) ref[i] = (float)re[i], imf[i] = (float)im[i];
    jx_scope_begin();
    jx_array *z =
        jx_complex(jx_array_from(part, JX_SHAPE(1, N), part == JX_F64 ? (void *)re : ref),
                   jx_array_from(part, JX_SHAPE(1, N), part == JX_F64 ? (void *)im : imf));
    z = jx_keep(z);
    jx_scope_end();
    for (int g = 0; g < 3; g++) {
      jx_fn *f = jx_fn_create("group", 1, 3, f_group, (void *)&groups[g]);
      expect_one_kernel(jit_matches_n(f, 1, &z, 3));
      jx_fn_release(f);
    }
    jx_release(z);
    jx_config_enable_x64(0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chains_match_c64),
      cmocka_unit_test(chains_match_c128),
      cmocka_unit_test(cuts_match),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
