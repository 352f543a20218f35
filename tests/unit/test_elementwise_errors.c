/* Rejections of the elementwise ops: each names the public op, the offending
 * operand and the bad value, and returns a poisoned array. */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>

#include <string.h>
#include <cmocka.h>
#include "test_util.h"

/* the result is poisoned, the status is code and the message holds every part */
static void expect_error(jx_array *r, jx_status code, const char *const *parts) {
  assert_true(jx_is_poisoned(r));
  assert_int_equal(jx_last_status(), code);
  for (; *parts; parts++) {
    if (!strstr(jx_last_error(), *parts)) fail_msg("'%s' not in '%s'", *parts, jx_last_error());
  }
}
#define EXPECT(r, code, ...) expect_error((r), (code), (const char *const[]){__VA_ARGS__, NULL})

static void shift_left_on_floats(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(3));
  EXPECT(jx_shift_left(a, a), JX_ERR_DTYPE, "jx_shift_left", "f32[3]", "integer",
         "test_elementwise_errors.c:");
}

static void bitwise_and_on_floats(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F64, JX_SHAPE(2, 2)), *b = jx_zeros(JX_I32, JX_SHAPE(2));
  EXPECT(jx_bitwise_and(a, b), JX_ERR_DTYPE, "jx_bitwise_and", "f64[2,2]", "integer or bool");
}

static void population_count_on_floats_and_bool(void **state) {
  (void)state;
  EXPECT(jx_population_count(jx_zeros(JX_BF16, JX_SHAPE(4))), JX_ERR_DTYPE, "jx_population_count",
         "bf16[4]", "an integer dtype");
  jx_clear_error();
  EXPECT(jx_population_count(jx_zeros(JX_BOOL, JX_SHAPE(1))), JX_ERR_DTYPE, "jx_population_count",
         "bool[1]");
}

static void bitwise_not_and_neg_dtypes(void **state) {
  (void)state;
  EXPECT(jx_bitwise_not(jx_zeros(JX_F32, JX_SHAPE(2))), JX_ERR_DTYPE, "jx_bitwise_not", "f32[2]");
  jx_clear_error();
  EXPECT(jx_neg(jx_zeros(JX_BOOL, JX_SHAPE(2))), JX_ERR_DTYPE, "jx_neg", "bool[2]", "numeric");
}

static void integer_pow_negative_on_ints(void **state) {
  (void)state;
  EXPECT(jx_integer_pow(jx_ones(JX_I32, JX_SHAPE(3)), -2), JX_ERR_INVALID_ARGUMENT,
         "jx_integer_pow", "negative power", "i32[3] ** -2");
}

static void bitcast_with_bad_last_dim(void **state) {
  (void)state;
  EXPECT(jx_bitcast_convert_type(jx_zeros(JX_U8, JX_SHAPE(2, 3)), JX_F32), JX_ERR_SHAPE,
         "jx_bitcast_convert_type", "u8[2,3]", "f32", "last dimension of size 4");
  jx_clear_error();
  EXPECT(jx_bitcast_convert_type(jx_zeros(JX_U16, JX_SHAPE()), JX_F64), JX_ERR_SHAPE,
         "jx_bitcast_convert_type", "u16[]", "size 4");
  jx_clear_error();
  EXPECT(jx_bitcast_convert_type(jx_zeros(JX_BOOL, JX_SHAPE(2)), JX_U8), JX_ERR_DTYPE,
         "jx_bitcast_convert_type", "bool[2]", "u8");
}

static void where_shapes_do_not_broadcast(void **state) {
  (void)state;
  jx_array *c = jx_zeros(JX_BOOL, JX_SHAPE(2, 3)), *a = jx_zeros(JX_F32, JX_SHAPE(4)),
           *b = jx_zeros(JX_F32, JX_SHAPE(1));
  EXPECT(jx_where(c, a, b), JX_ERR_SHAPE, "jx_where", "[2,3]", "[4]", "do not broadcast");
  jx_clear_error();
  EXPECT(jx_where(jx_zeros(JX_BOOL, JX_SHAPE(3)), jx_zeros(JX_F32, JX_SHAPE(3)),
                  jx_zeros(JX_F32, JX_SHAPE(2, 2))),
         JX_ERR_SHAPE, "jx_where", "[2,2]");
}

