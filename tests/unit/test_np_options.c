/* The options of the jax.numpy surface beyond its defaults against JAX
 * (tests/golden/gen_np_surface.py, "options"): jnp.pad's odd reflections,
 * statistic modes and "empty", diff's prepend and append, var/std's where,
 * roll over several axes, sparse meshgrids, jax.nn.standardize's options,
 * quantile/percentile's inverted_cdf and weights, interp's array bounds,
 * extrapolation and period, searchsorted's sorter, and unique's first
 * occurrences, inverse and counts with a static size; values and gradients,
 * eagerly and under jit; and the errors of bad option values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"
#include "unit/np_golden.h"

NP_FN1(f_pad_reflect_odd, jx_pad_reflect(a, JX_SHAPE(5, 1), JX_SHAPE(2, 3), "reflect", "odd"))
NP_FN1(f_pad_symmetric_odd, jx_pad_reflect(a, JX_SHAPE(5, 1), JX_SHAPE(2, 3), "symmetric", "odd"))
NP_FN1(f_pad_reflect_odd_int, jx_pad_reflect(a, JX_SHAPE(4), JX_SHAPE(6), "reflect", "odd"))
NP_FN1(f_pad_symmetric_odd_int, jx_pad_reflect(a, JX_SHAPE(4), JX_SHAPE(6), "symmetric", "odd"))
NP_FN1(f_pad_reflect_odd_1, jx_pad_reflect(a, JX_SHAPE(2, 0), JX_SHAPE(3, 0), "reflect", "odd"))
NP_FN1(f_pad_symmetric_odd_f64, jx_pad_reflect(a, JX_SHAPE(3), JX_SHAPE(4), "symmetric", "odd"))
#define PAD_STAT(NAME, MODE)                                                                       \
  NP_FN1(f_pad_##NAME,                                                                             \
         jx_pad_stat(a, JX_SHAPE(2, 0), JX_SHAPE(1, 3), MODE, JX_SHAPE(), JX_SHAPE()))             \
  NP_FN1(f_pad_##NAME##_len,                                                                       \
         jx_pad_stat(a, JX_SHAPE(1, 2), JX_SHAPE(2, 2), MODE, JX_SHAPE(2, 1), JX_SHAPE(9, 3)))
PAD_STAT(maximum, "maximum")
PAD_STAT(minimum, "minimum")
PAD_STAT(mean, "mean")
PAD_STAT(median, "median")
NP_FN1(f_pad_mean_int, jx_pad_stat(a, JX_SHAPE(2), JX_SHAPE(3), "mean", JX_SHAPE(2), JX_SHAPE(3)))
NP_FN1(f_pad_median_int,
       jx_pad_stat(a, JX_SHAPE(1, 2), JX_SHAPE(1, 0), "median", JX_SHAPE(), JX_SHAPE()))
NP_FN1(f_pad_empty, jx_pad_mode(a, JX_SHAPE(1, 0), JX_SHAPE(2, 1), "empty", 0))
NP_FN1(f_diff_prepend, jx_diff_with(a, 1, 0, jx_scalar(JX_F64, 1.5), NULL))
NP_FN2(f_diff_append, jx_diff_with(a, 2, -1, NULL, b))
NP_FN2(f_diff_both_int, jx_diff_with(a, 1, -1, b, b))
NP_FN2(f_quantile_icdf, jx_quantile(a, b, JX_AXES(1), "inverted_cdf", 0))
NP_FN2(f_quantile_icdf_keep, jx_quantile(a, b, JX_AXES(0), "inverted_cdf", 1))
static void f_quantile_weighted(jx_array *const *in, jx_array **out) {
  out[0] = jx_quantile_weighted(in[0], in[1], JX_AXES(0, 2), in[2], "inverted_cdf", 0);
}
static void f_quantile_weighted_full(jx_array *const *in, jx_array **out) {
  out[0] = jx_quantile_weighted(in[0], in[1], JX_AXES(1), in[2], "inverted_cdf", 1);
}
static void f_percentile_weighted(jx_array *const *in, jx_array **out) {
  out[0] = jx_percentile_weighted(in[0], in[1], JX_AXES(), in[2], "inverted_cdf", 0);
}
static void f_interp_arrays(jx_array *const *in, jx_array **out) {
  jx_interp_options o = {.left = in[3], .extrapolate_right = 1};
  out[0] = jx_interp_with(in[0], in[1], in[2], &o);
}
static void f_interp_extrapolate(jx_array *const *in, jx_array **out) {
  out[0] = jx_interp_with(in[0], in[1], in[2], &(jx_interp_options){.extrapolate_left = 1});
}
static void f_interp_period(jx_array *const *in, jx_array **out) {
  out[0] = jx_interp_with(in[0], in[1], in[2], &(jx_interp_options){.period = in[3]});
}
static void f_searchsorted_sorter(jx_array *const *in, jx_array **out) {
  out[0] = jx_searchsorted_sorter(in[0], in[1], "right", in[2]);
}
static void f_unique_all(jx_array *const *in, jx_array **out) {
  check_ok(jx_unique_all(in[0], 6, jx_scalar(JX_F32, -1), &out[0], &out[1], &out[2], &out[3]));
}
static void f_unique_all_short(jx_array *const *in, jx_array **out) {
  check_ok(jx_unique_all(in[0], 2, NULL, &out[0], &out[1], &out[2], &out[3]));
}
static void f_unique_all_default_fill(jx_array *const *in, jx_array **out) {
  check_ok(jx_unique_all(in[0], 7, NULL, &out[0], &out[1], &out[2], &out[3]));
}
static void f_unique_all_empty(jx_array *const *in, jx_array **out) {
  check_ok(jx_unique_all(in[0], 3, jx_scalar(JX_F32, 0), &out[0], &out[1], &out[2], &out[3]));
}
NP_FN2(f_var_where, jx_var_where(a, JX_AXES(1), 0, 0, b))
NP_FN2(f_std_where, jx_std_where(a, JX_AXES(0, 2), 1, 1, b))
NP_FN2(f_var_where_all, jx_var_where(a, JX_AXES(), 2, 0, b))
NP_FN1(f_var_ddof_too_big, jx_var_ddof(a, JX_AXES(0), 3, 0))
NP_FN1(f_roll_axes, jx_roll_axes(a, 3, (int64_t[]){2, -1, 7}, (int[]){1, 0, 1}))
static void f_meshgrid_sparse_xy(jx_array *const *in, jx_array **out) {
  check_ok(jx_meshgrid_sparse(3, in, NULL, out));
}
static void f_meshgrid_sparse_ij(jx_array *const *in, jx_array **out) {
  check_ok(jx_meshgrid_sparse(2, in, "ij", out));
}
NP_FN2(f_standardize_where, jx_standardize_with(a, JX_AXES(), 1e-5, NULL, NULL, b, NULL))
static void f_standardize_given(jx_array *const *in, jx_array **out) {
  out[0] = jx_standardize_with(in[0], JX_AXES(0), 1e-3, in[1], in[2], NULL, "fast");
}
NP_FN1(f_standardize_stable,
       jx_standardize_with(a, JX_AXES(0, 2), 1e-5, NULL, NULL, NULL, "stable"))
NP_FN1(f_pad_odd_vmap, jx_pad_reflect(a, JX_SHAPE(2), JX_SHAPE(3), "symmetric", "odd"))
static void f_quantile_weighted_vmap(jx_array *const *in, jx_array **out) {
  out[0] = jx_quantile_weighted(in[0], in[1], JX_AXES(), in[2], "inverted_cdf", 0);
}
static void f_unique_all_vmap(jx_array *const *in, jx_array **out) {
  check_ok(jx_unique_all(in[0], 4, jx_scalar(JX_F32, -1), &out[0], &out[1], &out[2], &out[3]));
}

static const np_case cases[] = {
    NP("pad_reflect_odd", 1, 1, f_pad_reflect_odd, .check_grads = 1),
    NP("pad_symmetric_odd", 1, 1, f_pad_symmetric_odd),
    NP("pad_reflect_odd_int", 1, 1, f_pad_reflect_odd_int),
    NP("pad_symmetric_odd_int", 1, 1, f_pad_symmetric_odd_int),
    NP("pad_reflect_odd_1", 1, 1, f_pad_reflect_odd_1),
    NP("pad_symmetric_odd_f64", 1, 1, f_pad_symmetric_odd_f64, .check_grads = 1, .x64 = 1),
    NP("pad_maximum", 1, 1, f_pad_maximum),
    NP("pad_maximum_len", 1, 1, f_pad_maximum_len, .x64 = 1),
    NP("pad_minimum", 1, 1, f_pad_minimum),
    NP("pad_minimum_len", 1, 1, f_pad_minimum_len, .x64 = 1),
    NP("pad_mean", 1, 1, f_pad_mean, .check_grads = 1),
    NP("pad_mean_len", 1, 1, f_pad_mean_len, .x64 = 1),
    NP("pad_median", 1, 1, f_pad_median),
    NP("pad_median_len", 1, 1, f_pad_median_len, .x64 = 1),
    NP("pad_mean_int", 1, 1, f_pad_mean_int),
    NP("pad_median_int", 1, 1, f_pad_median_int),
    NP("pad_empty", 1, 1, f_pad_empty),
    NP("diff_prepend", 1, 1, f_diff_prepend),
    NP("diff_append", 2, 1, f_diff_append, .check_grads = 1),
    NP("diff_both_int", 2, 1, f_diff_both_int),
    NP("quantile_icdf", 2, 1, f_quantile_icdf),
    NP("quantile_icdf_keep", 2, 1, f_quantile_icdf_keep),
    NP("quantile_weighted", 3, 1, f_quantile_weighted, .x64 = 1),
    NP("quantile_weighted_full", 3, 1, f_quantile_weighted_full),
    NP("percentile_weighted", 3, 1, f_percentile_weighted),
    NP("interp_arrays", 4, 1, f_interp_arrays),
    NP("interp_extrapolate", 3, 1, f_interp_extrapolate),
    NP("interp_period", 4, 1, f_interp_period),
    NP("interp_period_f64", 4, 1, f_interp_period, .check_grads = 1, .x64 = 1),
    NP("searchsorted_sorter", 3, 1, f_searchsorted_sorter),
    NP("unique_all", 1, 4, f_unique_all),
    NP("unique_all_short", 1, 4, f_unique_all_short),
    NP("unique_all_default_fill", 1, 4, f_unique_all_default_fill, .x64 = 1),
    NP("unique_all_empty", 1, 4, f_unique_all_empty),
    NP("var_where", 2, 1, f_var_where),
    NP("std_where", 2, 1, f_std_where, .x64 = 1),
    NP("var_where_all", 2, 1, f_var_where_all),
    NP("var_ddof_too_big", 1, 1, f_var_ddof_too_big),
    NP("roll_axes", 1, 1, f_roll_axes),
    NP("meshgrid_sparse_xy", 3, 3, f_meshgrid_sparse_xy),
    NP("meshgrid_sparse_ij", 2, 2, f_meshgrid_sparse_ij),
    NP("standardize_where", 2, 1, f_standardize_where),
    NP("standardize_given", 3, 1, f_standardize_given),
    NP("standardize_stable", 1, 1, f_standardize_stable, .x64 = 1, .check_grads = 1),
    NP("pad_odd_vmap", 1, 1, f_pad_odd_vmap, .vmap = 1),
    NP("quantile_weighted_vmap", 3, 1, f_quantile_weighted_vmap, .vmap = 1,
       .in_axes = {0, JX_NONE, 0}),
    NP("interp_period_vmap", 4, 1, f_interp_period, .vmap = 1,
       .in_axes = {0, JX_NONE, JX_NONE, JX_NONE}),
    NP("unique_all_vmap", 1, 4, f_unique_all_vmap, .vmap = 1),
};
NP_GOLDEN_TESTS(cases)

/* a status-returning call must fail with an error naming `what` and this file's line */
#define EXPECT_STATUS_ERROR(expr, what)                                                            \
  do {                                                                                             \
    jx_clear_error();                                                                              \
    assert_int_not_equal((expr), JX_OK);                                                           \
    assert_non_null(strstr(jx_last_error(), __FILE__));                                            \
    assert_error_has(what);                                                                        \
  } while (0)

