/* The pseudo-inverse and least squares (jx_linalg_pinv, jx_linalg_lstsq)
 * against JAX goldens (tests/golden/gen_linalg.py): values and VJPs (pinv's
 * is JAX's custom JVP) tall, wide, rank-deficient, with an explicit rtol,
 * f32 and f64, stacks; eagerly, under jit, vmap and a sharded jit;
 * second-order derivatives against finite differences; lstsq's residuals,
 * rank and singular values; NaN input; errors. */
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

/* ctx points to rtol */
static void pinv_body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = jx_linalg_pinv(in[0], *(const double *)ctx);
}

static void lstsq_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *resid, *rank, *s;
  jx_linalg_lstsq(in[0], in[1], NAN, &out[0], &resid, &rank, &s);
}

/* vjp of a one-output function of nin inputs at case c's goldens. */
static void check_vjp(jx_fn *vjp, const char *c, int nin) {
  const char *names[] = {"a", "b"}, *ct_names[] = {"ct_a", "ct_b"};
  jx_array *in[3], *out[3];
  for (int i = 0; i < nin; i++) in[i] = golden(c, names[i]);
  in[nin] = golden(c, "ct");
  check_ok(jx_call(vjp, in, out));
  double tol = tol_of(in[0]);
  assert_close(out[0], golden(c, "out"), tol);
  for (int i = 0; i < nin; i++) assert_close(out[1 + i], golden(c, ct_names[i]), tol * 100);
}

typedef struct {
  const char *golden;
  double rtol;
} pinv_case;

static const pinv_case PINV_CASES[] = {
    {"pinv_tall_f64", NAN},  {"pinv_wide_f64", NAN},  {"pinv_f32", NAN},
    {"pinv_batch_f64", NAN}, {"pinv_rank2_f64", NAN}, {"pinv_rtol_f64", 0.1},
};
#define NPINV (sizeof PINV_CASES / sizeof *PINV_CASES)

static void pinv_matches_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < NPINV; c++) {
      jx_fn *f = jx_fn_create("pinv", 1, 1, pinv_body, (void *)&PINV_CASES[c].rtol);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      check_vjp(run, PINV_CASES[c].golden, 1);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
}

static void pinv_under_vmap_and_sharded_jit(void **state) {
  (void)state;
  double rtol = NAN;
  jx_fn *f = jx_fn_create("pinv", 1, 1, pinv_body, &rtol);
  jx_fn *vjp = jx_vjp(f);
  jx_fn *vf = jx_vmap(vjp, JX_AXES(0, 0), JX_AXES(0, 0));
  jx_fn *jvf = jx_jit(vf, NULL);
  check_vjp(jvf, "pinv_batch_f64", 1);
  jx_fn_release(jvf);
  jx_fn_release(vf);
  TEST_SKIP_ON_CUDA("there are no CUDA meshes");
  /* the stack split over two devices; pinv runs replicated */
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *[]){"x"});
  jx_sharding *sh = jx_sharding_create(m, "x");
  jx_fn *j = jx_jit(vjp, &(jx_jit_options){.in_shardings = (jx_sharding *[]){sh, sh}});
  check_vjp(j, "pinv_batch_f64", 1);
  jx_fn_release(j);
  jx_fn_release(vjp);
  jx_fn_release(f);
  jx_sharding_release(sh);
  jx_mesh_release(m);
}

static void gradients_match_finite_differences(void **state) {
  (void)state;
  const char *cases[] = {"pinv_tall_f64", "pinv_wide_f64"};
  double rtol = NAN;
  for (size_t c = 0; c < 2; c++) {
    jx_fn *f = jx_fn_create("pinv", 1, 1, pinv_body, &rtol);
    jx_array *a = golden(cases[c], "a");
    check_ok(jx_check_grads(f, &a, 2, 0, 0));
    jx_fn_release(f);
  }
  /* lstsq in both operands, through the SVD */
  jx_fn *f = jx_fn_create("lstsq", 2, 1, lstsq_body, NULL);
  jx_array *in[2] = {golden("lstsq_f64", "a"), golden("lstsq_f64", "b")};
  check_ok(jx_check_grads(f, in, 2, 0, 0));
  jx_fn_release(f);
}

static void lstsq_matches_jax(void **state) {
  (void)state;
  const char *cases[] = {"lstsq_f64", "lstsq_vec_f64", "lstsq_wide_f64", "lstsq_f32"};
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      jx_fn *f = jx_fn_create("lstsq", 2, 1, lstsq_body, NULL);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      check_vjp(run, cases[c], 2);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
      jx_array *a = golden(cases[c], "a"), *x, *resid, *rank, *s;
      check_ok(jx_linalg_lstsq(a, golden(cases[c], "b"), NAN, &x, &resid, &rank, &s));
      double tol = tol_of(a);
      /* residuals of a wide system are rounding noise: compared absolutely */
      assert_close(resid, golden(cases[c], "resid"), strstr(cases[c], "wide") ? 1e-12 : tol);
      assert_close(rank, golden(cases[c], "rank"), 0);
      assert_close(s, golden(cases[c], "s"), tol);
    }
}

