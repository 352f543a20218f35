/* Matrix powers and the matrix exponential (jx_linalg_matrix_power,
 * jx_linalg_expm) against JAX goldens (tests/golden/gen_linalg.py): values
 * and VJPs for every power JAX special-cases (0, 1, 2, 3, binary powering,
 * negative), every Pade degree of expm in f64 and f32 and with squarings,
 * stacks; eagerly, under jit, vmap and a sharded jit; second-order
 * derivatives against finite differences; a matrix too large to square
 * back (NaNs, as JAX); NaN input; errors. */
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

#include "test_close.h"
#include "test_linalg_golden.h"

static double tol_of(jx_array *x) { return jx_dtype_of(x) == JX_F64 ? 1e-9 : 1e-4; }

/* ctx points to the power */
static void power_body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = jx_linalg_matrix_power(in[0], *(const int64_t *)ctx);
}

static void expm_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_expm(in[0]);
}

/* vjp at case c's goldens, against JAX (relative tolerances: expm's values
 * reach e^40). */
static void check_vjp(jx_fn *vjp, const char *c) {
  jx_array *a = golden(c, "a"), *in[2] = {a, golden(c, "ct")}, *out[2];
  check_ok(jx_call(vjp, in, out));
  double tol = tol_of(a);
  jx_array *want = golden(c, "out"), *want_ct = golden(c, "ct_a");
  jx_array *one = jx_scalar(jx_dtype_of(a), 1);
  jx_array *scale = jx_maximum(jx_max(jx_abs(want), JX_AXES(), 0), one),
           *ct_scale = jx_maximum(jx_max(jx_abs(want_ct), JX_AXES(), 0), one);
  assert_close(jx_div(out[0], scale), jx_div(want, scale), tol);
  assert_close(jx_div(out[1], ct_scale), jx_div(want_ct, ct_scale), tol * 10);
}

static const int64_t POWERS[] = {0, 1, 2, 3, 5, 6, -1, -3};
#define NPOWERS (sizeof POWERS / sizeof *POWERS)

static void matrix_power_matches_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < NPOWERS + 2; c++) {
      char name[64];
      int64_t k = c < NPOWERS ? POWERS[c] : c == NPOWERS ? 5 : 4;
      if (c < NPOWERS)
        snprintf(name, sizeof name, "mpow_%s%lld_f64", k < 0 ? "m" : "", (long long)llabs(k));
      else
        snprintf(name, sizeof name, c == NPOWERS ? "mpow_5_f32" : "mpow_batch_f64");
      jx_fn *f = jx_fn_create("matrix_power", 1, 1, power_body, &k);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      check_vjp(run, name);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

/* expm_<i>_<dtype>: the 1-norms of gen_linalg.py's EXPM_NORMS, one per Pade
 * degree and the last with squarings */
static void expm_matches_jax(void **state) {
  (void)state;
  const char *cases[] = {"expm_0_f64", "expm_1_f64", "expm_2_f64",    "expm_3_f64",
                         "expm_4_f64", "expm_5_f64", "expm_0_f32",    "expm_1_f32",
                         "expm_2_f32", "expm_3_f32", "expm_batch_f64"};
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      jx_fn *f = jx_fn_create("expm", 1, 1, expm_body, NULL);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      check_vjp(run, cases[c]);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void under_vmap_and_sharded_jit(void **state) {
  (void)state;
  int64_t k = 4;
  jx_fn *fs[2] = {jx_fn_create("expm", 1, 1, expm_body, NULL),
                  jx_fn_create("matrix_power", 1, 1, power_body, &k)};
  const char *cases[2] = {"expm_batch_f64", "mpow_batch_f64"};
  for (int i = 0; i < 2; i++) {
    jx_fn *vjp = jx_vjp(fs[i]);
    jx_fn *vf = jx_vmap(vjp, JX_AXES(0, 0), JX_AXES(0, 0)), *jvf = jx_jit(vf, NULL);
    check_vjp(jvf, cases[i]);
    jx_fn_release(jvf);
    jx_fn_release(vf);
    if (!test_on_cuda()) { /* the stack split over two devices */
      jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *[]){"x"});
      jx_sharding *sh = jx_sharding_create(m, "x");
      jx_fn *j = jx_jit(vjp, &(jx_jit_options){.in_shardings = (jx_sharding *[]){sh, sh}});
      check_vjp(j, cases[i]);
      jx_fn_release(j);
      jx_sharding_release(sh);
      jx_mesh_release(m);
    }
    jx_fn_release(vjp);
    jx_fn_release(fs[i]);
  }
}

static void gradients_match_finite_differences(void **state) {
  (void)state;
  int64_t k = -3;
  jx_fn *f = jx_fn_create("matrix_power", 1, 1, power_body, &k);
  jx_array *a = golden("mpow_m3_f64", "a");
  check_ok(jx_check_grads(f, &a, 2, 0, 0));
  jx_fn_release(f);
  f = jx_fn_create("expm", 1, 1, expm_body, NULL);
  const char *cases[] = {"expm_1_f64", "expm_4_f64"};
  for (int c = 0; c < 2; c++) {
    a = golden(cases[c], "a");
    check_ok(jx_check_grads(f, &a, 2, 0, 0));
  }
  jx_fn_release(f);
}

static void expm_too_large_or_nan_gives_nans(void **state) {
  (void)state;
  /* a 1-norm of 1e7 needs 20 squarings, more than 16: NaNs, as JAX */
  jx_array *huge = jx_linalg_expm(golden("expm_huge", "a"));
  jx_array *nan = jx_linalg_expm(jx_full(JX_F32, JX_SHAPE(2, 2), NAN));
  double v[9];
  float w[4];
  check_ok(jx_read(huge, v, sizeof v));
  check_ok(jx_read(nan, w, sizeof w));
  for (int i = 0; i < 9; i++) assert_true(isnan(v[i]));
  for (int i = 0; i < 4; i++) assert_true(isnan(w[i]));
}

static void errors_name_the_shapes(void **state) {
  (void)state;
  assert_true(jx_is_poisoned(jx_linalg_expm(jx_zeros(JX_F32, JX_SHAPE(3, 4)))));
  assert_error_has("jx_linalg_expm: operand f32[3,4] must be a square matrix");
  assert_true(jx_is_poisoned(jx_linalg_matrix_power(jx_zeros(JX_F64, JX_SHAPE(2, 2, 3)), 2)));
  assert_error_has("jx_linalg_matrix_power: operand f64[2,2,3] must be a square matrix");
  assert_true(jx_is_poisoned(jx_linalg_matrix_power(jx_zeros(JX_I32, JX_SHAPE(2, 2)), 2)));
  assert_error_has("jx_linalg_matrix_power: operand i32[2,2] must be f32, f64, c64 or c128");
}

int main(void) {
  if (jx_set_cpu_device_count(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(matrix_power_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(expm_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(under_vmap_and_sharded_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(gradients_match_finite_differences, setup, teardown),
      cmocka_unit_test_setup_teardown(expm_too_large_or_nan_gives_nans, setup, teardown),
      cmocka_unit_test_setup_teardown(errors_name_the_shapes, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
