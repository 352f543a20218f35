/* Vector and matrix norms (jx_linalg_vector_norm, jx_linalg_matrix_norm)
 * against JAX goldens (tests/golden/gen_linalg.py): every order's value and
 * VJP on a stack, eagerly and under jit, under vmap, the gradient at zero
 * (JAX's NaNs and split ties), second-order derivatives against finite
 * differences, errors. */
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

typedef struct {
  const char *tag;
  int matrix;
  double vector_ord;
  jx_matrix_norm_ord matrix_ord;
} norm_case;

static const norm_case CASES[] = {
    {"vnorm_2", 0, 2, 0},
    {"vnorm_1", 0, 1, 0},
    {"vnorm_inf", 0, INFINITY, 0},
    {"vnorm_neginf", 0, -INFINITY, 0},
    {"vnorm_0", 0, 0, 0},
    {"vnorm_3", 0, 3, 0},
    {"vnorm_half", 0, 0.5, 0},
    {"mnorm_fro", 1, 0, JX_NORM_FRO},
    {"mnorm_1", 1, 0, JX_NORM_1},
    {"mnorm_neg1", 1, 0, JX_NORM_NEG_1},
    {"mnorm_inf", 1, 0, JX_NORM_INF},
    {"mnorm_neginf", 1, 0, JX_NORM_NEG_INF},
};
#define NCASES (sizeof CASES / sizeof *CASES)

static void norm_body(void *ctx, jx_array *const *in, jx_array **out) {
  const norm_case *c = ctx;
  out[0] = c->matrix ? jx_linalg_matrix_norm(in[0], c->matrix_ord)
                     : jx_linalg_vector_norm(in[0], c->vector_ord);
}

static void norms_match_jax(void **state) {
  (void)state;
  for (int jit = 0; jit < 2; jit++)
    for (size_t c = 0; c < NCASES; c++) {
      jx_fn *f = jx_fn_create(CASES[c].tag, 1, 1, norm_body, (void *)&CASES[c]);
      jx_fn *vjp = jx_vjp(f);
      jx_fn *run = jit ? jx_jit(vjp, NULL) : vjp;
      jx_array *in[2] = {golden(CASES[c].tag, "a"), golden(CASES[c].tag, "ct")}, *out[2];
      check_ok(jx_call(run, in, out));
      assert_close(out[0], golden(CASES[c].tag, "out"), 1e-12);
      assert_close(out[1], golden(CASES[c].tag, "ct_a"), 1e-11);
      if (jit) jx_fn_release(run);
      jx_fn_release(vjp);
      jx_fn_release(f);
    }
  /* f32 */
  norm_case two = {"vnorm_2_f32", 0, 2, 0};
  jx_fn *f = jx_fn_create("vnorm", 1, 1, norm_body, &two);
  jx_fn *vjp = jx_vjp(f);
  jx_array *in[2] = {golden(two.tag, "a"), golden(two.tag, "ct")}, *out[2];
  check_ok(jx_call(vjp, in, out));
  assert_int_equal(jx_dtype_of(out[0]), JX_F32);
  assert_close(out[0], golden(two.tag, "out"), 1e-5);
  assert_close(out[1], golden(two.tag, "ct_a"), 1e-5);
  jx_fn_release(vjp);
  jx_fn_release(f);
}

static void gradients_at_zero_match_jax(void **state) {
  (void)state;
  for (size_t c = 0; c < NCASES; c++) {
    jx_fn *f = jx_fn_create(CASES[c].tag, 1, 1, norm_body, (void *)&CASES[c]);
    jx_fn *g = jx_grad(f, JX_AXES(0));
    jx_array *zero = jx_zeros(JX_F64, CASES[c].matrix ? JX_SHAPE(2, 2) : JX_SHAPE(3)), *got;
    check_ok(jx_call(g, &zero, &got));
    char name[32];
    snprintf(name, sizeof name, "%s_zero", CASES[c].tag);
    jx_array *want = golden(name, "grad");
    double gv[4], wv[4];
    int64_t n = jx_size(want);
    check_ok(jx_read(got, gv, sizeof(double) * (size_t)n));
    check_ok(jx_read(want, wv, sizeof(double) * (size_t)n));
    for (int64_t i = 0; i < n; i++)
      if (isnan(wv[i]) ? !isnan(gv[i]) : fabs(gv[i] - wv[i]) > 1e-12)
        fail_msg("%s: gradient at 0 [%lld] is %g, JAX's %g", CASES[c].tag, (long long)i, gv[i],
                 wv[i]);
    jx_fn_release(g);
    jx_fn_release(f);
  }
}

