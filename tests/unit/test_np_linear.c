/* jnp.dot, vdot, tensordot, outer, kron, diagonal, trace, diag, tril, triu
 * and the constructors (zeros_like, ones_like, full_like, linspace,
 * logspace, meshgrid) against JAX (tests/golden/gen_np_surface.py): values,
 * gradients, under jit and vmap; and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"
#include "unit/np_golden.h"

NP_FN2(f_dot, jx_dot(a, b))
NP_FN2(f_vdot, jx_vdot(a, b))
NP_FN2(f_tensordot_2, jx_tensordot(a, b, 2))
NP_FN2(f_tensordot_axes, jx_tensordot_axes(a, b, JX_AXES(0, 2), JX_AXES(1, 0)))
NP_FN2(f_outer, jx_outer(a, b))
NP_FN2(f_kron, jx_kron(a, b))
NP_FN1(f_diagonal, jx_diagonal(a, 1, 0, 2))
NP_FN1(f_diagonal_neg, jx_diagonal(a, -1, 0, 1))
NP_FN1(f_diagonal_empty, jx_diagonal(a, 5, 0, 1))
NP_FN1(f_diagonal_last, jx_diagonal(a, 1, 0, 1))
NP_FN1(f_trace, jx_matrix_trace(a, 0, 1, 2))
NP_FN1(f_trace_int, jx_matrix_trace(a, -1, 0, 1))
NP_FN1(f_diag_v, jx_diag(a, 1))
NP_FN1(f_diag_v_neg, jx_diag(a, -2))
NP_FN1(f_tril, jx_tril(a, 0))
NP_FN1(f_triu, jx_triu(a, 1))
NP_FN1(f_tril_neg, jx_tril(a, -1))
NP_FN1(f_zeros_like, jx_zeros_like(a))
NP_FN1(f_ones_like, jx_ones_like(a))
NP_FN1(f_full_like, jx_full_like(a, 2.5))
NP_FN2(f_linspace, jx_linspace(a, b, 5, 1, 0))
NP_FN2(f_linspace_open, jx_linspace(a, b, 4, 0, 0))
NP_FN2(f_linspace_axis, jx_linspace(a, b, 3, 1, 1))
NP_FN2(f_linspace_one, jx_linspace(a, b, 1, 1, 0))
NP_FN2(f_linspace_int, jx_linspace(a, b, 4, 1, 0))
NP_FN2(f_logspace, jx_logspace(a, b, 4, 1, 2.0, 0))

static void f_meshgrid_xy(jx_array *const *in, jx_array **out) {
  check_ok(jx_meshgrid(3, in, "xy", out));
}
static void f_meshgrid_ij(jx_array *const *in, jx_array **out) {
  check_ok(jx_meshgrid(2, in, "ij", out));
}

static const np_case cases[] = {
    NP("dot_1d", 2, 1, f_dot),
    NP("dot_2d", 2, 1, f_dot),
    NP("dot_nd_1d", 2, 1, f_dot),
    NP("dot_nd_md", 2, 1, f_dot),
    NP("dot_scalar", 2, 1, f_dot),
    NP("dot_f64", 2, 1, f_dot, .check_grads = 1),
    NP("dot_int", 2, 1, f_dot),
    NP("vdot", 2, 1, f_vdot),
    NP("tensordot_2", 2, 1, f_tensordot_2),
    NP("tensordot_axes", 2, 1, f_tensordot_axes),
    NP("outer", 2, 1, f_outer),
    NP("kron", 2, 1, f_kron),
    NP("kron_f64", 2, 1, f_kron, .check_grads = 1),
    NP("diagonal", 1, 1, f_diagonal),
    NP("diagonal_neg", 1, 1, f_diagonal_neg),
    NP("diagonal_empty", 1, 1, f_diagonal_empty),
    NP("trace", 1, 1, f_trace),
    NP("trace_int", 1, 1, f_trace_int),
    NP("diag_v", 1, 1, f_diag_v),
    NP("diag_v_neg", 1, 1, f_diag_v_neg),
    NP("diag_m", 1, 1, f_diag_v),
    NP("tril", 1, 1, f_tril),
    NP("triu", 1, 1, f_triu),
    NP("tril_neg", 1, 1, f_tril_neg, .check_grads = 1),
    NP("dot_vmap", 2, 1, f_dot, .vmap = 1, .in_axes = {0, JX_NONE}),
    NP("diagonal_vmap", 1, 1, f_diagonal_last, .vmap = 1),
    NP("zeros_like", 1, 1, f_zeros_like),
    NP("ones_like", 1, 1, f_ones_like),
    NP("full_like", 1, 1, f_full_like),
    NP("linspace", 2, 1, f_linspace),
    NP("linspace_open", 2, 1, f_linspace_open),
    NP("linspace_axis", 2, 1, f_linspace_axis),
    NP("linspace_one", 2, 1, f_linspace_one, .check_grads = 1),
    NP("linspace_int", 2, 1, f_linspace_int),
    NP("logspace", 2, 1, f_logspace),
    NP("meshgrid_xy", 3, 3, f_meshgrid_xy),
    NP("meshgrid_ij", 2, 2, f_meshgrid_ij),
};
NP_GOLDEN_TESTS(cases)

static void test_errors(void **state) {
  (void)state;
  jx_array *m = jx_zeros(JX_F32, JX_SHAPE(3, 4)), *v = jx_zeros(JX_F32, JX_SHAPE(5));
  NP_EXPECT_ERROR(jx_dot(m, v), "jx_dot: f32[3,4] and f32[5] do not align");
  NP_EXPECT_ERROR(jx_vdot(m, v), "different sizes");
  NP_EXPECT_ERROR(jx_tensordot(m, v, 2), "cannot contract 2 axes");
  NP_EXPECT_ERROR(jx_tensordot_axes(m, m, JX_AXES(0), JX_AXES(1)), "axis 0 of f32[3,4] (3)");
  NP_EXPECT_ERROR(jx_diagonal(v, 0, 0, 1), "at least 2 dims, got f32[5]");
  NP_EXPECT_ERROR(jx_diagonal(m, 0, 1, -1), "axis1 and axis2 are both axis 1");
  NP_EXPECT_ERROR(jx_diagonal(m, 0, 0, 2), "jx_diagonal");
  NP_EXPECT_ERROR(jx_diag(jx_zeros(JX_F32, JX_SHAPE(2, 2, 2)), 0), "must be 1-D or 2-D");
  NP_EXPECT_ERROR(jx_tril(v, 0), "jx_tril: needs an array of at least 2 dims");
  NP_EXPECT_ERROR(jx_kron(jx_zeros(JX_F32, JX_SHAPE(1, 1, 1, 1, 1)), v), "rank above 4");
  NP_EXPECT_ERROR(jx_linspace(jx_scalar(JX_F32, 0), jx_scalar(JX_F32, 1), -1, 1, 0),
                  "number of samples -1");
  NP_EXPECT_ERROR(jx_linspace(v, m, 3, 1, 0), "do not broadcast");
  jx_array *out[2];
  jx_clear_error();
  assert_int_not_equal(jx_meshgrid(2, (jx_array *[]){v, m}, "ij", out), JX_OK);
  assert_error_has("every argument must be 1-D, got f32[3,4]");
  assert_int_not_equal(jx_meshgrid(2, (jx_array *[]){v, v}, "yx", out), JX_OK);
  assert_error_has("indexing \"yx\"");
}

/* jnp.zeros_like keeps a weak type; linspace's dtype is the inexact one of its bounds */
static void test_dtypes(void **state) {
  (void)state;
  jx_array *w = jx_scalar(JX_F32, 3);
  assert_true(jx_is_weak(jx_zeros_like(w)));
  assert_int_equal(jx_dtype_of(jx_ones_like(jx_zeros(JX_U8, JX_SHAPE(2)))), JX_U8);
  jx_array *l = jx_linspace(jx_scalar(JX_I32, 0), jx_scalar(JX_I32, 4), 5, 1, 0);
  assert_int_equal(jx_dtype_of(l), JX_F32);
  assert_false(jx_is_weak(l));
  float got[5];
  check_ok(jx_read(l, got, sizeof got));
  for (int i = 0; i < 5; i++) assert_float_equal(got[i], (float)i, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_golden_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(test_golden_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dtypes, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
