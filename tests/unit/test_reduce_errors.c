/* Rejections of the reduction, sorting and window ops, each with its message
 * checked; plus the primitive-level semantics the public API cannot reach
 * (bitwise reduce_and/or on integers, i64 argmax, window dilations). */
/* cmocka needs these first */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>
// clang-format on
#include <jx/jx.h>

#include "trace/dispatch.h"
#include "test_util.h"

static void expect_error(jx_array *r, jx_status code, const char *a, const char *b) {
  assert_true(jx_is_poisoned(r));
  if (jx_last_status() != code) print_message("unexpected error: %s\n", jx_last_error());
  assert_int_equal(jx_last_status(), code);
  assert_non_null(strstr(jx_last_error(), a));
  if (b) assert_non_null(strstr(jx_last_error(), b));
}

static void axis_out_of_range(void **state) {
  (void)state;
  jx_array *x = jx_zeros(JX_F32, JX_SHAPE(2, 3));
  expect_error(jx_sum(x, JX_AXES(2), 0), JX_ERR_INVALID_ARGUMENT, "jx_sum: axis 2",
               "out of range for rank 2");
  jx_clear_error();
  expect_error(jx_argmax(x, -3), JX_ERR_INVALID_ARGUMENT, "jx_argmax: axis -3", "rank 2");
  jx_clear_error();
  expect_error(jx_cumsum(x, 5), JX_ERR_INVALID_ARGUMENT, "jx_cumsum: axis 5", NULL);
  jx_clear_error();
  expect_error(jx_softmax(x, 2), JX_ERR_INVALID_ARGUMENT, "jx_softmax: axis 2", NULL);
  jx_clear_error();
  expect_error(jx_sort(jx_scalar(JX_F32, 1), 0), JX_ERR_INVALID_ARGUMENT, "jx_sort: axis 0",
               "rank 0");
}

static void duplicate_axes(void **state) {
  (void)state;
  jx_array *x = jx_zeros(JX_F32, JX_SHAPE(2, 3));
  expect_error(jx_mean(x, JX_AXES(1, -1), 0), JX_ERR_INVALID_ARGUMENT, "jx_mean: axis -1",
               "appears twice");
}

static void max_of_empty(void **state) {
  (void)state;
  jx_array *x = jx_zeros(JX_F32, JX_SHAPE(0, 3));
  expect_error(jx_max(x, JX_AXES(), 0), JX_ERR_SHAPE, "jx_max: zero-size array", "f32[0,3]");
  jx_clear_error();
  expect_error(jx_min(x, JX_AXES(0), 1), JX_ERR_SHAPE, "jx_min: zero-size array", NULL);
  jx_clear_error();
  /* reducing only the non-empty axis is fine */
  assert_false(jx_is_poisoned(jx_max(x, JX_AXES(1), 0)));
  expect_error(jx_argmin(x, 0), JX_ERR_SHAPE, "jx_argmin: attempt to get argmin of an empty",
               "f32[0,3]");
}

static void top_k_too_large(void **state) {
  (void)state;
  jx_array *x = jx_zeros(JX_F32, JX_SHAPE(2, 3)), *v, *i;
  assert_int_equal(jx_top_k(x, 4, &v, &i), JX_ERR_INVALID_ARGUMENT);
  assert_true(jx_is_poisoned(v) && jx_is_poisoned(i));
  assert_non_null(strstr(jx_last_error(), "jx_top_k: k = 4 is out of range [0, 3]"));
  assert_non_null(strstr(jx_last_error(), "f32[2,3]"));
  jx_clear_error();
  assert_int_equal(jx_top_k(jx_scalar(JX_F32, 1), 1, &v, &i), JX_ERR_SHAPE);
  assert_non_null(strstr(jx_last_error(), "at least one dimension"));
}

static void sort_multi_mismatched_shapes(void **state) {
  (void)state;
  jx_array *ops[2] = {jx_zeros(JX_F32, JX_SHAPE(3)), jx_zeros(JX_I32, JX_SHAPE(4))}, *out[2];
  assert_int_equal(jx_sort_multi(2, ops, 0, 1, out), JX_ERR_SHAPE);
  assert_true(jx_is_poisoned(out[0]) && jx_is_poisoned(out[1]));
  assert_non_null(strstr(jx_last_error(), "jx_sort_multi: operands must have one shape"));
  assert_non_null(strstr(jx_last_error(), "f32[3]"));
  assert_non_null(strstr(jx_last_error(), "i32[4] (operand 1)"));
  jx_clear_error();
  ops[1] = jx_zeros(JX_I32, JX_SHAPE(3));
  assert_int_equal(jx_sort_multi(2, ops, 0, 3, out), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "num_keys = 3 must be in [1, 2]"));
}

