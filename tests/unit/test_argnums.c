/* Argument selections of the transformations: jx_grad_argnums and
 * jx_value_and_grad_argnums past JX_MAX_RANK arguments, jx_jvp_argnums
 * (tangents of some inputs only), jx_jacfwd_argnums and jx_jacrev_argnums.
 * Each is checked against a closed form or the single-argument transform it
 * generalizes, and a bad selection gives an error naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"

#define NARGS 11 /* more than JX_MAX_RANK */

static void read_doubles(jx_array *a, double *d, int n) {
  check_ok(jx_read(jx_astype(a, JX_F64), d, sizeof *d * (size_t)n));
}

/* sum_i (i + 1) * sum(x_i^2): the gradient of x_i is 2 (i + 1) x_i */
static void weighted_squares(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *acc = jx_scalar(JX_F64, 0);
  for (int i = 0; i < NARGS; i++)
    acc = jx_add(acc, jx_mul(jx_scalar(JX_F64, i + 1), jx_sum(jx_square(in[i]), JX_AXES(), 0)));
  out[0] = acc;
}

static void grad_of_many_arguments(void **state) {
  (void)state;
  jx_array *x[NARGS];
  for (int i = 0; i < NARGS; i++)
    x[i] = jx_array_from(JX_F64, JX_SHAPE(2), (double[]){0.5 + i, -1.0 * i});
  jx_fn *f = jx_fn_create("weighted_squares", NARGS, 1, weighted_squares, NULL);
  /* every argument, the last ones first and one counted from the end */
  int argnums[NARGS];
  for (int k = 0; k < NARGS; k++) argnums[k] = NARGS - 1 - k;
  argnums[0] = -1;
  jx_fn *vg = jx_value_and_grad_argnums(f, NARGS, argnums, 0);
  jx_fn *g = jx_grad_argnums(f, NARGS, argnums);
  assert_non_null(vg);
  assert_non_null(g);
  jx_array *out[NARGS + 1], *gout[NARGS];
  check_ok(jx_call(vg, x, out));
  check_ok(jx_call(g, x, gout));
  double value = 0, v;
  for (int i = 0; i < NARGS; i++) value += (i + 1) * ((0.5 + i) * (0.5 + i) + (double)i * i);
  read_doubles(out[0], &v, 1);
  assert_float_equal(v, value, 1e-9 * value);
  for (int k = 0; k < NARGS; k++) {
    int i = NARGS - 1 - k;
    double d[2], e[2];
    read_doubles(out[1 + k], d, 2);
    read_doubles(gout[k], e, 2);
    assert_float_equal(d[0], 2.0 * (i + 1) * (0.5 + i), 1e-12);
    assert_float_equal(d[1], -2.0 * (i + 1) * i, 1e-12);
    assert_memory_equal(d, e, sizeof d);
  }
  /* jx_axes cannot hold 11 argnums: the error says what to use instead */
  assert_null(jx_grad(f, JX_AXES(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)));
  assert_error_has("jx_grad_argnums");
  assert_null(jx_grad_argnums(f, 2, (int[]){3, 3}));
  assert_error_has("argnum 3 appears twice");
  assert_null(jx_value_and_grad_argnums(f, 1, (int[]){NARGS}, 0));
  assert_error_has("argnum 11 is out of range");
  jx_fn_release(g);
  jx_fn_release(vg);
  jx_fn_release(f);
}

/* (x * y + sin(z), x * z) */
static void three_args(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(in[0], in[1]), jx_sin(in[2]));
  out[1] = jx_mul(in[0], in[2]);
}

static jx_array *vec(double a, double b, double c) {
  return jx_array_from(JX_F64, JX_SHAPE(3), (double[]){a, b, c});
}