static void test_errors(void **state) {
  (void)state;
  jx_array *m = jx_zeros(JX_F32, JX_SHAPE(3, 4)), *v = jx_zeros(JX_F32, JX_SHAPE(4));
  jx_array *q = jx_scalar(JX_F32, 0.5);
  NP_EXPECT_ERROR(jx_pad_reflect(v, JX_SHAPE(1), JX_SHAPE(1), "reflect", "oddly"),
                  "reflect_type \"oddly\" is not \"even\" or \"odd\"");
  NP_EXPECT_ERROR(jx_pad_reflect(v, JX_SHAPE(1), JX_SHAPE(1), "wrap", "odd"),
                  "mode \"wrap\" is not \"reflect\" or \"symmetric\"");
  NP_EXPECT_ERROR(jx_pad_reflect(v, JX_SHAPE(-1), JX_SHAPE(1), "reflect", "odd"),
                  "negative padding");
  NP_EXPECT_ERROR(jx_pad_stat(v, JX_SHAPE(1), JX_SHAPE(1), "mode", JX_SHAPE(), JX_SHAPE()),
                  "mode \"mode\" is not one of maximum, minimum, mean, median");
  NP_EXPECT_ERROR(jx_pad_stat(v, JX_SHAPE(1), JX_SHAPE(1), "mean", JX_SHAPE(0), JX_SHAPE(2)),
                  "stat lengths (0, 2) on axis 0 must be >= 1");
  NP_EXPECT_ERROR(jx_pad_stat(m, JX_SHAPE(1, 1), JX_SHAPE(1, 1), "mean", JX_SHAPE(1), JX_SHAPE(1)),
                  "needs 2 stat lengths before and after, got 1 and 1");
  NP_EXPECT_ERROR(jx_pad_stat(m, JX_SHAPE(1), JX_SHAPE(1), "median", JX_SHAPE(), JX_SHAPE()),
                  "needs 2 widths before and after");
  NP_EXPECT_ERROR(jx_pad_mode(v, JX_SHAPE(1), JX_SHAPE(1), "maximum", 0), "jx_pad_stat");
  NP_EXPECT_ERROR(jx_diff_with(m, 1, 0, NULL, v),
                  "jx_diff_with: append f32[4] must be a scalar or match a f32[3,4] but on axis 0");
  NP_EXPECT_ERROR(jx_diff_with(m, -1, 0, v, NULL), "order -1 must be >= 0");
  NP_EXPECT_ERROR(jx_var_where(m, JX_AXES(), 0, 0, v), "where f32[4] must be a bool array");
  NP_EXPECT_ERROR(jx_std_where(m, JX_AXES(), 0, 0, jx_zeros(JX_BOOL, JX_SHAPE(3))),
                  "where bool[3] must broadcast to a f32[3,4]");
  NP_EXPECT_ERROR(jx_roll_axes(m, 1, (int64_t[]){1}, (int[]){2}), "jx_roll_axes: axis 2");
  NP_EXPECT_ERROR(jx_roll_axes(m, 1, (int64_t[]){1}, (int[]){JX_NONE}), "axes[0] is JX_NONE");
  jx_array *grid[2];
  EXPECT_STATUS_ERROR(jx_meshgrid_sparse(2, (jx_array *[]){v, m}, "ij", grid),
                      "jx_meshgrid_sparse: every argument must be 1-D");
  EXPECT_STATUS_ERROR(jx_meshgrid_sparse(2, (jx_array *[]){v, v}, "yx", grid), "indexing \"yx\"");
  NP_EXPECT_ERROR(jx_standardize_with(m, JX_AXES(), 1e-5, NULL, NULL, NULL, "exact"),
                  "algorithm \"exact\" is not \"fast\" or \"stable\"");
  NP_EXPECT_ERROR(jx_standardize_with(m, JX_AXES(), 1e-5, NULL, NULL, m, NULL),
                  "jx_standardize_with: where f32[3,4] must be a bool array");
  NP_EXPECT_ERROR(jx_quantile_weighted(m, q, JX_AXES(1), v, "linear", 0),
                  "method \"linear\" takes no weights; only \"inverted_cdf\" does");
  NP_EXPECT_ERROR(jx_quantile_weighted(m, q, JX_AXES(1), v, NULL, 0), "takes no weights");
  NP_EXPECT_ERROR(jx_quantile_weighted(m, q, JX_AXES(0), v, "inverted_cdf", 0),
                  "weights f32[4] must have the shape of a f32[3,4] or of its reduced axes");
  NP_EXPECT_ERROR(jx_percentile_weighted(m, q, JX_AXES(), m, "inverse_cdf", 0),
                  "jx_percentile_weighted: method \"inverse_cdf\"");
  NP_EXPECT_ERROR(jx_interp_with(v, v, v, &(jx_interp_options){.period = v}),
                  "period must be a scalar, got f32[4]");
  NP_EXPECT_ERROR(jx_interp_with(v, v, m, NULL), "xp f32[4] and fp f32[3,4]");
  NP_EXPECT_ERROR(jx_searchsorted_sorter(v, v, "left", v), "sorter f32[4] must be integer");
  NP_EXPECT_ERROR(jx_searchsorted_sorter(v, v, "up", jx_zeros(JX_I32, JX_SHAPE(4))), "side \"up\"");
  jx_array *u = NULL, *idx = NULL;
  EXPECT_STATUS_ERROR(jx_unique_all(v, -1, NULL, &u, &idx, NULL, NULL), "size -1");
  assert_true(jx_is_poisoned(u) && jx_is_poisoned(idx));
  EXPECT_STATUS_ERROR(jx_unique_all(v, 2, v, &u, NULL, NULL, NULL), "fill must be a scalar");
  EXPECT_STATUS_ERROR(jx_unique_all(v, 2, NULL, NULL, NULL, NULL, NULL), "values is NULL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_golden_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(test_golden_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