static void select_n_mismatched_cases(void **state) {
  (void)state;
  jx_array *w = jx_zeros(JX_BOOL, JX_SHAPE(3));
  jx_array *c1[] = {jx_zeros(JX_F32, JX_SHAPE(3)), jx_zeros(JX_F64, JX_SHAPE(3))};
  EXPECT(jx_select_n(w, 2, c1), JX_ERR_SHAPE, "jx_select_n", "f32[3]", "f64[3]", "case 1");
  jx_clear_error();
  jx_array *c2[] = {jx_zeros(JX_F32, JX_SHAPE(3)), jx_zeros(JX_F32, JX_SHAPE(4))};
  EXPECT(jx_select_n(w, 2, c2), JX_ERR_SHAPE, "jx_select_n", "f32[4]");
  jx_clear_error();
  jx_array *c3[] = {c1[0], c1[0], c1[0]};
  EXPECT(jx_select_n(w, 3, c3), JX_ERR_INVALID_ARGUMENT, "jx_select_n", "bool", "given 3");
  jx_clear_error();
  EXPECT(jx_select_n(jx_zeros(JX_F32, JX_SHAPE(3)), 2, c3), JX_ERR_DTYPE, "jx_select_n",
         "`which` is f32[3]");
  jx_clear_error();
  EXPECT(jx_select_n(jx_zeros(JX_I32, JX_SHAPE(2)), 2, c3), JX_ERR_SHAPE, "jx_select_n", "i32[2]",
         "f32[3]");
}

static void clamp_mismatches(void **state) {
  (void)state;
  jx_array *x = jx_zeros(JX_F32, JX_SHAPE(3));
  EXPECT(jx_clamp(jx_zeros(JX_F64, JX_SHAPE()), x, jx_zeros(JX_F32, JX_SHAPE())), JX_ERR_DTYPE,
         "jx_clamp", "lo is f64[]", "f32[3]");
  jx_clear_error();
  EXPECT(jx_clamp(jx_zeros(JX_F32, JX_SHAPE()), x, jx_zeros(JX_F32, JX_SHAPE(2))), JX_ERR_SHAPE,
         "jx_clamp", "hi f32[2]");
}

static void astype_invalid_dtype(void **state) {
  (void)state;
  EXPECT(jx_astype(jx_zeros(JX_F32, JX_SHAPE(2)), (jx_dtype)99), JX_ERR_DTYPE, "jx_astype",
         "invalid dtype 99");
  jx_clear_error();
  EXPECT(jx_bitcast_convert_type(jx_zeros(JX_F32, JX_SHAPE(2)), (jx_dtype)-1), JX_ERR_DTYPE,
         "jx_bitcast_convert_type", "invalid target dtype -1");
}

static void null_and_poison_propagate(void **state) {
  (void)state;
  EXPECT(jx_sin(NULL), JX_ERR_INVALID_ARGUMENT, "jx_sin", "argument 0 is NULL");
  jx_status first = jx_last_status();
  jx_array *p = jx_sin(NULL);
  assert_true(jx_is_poisoned(jx_where(p, p, p)));
  assert_true(jx_is_poisoned(jx_astype(p, JX_F32)));
  assert_true(jx_is_poisoned(jx_gelu(p)));
  assert_true(jx_is_poisoned(jx_clip(p, 0, 1)));
  assert_int_equal(jx_last_status(), first); /* the first error stays */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(shift_left_on_floats, setup, teardown),
      cmocka_unit_test_setup_teardown(bitwise_and_on_floats, setup, teardown),
      cmocka_unit_test_setup_teardown(population_count_on_floats_and_bool, setup, teardown),
      cmocka_unit_test_setup_teardown(bitwise_not_and_neg_dtypes, setup, teardown),
      cmocka_unit_test_setup_teardown(integer_pow_negative_on_ints, setup, teardown),
      cmocka_unit_test_setup_teardown(bitcast_with_bad_last_dim, setup, teardown),
      cmocka_unit_test_setup_teardown(where_shapes_do_not_broadcast, setup, teardown),
      cmocka_unit_test_setup_teardown(select_n_mismatched_cases, setup, teardown),
      cmocka_unit_test_setup_teardown(clamp_mismatches, setup, teardown),
      cmocka_unit_test_setup_teardown(astype_invalid_dtype, setup, teardown),
      cmocka_unit_test_setup_teardown(null_and_poison_propagate, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
