/* Errors: messages name the op, the shapes and the caller's file:line;
 * poisoned arrays propagate without crashing. */
#include <jx/jx.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>
#include "test_util.h"

static void broadcast_mismatch_names_op_shapes_and_line(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(3)), *b = jx_zeros(JX_F32, JX_SHAPE(4));
  int line = __LINE__ + 1;
  jx_array *c = jx_add(a, b);
  assert_true(jx_is_poisoned(c));
  assert_int_equal(jx_last_status(), JX_ERR_SHAPE);
  char where[64];
  snprintf(where, sizeof where, "test_errors.c:%d: jx_add:", line);
  assert_non_null(strstr(jx_last_error(), where));
  assert_non_null(strstr(jx_last_error(), "[3]"));
  assert_non_null(strstr(jx_last_error(), "[4]"));
}

static void poison_propagates_and_first_error_is_kept(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(3)), *b = jx_zeros(JX_F32, JX_SHAPE(2, 2));
  int line = __LINE__ + 1;
  jx_array *bad = jx_mul(a, b);
  jx_array *worse = jx_sub(jx_add(bad, a), jx_mul(bad, bad));
  assert_true(jx_is_poisoned(worse));
  char where[64];
  snprintf(where, sizeof where, "test_errors.c:%d: jx_mul:", line);
  assert_non_null(strstr(jx_last_error(), where));
  assert_int_equal(jx_size(worse), 1); /* a poisoned array reads as a scalar shape */
  double v = 0;
  assert_int_equal(jx_read(worse, &v, sizeof v), JX_ERR_POISONED);
  assert_int_equal(jx_last_status(), JX_ERR_SHAPE); /* the first error stays */
  assert_non_null(strstr(jx_last_error(), where));
}

static void null_argument_is_an_error(void **state) {
  (void)state;
  jx_array *c = jx_add(NULL, jx_zeros(JX_F32, JX_SHAPE(1)));
  assert_true(jx_is_poisoned(c));
  assert_int_equal(jx_last_status(), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "argument 0 is NULL"));
}

static void clear_error_resets(void **state) {
  (void)state;
  jx_add(jx_zeros(JX_F32, JX_SHAPE(2)), jx_zeros(JX_F32, JX_SHAPE(3)));
  assert_int_not_equal(jx_last_status(), JX_OK);
  jx_clear_error();
  assert_int_equal(jx_last_status(), JX_OK);
  assert_string_equal(jx_last_error(), "");
}

static void shape_too_long_is_rejected(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1));
  assert_true(jx_is_poisoned(a));
  assert_non_null(strstr(jx_last_error(), "more than 8 dimensions"));
}

static jx_status seen_code;
static char seen_message[512];
static void collect(jx_status code, const char *message) {
  seen_code = code;
  snprintf(seen_message, sizeof seen_message, "%s", message);
}

static void handler_sees_complete_message(void **state) {
  (void)state;
  jx_set_error_handler(collect);
  jx_sub(jx_zeros(JX_F32, JX_SHAPE(2)), jx_zeros(JX_F32, JX_SHAPE(5)));
  jx_set_error_handler(NULL);
  assert_int_equal(seen_code, JX_ERR_SHAPE);
  assert_non_null(strstr(seen_message, "test_errors.c:"));
  assert_non_null(strstr(seen_message, "jx_sub"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(broadcast_mismatch_names_op_shapes_and_line, setup, teardown),
      cmocka_unit_test_setup_teardown(poison_propagates_and_first_error_is_kept, setup, teardown),
      cmocka_unit_test_setup_teardown(null_argument_is_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(clear_error_resets, setup, teardown),
      cmocka_unit_test_setup_teardown(shape_too_long_is_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(handler_sees_complete_message, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
