/* Printing: jx_format gives str() of the same NumPy array (golden text from
 * tests/golden/gen_npy.py), including wrapping at 75 columns, scientific
 * notation, nan/inf padding and the "..." summary past 1000 elements. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */
#include <jx/jx.h>

#include "array/array.h"
#include "test_util.h"

#define DIR JX_TEST_DATA "/npy/print/"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = '\0';
  fclose(f);
  return s;
}

static void matches_numpy_str(void **state) {
  (void)state;
  FILE *idx = fopen(DIR "index.txt", "r");
  assert_non_null(idx);
  char name[128], path[512];
  int n = 0, bad = 0;
  while (fscanf(idx, "%127s", name) == 1) {
    snprintf(path, sizeof path, DIR "%s.npy", name);
    jx_array *a = jx_load_npy(path);
    assert_false(jx_is_poisoned(a));
    snprintf(path, sizeof path, DIR "%s.txt", name);
    char *want = slurp(path);
    assert_non_null(want);
    char *got = jx_format(a);
    if (strcmp(got, want) != 0) {
      print_error("%s:\n--- jx\n%s\n--- numpy\n%s\n", name, got, want);
      bad++;
    }
    free(got);
    free(want);
    n++;
  }
  fclose(idx);
  assert_true(n >= 50);
  assert_int_equal(bad, 0);
}

static void expect(jx_array *a, const char *want) {
  char *got = jx_format(a);
  assert_string_equal(got, want);
  free(got);
}

static void bf16_prints_like_other_floats(void **state) {
  (void)state;
  float v[3] = {1, 2, 0.1f};
  uint16_t b[3];
  for (int i = 0; i < 3; i++) b[i] = jx_f32_to_bf16(v[i]);
  expect(jx_array_from(JX_BF16, JX_SHAPE(2), b), "[1. 2.]");
  /* shortest digits that read back as the same bf16 (0.10009765625) */
  expect(jx_array_from(JX_BF16, JX_SHAPE(), b + 2), "0.1");
  expect(jx_array_from(JX_BF16, JX_SHAPE(3), b), "[1.  2.  0.1]");
}

static void special_values(void **state) {
  (void)state;
  expect(jx_poison(), "<poisoned array>");
  expect(NULL, "<null array>");
  expect(jx_scalar(JX_F32, 2.5), "2.5");
  expect(jx_scalar(JX_I32, -3), "-3");
  expect(jx_zeros(JX_BOOL, JX_SHAPE(0, 4)), "[]");
  expect(jx_eye(JX_F32, 2), "[[1. 0.]\n [0. 1.]]");
  /* a poisoned result of a bad op prints too */
  jx_array *bad = jx_add(jx_zeros(JX_F32, JX_SHAPE(2)), jx_zeros(JX_F32, JX_SHAPE(3)));
  expect(bad, "<poisoned array>");
  jx_clear_error();
}

static void print_writes_a_line(void **state) {
  (void)state;
  char path[256];
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/jx_print_test.txt", tmp ? tmp : "/tmp");
  FILE *f = fopen(path, "w+");
  assert_non_null(f);
  jx_print(jx_arange(JX_I32, 0, 3, 1), f);
  rewind(f);
  char buf[64] = {0};
  assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
  fclose(f);
  remove(path);
  assert_string_equal(buf, "[0 1 2]\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(matches_numpy_str, setup, teardown),
      cmocka_unit_test_setup_teardown(bf16_prints_like_other_floats, setup, teardown),
      cmocka_unit_test_setup_teardown(special_values, setup, teardown),
      cmocka_unit_test_setup_teardown(print_writes_a_line, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
