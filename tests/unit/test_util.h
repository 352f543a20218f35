/* Shared fixtures of the cmocka unit tests: every test runs in its own scope
 * with a clean error state; error checks; fixed pseudo-random operands.
 * Include after <cmocka.h> and <jx/jx.h>. Header only: each test is an
 * executable of its own. */
#ifndef JX_TESTS_UNIT_TEST_UTIL_H
#define JX_TESTS_UNIT_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

/* Asserts that the recorded error mentions `what` (printing it when not),
 * then clears it. */
static inline void assert_error_has(const char *what) {
  if (!strstr(jx_last_error(), what)) fprintf(stderr, "error was: %s\n", jx_last_error());
  assert_non_null(strstr(jx_last_error(), what));
  jx_clear_error();
}

/* xorshift64: the same sequence on every machine, from each test's own
 * nonzero seed in *state. */
static inline uint64_t test_rng_next(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

/* Uniform in [-1, 1), 53 random bits. */
static inline double test_rng_uniform(uint64_t *state) {
  return (double)(test_rng_next(state) >> 11) / 9007199254740992.0 * 2 - 1;
}

#endif
