/* Shared fixtures of the cmocka unit tests: every test runs in its own scope
 * with a clean error state. Include after <cmocka.h> and <jx/jx.h>. */
#ifndef JX_TESTS_UNIT_TEST_UTIL_H
#define JX_TESTS_UNIT_TEST_UTIL_H

static inline int setup(void **state) {
  (void)state;
  jx_clear_error();
  jx_scope_begin();
  return 0;
}

static inline int teardown(void **state) {
  (void)state;
  jx_scope_end();
  jx_clear_error();
  return 0;
}

/* Asserts success, printing the error first so a failure says why. */
static inline void check_ok(jx_status st) {
  if (st) fprintf(stderr, "%s\n", jx_last_error());
  assert_int_equal(st, JX_OK);
}

#endif