static void jvp_of_some_arguments(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("three_args", 3, 2, three_args, NULL);
  jx_array *x = vec(0.3, -1.2, 2), *y = vec(1.5, 0.5, -2), *z = vec(0.7, 0.1, -0.4);
  jx_array *tx = vec(1, 2, 3), *tz = vec(-0.5, 0.25, 4);
  /* tangents of z and x, in that order, against jx_jvp with y's tangent zero */
  jx_fn *some = jx_jvp_argnums(f, 2, (int[]){2, -3}), *all = jx_jvp(f);
  assert_non_null(some);
  jx_array *got[4], *want[4];
  check_ok(jx_call(some, (jx_array *[]){x, y, z, tz, tx}, got));
  check_ok(jx_call(all, (jx_array *[]){x, y, z, tx, jx_zeros(JX_F64, JX_SHAPE(3)), tz}, want));
  for (int o = 0; o < 4; o++) {
    double g[3], w[3];
    read_doubles(got[o], g, 3);
    read_doubles(want[o], w, 3);
    assert_memory_equal(g, w, sizeof g);
  }
  /* the closed form of output 0's tangent: y tx + cos(z) tz */
  double t0[3], yy[3] = {1.5, 0.5, -2}, zz[3] = {0.7, 0.1, -0.4}, txx[3] = {1, 2, 3},
                tzz[3] = {-0.5, 0.25, 4};
  read_doubles(got[2], t0, 3);
  for (int i = 0; i < 3; i++)
    assert_float_equal(t0[i], yy[i] * txx[i] + cos(zz[i]) * tzz[i], 1e-12);
  /* no argnums: the outputs and zero tangents */
  jx_fn *none = jx_jvp_argnums(f, 0, NULL);
  check_ok(jx_call(none, (jx_array *[]){x, y, z}, got));
  read_doubles(got[3], t0, 3);
  for (int i = 0; i < 3; i++) assert_true(t0[i] == 0);
  /* a tangent of the wrong shape names its place and its primal */
  jx_array *bad[4];
  assert_int_not_equal(
      jx_call(some, (jx_array *[]){x, y, z, jx_zeros(JX_F64, JX_SHAPE(2)), tx}, bad), JX_OK);
  assert_error_has("tangent 0 is f64[2] but its primal (input 2) is f64[3]");
  assert_null(jx_jvp_argnums(f, 2, (int[]){1, -2}));
  assert_error_has("argnum 1 appears twice");
  jx_fn_release(none);
  jx_fn_release(all);
  jx_fn_release(some);
  jx_fn_release(f);
}

/* (sum(x)^2 * y, x * y[0]) with x [3] and y [2] */
static void two_inputs(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *s = jx_sum(in[0], JX_AXES(), 0);
  out[0] = jx_mul(jx_square(s), in[1]);
  out[1] =
      jx_mul(in[0], jx_reshape(jx_slice(in[1], JX_SHAPE(0), JX_SHAPE(1), JX_SHAPE()), JX_SHAPE()));
}

static void assert_same(jx_array *a, jx_array *b, double tol) {
  jx_shape sa = jx_shape_of(a), sb = jx_shape_of(b);
  assert_int_equal(sa.rank, sb.rank);
  for (int d = 0; d < sa.rank; d++) assert_int_equal(sa.dims[d], sb.dims[d]);
  int n = (int)jx_size(a);
  double *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y);
  read_doubles(a, x, n);
  read_doubles(b, y, n);
  for (int i = 0; i < n; i++) assert_float_equal(x[i], y[i], tol);
  free(x);
  free(y);
}

static void jacobians_of_several_arguments(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("two_inputs", 2, 2, two_inputs, NULL);
  jx_array *in[2] = {vec(0.3, -1.2, 2), jx_array_from(JX_F64, JX_SHAPE(2), (double[]){1.5, -0.5})};
  int argnums[2] = {1, 0};
  jx_fn *fwd = jx_jacfwd_argnums(f, 2, argnums), *rev = jx_jacrev_argnums(f, 2, argnums);
  assert_non_null(fwd);
  assert_non_null(rev);
  jx_array *jf[4], *jr[4];
  check_ok(jx_call(fwd, in, jf));
  check_ok(jx_call(rev, in, jr));
  /* out[o * 2 + k]: output o with respect to input argnums[k], as the
   * single-argument Jacobians give it */
  for (int k = 0; k < 2; k++) {
    jx_fn *one_fwd = jx_jacfwd(f, argnums[k]), *one_rev = jx_jacrev(f, argnums[k]);
    jx_array *of[2], *orv[2];
    check_ok(jx_call(one_fwd, in, of));
    check_ok(jx_call(one_rev, in, orv));
    for (int o = 0; o < 2; o++) {
      assert_same(jf[o * 2 + k], of[o], 0);
      assert_same(jr[o * 2 + k], orv[o], 0);
      assert_same(jf[o * 2 + k], jr[o * 2 + k], 1e-12);
    }
    jx_fn_release(one_fwd);
    jx_fn_release(one_rev);
  }
  /* d out0 / d y = diag(sum(x)^2) */
  double d[4];
  read_doubles(jf[0], d, 4);
  double s2 = (0.3 - 1.2 + 2) * (0.3 - 1.2 + 2);
  assert_float_equal(d[0], s2, 1e-12);
  assert_float_equal(d[1], 0, 0);
  assert_float_equal(d[3], s2, 1e-12);
  assert_null(jx_jacrev_argnums(f, 0, argnums));
  assert_error_has("needs at least one argnum");
  assert_null(jx_jacfwd_argnums(f, 2, (int[]){0, -2}));
  assert_error_has("argnum 0 appears twice");
  jx_fn_release(rev);
  jx_fn_release(fwd);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(grad_of_many_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(jvp_of_some_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(jacobians_of_several_arguments, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
