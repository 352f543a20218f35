/* var/std with ddof, jnp.quantile (every method but inverted_cdf),
 * percentile, median, histogram, bincount, searchsorted, digitize, interp,
 * convolve and correlate against JAX (tests/golden/gen_np_surface.py):
 * values with NaNs and ties, gradients, under jit and vmap; and their
 * errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"
#include "unit/np_golden.h"

NP_FN1(f_var_ddof, jx_var_ddof(a, JX_AXES(1), 1, 0))
NP_FN1(f_std_ddof, jx_std_ddof(a, JX_AXES(0, 2), 2, 1))
NP_FN1(f_var_int, jx_var_ddof(a, JX_AXES(), 1, 0))
NP_FN2(f_quantile, jx_quantile(a, b, JX_AXES(1), NULL, 0))
NP_FN2(f_quantile_vec, jx_quantile(a, b, JX_AXES(), "linear", 0))
NP_FN2(f_quantile_lower, jx_quantile(a, b, JX_AXES(0), "lower", 1))
NP_FN2(f_quantile_higher, jx_quantile(a, b, JX_AXES(0), "higher", 1))
NP_FN2(f_quantile_nearest, jx_quantile(a, b, JX_AXES(0), "nearest", 1))
NP_FN2(f_quantile_midpoint, jx_quantile(a, b, JX_AXES(0), "midpoint", 1))
NP_FN2(f_quantile_axes, jx_quantile(a, b, JX_AXES(0, 2), NULL, 0))
NP_FN2(f_percentile, jx_percentile(a, b, JX_AXES(-1), NULL, 0))
NP_FN1(f_median, jx_median(a, JX_AXES(1), 0))
NP_FN1(f_median_all, jx_median(a, JX_AXES(), 0))
static void f_histogram(jx_array *const *in, jx_array **out) {
  check_ok(jx_histogram(in[0], 5, NAN, NAN, NULL, 0, &out[0], &out[1]));
}
static void f_histogram_range(jx_array *const *in, jx_array **out) {
  check_ok(jx_histogram(in[0], 4, -1, 1, in[1], 1, &out[0], &out[1]));
}
static void f_histogram_flat(jx_array *const *in, jx_array **out) {
  check_ok(jx_histogram(in[0], 3, NAN, NAN, NULL, 0, &out[0], &out[1]));
}
static void f_histogram_edges(jx_array *const *in, jx_array **out) {
  check_ok(jx_histogram_edges(in[0], in[1], in[2], 0, &out[0]));
}
NP_FN1(f_bincount, jx_bincount(a, NULL, 6))
NP_FN2(f_bincount_w, jx_bincount(a, b, 4))
NP_FN2(f_searchsorted_left, jx_searchsorted(a, b, NULL))
NP_FN2(f_searchsorted_right, jx_searchsorted(a, b, "right"))
NP_FN2(f_digitize, jx_digitize(a, b, 0))
NP_FN2(f_digitize_right, jx_digitize(a, b, 1))
static void f_interp(jx_array *const *in, jx_array **out) {
  out[0] = jx_interp(in[0], in[1], in[2], NULL, NULL);
}
static void f_interp_lr(jx_array *const *in, jx_array **out) {
  out[0] = jx_interp(in[0], in[1], in[2], &(double){-9}, &(double){9});
}
NP_FN2(f_convolve_full, jx_convolve(a, b, NULL))
NP_FN2(f_convolve_same, jx_convolve(a, b, "same"))
NP_FN2(f_convolve_valid, jx_convolve(a, b, "valid"))
NP_FN2(f_correlate_full, jx_correlate(a, b, "full"))
NP_FN2(f_correlate_same, jx_correlate(a, b, "same"))
NP_FN2(f_correlate_valid, jx_correlate(a, b, "valid"))

static const np_case cases[] = {
    NP("var_ddof", 1, 1, f_var_ddof),
    NP("std_ddof", 1, 1, f_std_ddof, .check_grads = 1),
    NP("var_int", 1, 1, f_var_int),
    NP("quantile", 2, 1, f_quantile),
    NP("quantile_vec", 2, 1, f_quantile_vec),
    NP("quantile_lower", 2, 1, f_quantile_lower),
    NP("quantile_higher", 2, 1, f_quantile_higher),
    NP("quantile_nearest", 2, 1, f_quantile_nearest),
    NP("quantile_midpoint", 2, 1, f_quantile_midpoint),
    NP("quantile_axes", 2, 1, f_quantile_axes, .check_grads = 1),
    NP("quantile_nan", 2, 1, f_quantile),
    NP("percentile", 2, 1, f_percentile),
    NP("median", 1, 1, f_median),
    NP("median_odd", 1, 1, f_median_all, .check_grads = 1),
    NP("median_vmap", 1, 1, f_median_all, .vmap = 1),
    NP("histogram", 1, 2, f_histogram),
    NP("histogram_range", 2, 2, f_histogram_range),
    NP("histogram_flat", 1, 2, f_histogram_flat),
    NP("histogram_edges", 3, 1, f_histogram_edges),
    NP("bincount", 1, 1, f_bincount),
    NP("bincount_w", 2, 1, f_bincount_w),
    NP("searchsorted_left", 2, 1, f_searchsorted_left),
    NP("searchsorted_right", 2, 1, f_searchsorted_right),
    NP("digitize", 2, 1, f_digitize),
    NP("digitize_right_desc", 2, 1, f_digitize_right),
    NP("interp", 3, 1, f_interp),
    NP("interp_lr", 3, 1, f_interp_lr),
    NP("convolve_full", 2, 1, f_convolve_full),
    NP("convolve_same", 2, 1, f_convolve_same),
    NP("convolve_valid", 2, 1, f_convolve_valid),
    NP("correlate_full", 2, 1, f_correlate_full),
    NP("correlate_same", 2, 1, f_correlate_same),
    NP("correlate_valid", 2, 1, f_correlate_valid),
    NP("convolve_f64", 2, 1, f_convolve_full, .check_grads = 1),
};
NP_GOLDEN_TESTS(cases)

static void test_errors(void **state) {
  (void)state;
  jx_array *m = jx_zeros(JX_F32, JX_SHAPE(3, 4)), *v = jx_zeros(JX_F32, JX_SHAPE(4));
  jx_array *q = jx_scalar(JX_F32, 0.5);
  NP_EXPECT_ERROR(jx_quantile(m, q, JX_AXES(), "weibull", 0), "method \"weibull\"");
  NP_EXPECT_ERROR(jx_quantile(m, m, JX_AXES(), NULL, 0), "q must be a scalar or 1-D");
  NP_EXPECT_ERROR(jx_quantile(m, q, JX_AXES(2), NULL, 0), "axis 2");
  NP_EXPECT_ERROR(jx_quantile(jx_zeros(JX_F32, JX_SHAPE(0)), q, JX_AXES(), NULL, 0),
                  "over no elements");
  NP_EXPECT_ERROR(jx_var_ddof(m, JX_AXES(0, 0), 1, 0), "appears twice");
  NP_EXPECT_ERROR(jx_searchsorted(m, v, NULL), "the sorted array must be 1-D, got f32[3,4]");
  NP_EXPECT_ERROR(jx_searchsorted(v, v, "middle"), "side \"middle\"");
  NP_EXPECT_ERROR(jx_digitize(v, m, 0), "bins must be 1-D");
  NP_EXPECT_ERROR(jx_interp(v, v, m, NULL, NULL), "xp f32[4] and fp f32[3,4]");
  NP_EXPECT_ERROR(jx_bincount(v, NULL, 3), "must have an integer dtype");
  NP_EXPECT_ERROR(jx_bincount(jx_zeros(JX_I32, JX_SHAPE(2, 2)), NULL, 3), "x must be 1-D");
  NP_EXPECT_ERROR(jx_bincount(jx_zeros(JX_I32, JX_SHAPE(2)), NULL, -1), "length -1");
  NP_EXPECT_ERROR(jx_convolve(m, v, NULL), "jx_convolve: a must be 1-D");
  NP_EXPECT_ERROR(jx_correlate(v, v, "half"), "mode \"half\"");
  NP_EXPECT_ERROR(jx_convolve(v, jx_zeros(JX_F32, JX_SHAPE(0)), NULL), "cannot be empty");
  jx_array *h, *e;
  jx_clear_error();
  assert_int_not_equal(jx_histogram(v, 0, NAN, NAN, NULL, 0, &h, &e), JX_OK);
  assert_error_has("bins 0 < 1");
  assert_int_not_equal(jx_histogram(v, 3, 2, 1, NULL, 0, &h, &e), JX_OK);
  assert_error_has("range [2, 1]");
  assert_int_not_equal(jx_histogram(v, 3, NAN, NAN, m, 0, &h, &e), JX_OK);
  assert_error_has("weights f32[3,4] must have the shape of a f32[4]");
  assert_true(jx_is_poisoned(h));
  assert_int_not_equal(jx_histogram_edges(v, jx_zeros(JX_F32, JX_SHAPE(1)), NULL, 0, &h), JX_OK);
  assert_error_has("at least 2 edges, got 1");
  assert_int_not_equal(jx_histogram_edges(v, m, NULL, 0, &h), JX_OK);
  assert_error_has("bin_edges must be 1-D");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_golden_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(test_golden_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
