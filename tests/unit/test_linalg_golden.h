/* The linear algebra goldens (tests/golden/gen_linalg.py): array name of
 * case c. Include after test_util.h. */
#ifndef JX_TESTS_UNIT_TEST_LINALG_GOLDEN_H
#define JX_TESTS_UNIT_TEST_LINALG_GOLDEN_H

#include <stdio.h>

static inline jx_array *golden(const char *c, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/linalg/%s_%s.npy", JX_TEST_DATA, c, name);
  jx_array *a = jx_load_npy(path);
  check_ok(jx_last_status());
  return a;
}

#endif