static void reduce_window_wrong_window(void **state) {
  (void)state;
  jx_array *x = jx_zeros(JX_F32, JX_SHAPE(4, 4));
  expect_error(jx_reduce_window(x, "max", JX_SHAPE(2), JX_SHAPE(), JX_SHAPE(), JX_SHAPE()),
               JX_ERR_INVALID_ARGUMENT, "jx_reduce_window: window has 1 entries",
               "f32[4,4] of rank 2");
  jx_clear_error();
  expect_error(jx_reduce_window(x, "max", JX_SHAPE(2, 2), JX_SHAPE(1), JX_SHAPE(), JX_SHAPE()),
               JX_ERR_INVALID_ARGUMENT, "jx_reduce_window: strides has 1 entries", NULL);
  jx_clear_error();
  expect_error(jx_reduce_window(x, "mean", JX_SHAPE(2, 2), JX_SHAPE(), JX_SHAPE(), JX_SHAPE()),
               JX_ERR_INVALID_ARGUMENT, "op \"mean\" is not one of", NULL);
  jx_clear_error();
  expect_error(jx_reduce_window(x, "sum", JX_SHAPE(0, 2), JX_SHAPE(), JX_SHAPE(), JX_SHAPE()),
               JX_ERR_INVALID_ARGUMENT, "reduce_window_sum: window_dimensions[0] = 0", NULL);
  jx_clear_error();
  expect_error(jx_max_pool(jx_zeros(JX_F32, JX_SHAPE(4, 4, 1)), JX_SHAPE(2, 2), JX_SHAPE(), "FULL"),
               JX_ERR_INVALID_ARGUMENT, "jx_max_pool: padding \"FULL\"", NULL);
  jx_clear_error();
  expect_error(jx_avg_pool(jx_zeros(JX_F32, JX_SHAPE(4)), JX_SHAPE(2, 2), JX_SHAPE(), "VALID"),
               JX_ERR_SHAPE, "jx_avg_pool: a window of 2 spatial dims needs an input of rank >= 3",
               "f32[4]");
}

static void dtype_rejections(void **state) {
  (void)state;
  jx_array *b = jx_zeros(JX_BOOL, JX_SHAPE(3));
  expect_error(jx_cummax(b, 0), JX_ERR_DTYPE, "jx_cummax: bool operands", NULL);
  jx_clear_error();
  expect_error(jx_softmax(b, 0), JX_ERR_DTYPE, "jx_softmax: bool operands", NULL);
  jx_clear_error();
  expect_error(jx_cumulative(jx_zeros(JX_F32, JX_SHAPE(3)), "mean", 0, 0), JX_ERR_INVALID_ARGUMENT,
               "jx_cumulative: op \"mean\"", NULL);
  jx_clear_error();
  /* primitive rules: reduce_sum takes numbers, reduce_and ints or bool */
  jx_params p = {0};
  p.l[0].n = 1;
  jx_array *f = jx_zeros(JX_F32, JX_SHAPE(3));
  expect_error(jx_bind1(&jx_prim_reduce_sum, 1, &b, &p), JX_ERR_DTYPE,
               "reduce_sum: operand bool[3]", "numeric");
  jx_clear_error();
  expect_error(jx_bind1(&jx_prim_reduce_and, 1, &f, &p), JX_ERR_DTYPE, "reduce_and: operand f32[3]",
               NULL);
  jx_clear_error();
  p.l[0].n = 2;
  p.l[0].v[1] = 0;
  expect_error(jx_bind1(&jx_prim_reduce_max, 1, &f, &p), JX_ERR_INVALID_ARGUMENT,
               "reduce_max: 2 axes given", NULL);
}

static void null_and_poison(void **state) {
  (void)state;
  expect_error(jx_sum(NULL, JX_AXES(), 0), JX_ERR_INVALID_ARGUMENT, "jx_sum: argument 0 is NULL",
               NULL);
  jx_clear_error();
  jx_array *bad = jx_sum(jx_zeros(JX_F32, JX_SHAPE(2)), JX_AXES(3), 0);
  assert_true(jx_is_poisoned(jx_softmax(bad, 0)));
  assert_true(jx_is_poisoned(jx_sort(bad, 0)));
  assert_non_null(strstr(jx_last_error(), "jx_sum: axis 3"));
}