static void norms_under_vmap(void **state) {
  (void)state;
  /* the stack's rows mapped one by one: the same values and VJPs */
  const norm_case *vec = &CASES[5], *mat = &CASES[8]; /* vnorm_3, mnorm_1 */
  const norm_case *cs[2] = {vec, mat};
  for (int k = 0; k < 2; k++) {
    jx_fn *f = jx_fn_create(cs[k]->tag, 1, 1, norm_body, (void *)cs[k]);
    jx_fn *vjp = jx_vjp(f);
    jx_fn *vf = jx_vmap(vjp, JX_AXES(0, 0), JX_AXES(0, 0));
    jx_array *in[2] = {golden(cs[k]->tag, "a"), golden(cs[k]->tag, "ct")}, *out[2];
    check_ok(jx_call(vf, in, out));
    assert_close(out[0], golden(cs[k]->tag, "out"), 1e-12);
    assert_close(out[1], golden(cs[k]->tag, "ct_a"), 1e-11);
    jx_fn_release(vf);
    jx_fn_release(vjp);
    jx_fn_release(f);
  }
}

static void norm_gradients_match_finite_differences(void **state) {
  (void)state;
  /* the smooth orders, away from zero and ties (p = 1/2's second derivative
   * is too steep here for finite differences; its VJP is checked above) */
  const char *tags[] = {"vnorm_2", "vnorm_3", "mnorm_fro", "mnorm_1"};
  for (size_t c = 0; c < NCASES; c++)
    for (size_t t = 0; t < sizeof tags / sizeof *tags; t++) {
      if (strcmp(CASES[c].tag, tags[t])) continue;
      jx_fn *f = jx_fn_create(CASES[c].tag, 1, 1, norm_body, (void *)&CASES[c]);
      jx_array *a = golden(CASES[c].tag, "a");
      jx_status st = jx_check_grads(f, &a, 2, 0, 0);
      if (st) fprintf(stderr, "%s: ", CASES[c].tag);
      check_ok(st);
      jx_fn_release(f);
    }
}

static void norm_errors_name_the_operand(void **state) {
  (void)state;
  jx_array *r = jx_linalg_vector_norm(jx_zeros(JX_I32, JX_SHAPE(3)), 2);
  assert_true(jx_is_poisoned(r));
  assert_error_has("jx_linalg_vector_norm: operand i32[3] must be f32, f64, c64 or c128");
  r = jx_linalg_vector_norm(jx_zeros(JX_F32, JX_SHAPE(3)), NAN);
  assert_error_has("jx_linalg_vector_norm: ord is NaN");
  r = jx_linalg_matrix_norm(jx_zeros(JX_F32, JX_SHAPE(3)), JX_NORM_FRO);
  assert_true(jx_is_poisoned(r));
  assert_error_has("jx_linalg_matrix_norm: operand f32[3] needs at least 2 axes");
  r = jx_linalg_matrix_norm(jx_zeros(JX_F32, JX_SHAPE(2, 2)), (jx_matrix_norm_ord)99);
  assert_error_has("jx_linalg_matrix_norm: ord 99 is not a jx_matrix_norm_ord");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(norms_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(gradients_at_zero_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(norms_under_vmap, setup, teardown),
      cmocka_unit_test_setup_teardown(norm_gradients_match_finite_differences, setup, teardown),
      cmocka_unit_test_setup_teardown(norm_errors_name_the_operand, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