static void lstsq_of_a_rank_deficient_matrix(void **state) {
  (void)state;
  const char *c = "lstsq_rank2_f64";
  jx_array *a = golden(c, "a"), *b = golden(c, "b"), *x, *resid, *rank, *s;
  check_ok(jx_linalg_lstsq(a, b, NAN, &x, &resid, &rank, &s));
  assert_close(x, golden(c, "x"), 1e-9);
  assert_close(resid, golden(c, "resid"), 1e-9);
  assert_close(rank, golden(c, "rank"), 0);
  assert_close(s, golden(c, "s"), 1e-9);
  /* rcond 0.5 keeps only the largest singular value */
  check_ok(jx_linalg_lstsq(a, b, 0.5, &x, &resid, &rank, &s));
  assert_close(x, golden("lstsq_rcond_f64", "x"), 1e-9);
  assert_close(resid, golden("lstsq_rcond_f64", "resid"), 1e-9);
  assert_close(rank, golden("lstsq_rcond_f64", "rank"), 0);
}

static void lstsq_under_vmap(void **state) {
  (void)state;
  /* three systems of lstsq_f64's shapes, each checked against its own solve */
  jx_fn *f = jx_fn_create("lstsq", 2, 1, lstsq_body, NULL);
  jx_fn *mapped = jx_vmap(f, JX_AXES(0, 0), JX_AXES(0)), *vf = jx_jit(mapped, NULL);
  jx_array *a = val(JX_SHAPE(3, 6, 3), 1), *b = val(JX_SHAPE(3, 6, 2), 2), *in[2] = {a, b}, *x;
  check_ok(jx_call(vf, in, &x));
  for (int64_t i = 0; i < 3; i++) {
    jx_array *ai = jx_squeeze(
        jx_slice(a, JX_SHAPE(i, 0, 0), JX_SHAPE(i + 1, 6, 3), JX_SHAPE(1, 1, 1)), JX_AXES(0));
    jx_array *bi = jx_squeeze(
        jx_slice(b, JX_SHAPE(i, 0, 0), JX_SHAPE(i + 1, 6, 2), JX_SHAPE(1, 1, 1)), JX_AXES(0));
    jx_array *xi = jx_squeeze(
        jx_slice(x, JX_SHAPE(i, 0, 0), JX_SHAPE(i + 1, 3, 2), JX_SHAPE(1, 1, 1)), JX_AXES(0));
    /* the normal equations: aᵀ a x = aᵀ b */
    jx_array *at = jx_transpose(ai, JX_AXES(1, 0));
    assert_close(jx_matmul(jx_matmul(at, ai), xi), jx_matmul(at, bi), 1e-9);
  }
  jx_fn_release(vf);
  jx_fn_release(mapped);
  jx_fn_release(f);
}

static void nan_input_gives_nans(void **state) {
  (void)state;
  jx_array *a = golden("svd_nan", "a");
  jx_array *p = jx_linalg_pinv(a, NAN);
  double v[6];
  check_ok(jx_read(p, v, sizeof v));
  for (int i = 0; i < 6; i++) assert_true(isnan(v[i]));
}

static void errors_name_the_shapes(void **state) {
  (void)state;
  assert_true(jx_is_poisoned(jx_linalg_pinv(jx_zeros(JX_F32, JX_SHAPE(3)), NAN)));
  assert_error_has("jx_linalg_pinv: operand f32[3] must be a matrix");
  jx_array *x, *resid, *rank, *s;
  assert_int_equal(jx_linalg_lstsq(jx_zeros(JX_F64, JX_SHAPE(2, 4, 3)),
                                   jx_zeros(JX_F64, JX_SHAPE(2, 4)), NAN, &x, &resid, &rank, &s),
                   JX_ERR_SHAPE);
  assert_true(jx_is_poisoned(x) && jx_is_poisoned(s));
  assert_error_has("jx_linalg_lstsq: a f64[2,4,3] must be one matrix [m, n]");
  assert_int_equal(jx_linalg_lstsq(jx_zeros(JX_F64, JX_SHAPE(4, 3)), jx_zeros(JX_F64, JX_SHAPE(5)),
                                   NAN, &x, &resid, &rank, &s),
                   JX_ERR_SHAPE);
  assert_error_has("jx_linalg_lstsq: b f64[5] does not fit a f64[4,3]");
  assert_int_equal(jx_linalg_lstsq(jx_zeros(JX_F64, JX_SHAPE(4, 3)), jx_zeros(JX_F32, JX_SHAPE(4)),
                                   NAN, &x, &resid, &rank, &s),
                   JX_ERR_SHAPE);
  assert_error_has("jx_linalg_lstsq: b f32[4] does not fit a f64[4,3]");
  assert_int_equal(jx_linalg_lstsq(jx_zeros(JX_F64, JX_SHAPE(4, 3)), jx_zeros(JX_F64, JX_SHAPE(4)),
                                   NAN, &x, NULL, &rank, &s),
                   JX_ERR_INVALID_ARGUMENT);
  assert_error_has("jx_linalg_lstsq: an output pointer is NULL");
}

int main(void) {
  if (jx_set_cpu_device_count(2)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(pinv_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(pinv_under_vmap_and_sharded_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(gradients_match_finite_differences, setup, teardown),
      cmocka_unit_test_setup_teardown(lstsq_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(lstsq_of_a_rank_deficient_matrix, setup, teardown),
      cmocka_unit_test_setup_teardown(lstsq_under_vmap, setup, teardown),
      cmocka_unit_test_setup_teardown(nan_input_gives_nans, setup, teardown),
      cmocka_unit_test_setup_teardown(errors_name_the_shapes, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