/* lax.reduce_and/or on integers are bitwise. */
static void prim_bitwise_and_or(void **state) {
  (void)state;
  const int32_t v[4] = {0x0f, 0x3c, 0x0f, 0x7f};
  jx_array *x = jx_array_from(JX_I32, JX_SHAPE(2, 2), v);
  jx_params p = {0};
  p.l[0].n = 1;
  p.l[0].v[0] = 1;
  int32_t got[2];
  assert_int_equal(jx_read(jx_bind1(&jx_prim_reduce_and, 1, &x, &p), got, sizeof got), JX_OK);
  assert_int_equal(got[0], 0x0c);
  assert_int_equal(got[1], 0x0f);
  assert_int_equal(jx_read(jx_bind1(&jx_prim_reduce_or, 1, &x, &p), got, sizeof got), JX_OK);
  assert_int_equal(got[0], 0x3f);
  assert_int_equal(got[1], 0x7f);
}

static void prim_argmax_i64(void **state) {
  (void)state;
  const float v[5] = {1, 7, 7, -2, 0};
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(5), v);
  jx_params p = {0};
  p.dtype = JX_I64;
  jx_array *r = jx_bind1(&jx_prim_argmax, 1, &x, &p);
  assert_int_equal(jx_dtype_of(r), JX_I64);
  assert_int_equal((int64_t)jx_item(r), 1);
  p.dtype = JX_F32;
  expect_error(jx_bind1(&jx_prim_argmax, 1, &x, &p), JX_ERR_DTYPE,
               "argmax: index dtype must be i32 or i64", "f32");
}

/* Dilations, against lax.reduce_window (values worked out from its definition:
 * x = [0..5], window 2 with window dilation 2 and base dilation 2 and padding 1/1). */
static void prim_window_dilation(void **state) {
  (void)state;
  const float v[6] = {1, 2, 3, 4, 5, 6};
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(6), v);
  jx_params p = {0};
  p.l[0] = (jx_ilist){1, {2}};
  p.l[5] = (jx_ilist){1, {2}}; /* window dilation: pairs x[i], x[i+2] */
  float got[6];
  jx_array *r = jx_bind1(&jx_prim_reduce_window_sum, 1, &x, &p);
  assert_int_equal(jx_shape_of(r).dims[0], 4);
  assert_int_equal(jx_read(r, got, 4 * sizeof(float)), JX_OK);
  assert_true(got[0] == 4 && got[1] == 6 && got[2] == 8 && got[3] == 10);
  /* base dilation 2: [1 _ 2 _ 3 _ 4 _ 5 _ 6] (11 wide), window 3, stride 2 */
  jx_params q = {0};
  q.l[0] = (jx_ilist){1, {3}};
  q.l[1] = (jx_ilist){1, {2}};
  q.l[4] = (jx_ilist){1, {2}};
  r = jx_bind1(&jx_prim_reduce_window_max, 1, &x, &q);
  assert_int_equal(jx_shape_of(r).dims[0], 5);
  assert_int_equal(jx_read(r, got, 5 * sizeof(float)), JX_OK);
  for (int i = 0; i < 5; i++) assert_true(got[i] == (float)(i + 2));
  /* padding reads the identity: min over [pad, 1] with pad lo 1 is 1, over [6, pad] 6 */
  jx_params m = {0};
  m.l[0] = (jx_ilist){1, {2}};
  m.l[2] = (jx_ilist){1, {1}};
  m.l[3] = (jx_ilist){1, {1}};
  r = jx_bind1(&jx_prim_reduce_window_min, 1, &x, &m);
  float mins[7];
  assert_int_equal(jx_shape_of(r).dims[0], 7);
  assert_int_equal(jx_read(r, mins, sizeof mins), JX_OK);
  const float want[7] = {1, 1, 2, 3, 4, 5, 6};
  for (int i = 0; i < 7; i++) assert_true(mins[i] == want[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(axis_out_of_range, setup, teardown),
      cmocka_unit_test_setup_teardown(duplicate_axes, setup, teardown),
      cmocka_unit_test_setup_teardown(max_of_empty, setup, teardown),
      cmocka_unit_test_setup_teardown(top_k_too_large, setup, teardown),
      cmocka_unit_test_setup_teardown(sort_multi_mismatched_shapes, setup, teardown),
      cmocka_unit_test_setup_teardown(reduce_window_wrong_window, setup, teardown),
      cmocka_unit_test_setup_teardown(dtype_rejections, setup, teardown),
      cmocka_unit_test_setup_teardown(null_and_poison, setup, teardown),
      cmocka_unit_test_setup_teardown(prim_bitwise_and_or, setup, teardown),
      cmocka_unit_test_setup_teardown(prim_argmax_i64, setup, teardown),
      cmocka_unit_test_setup_teardown(prim_window_dilation, setup, teardown),
  };
  jx_status st = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return st;
}
