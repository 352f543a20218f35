#define _GNU_SOURCE /* mkstemps */
/* A shape whose non-zero dims multiply past the element limit is refused
 * wherever it is made, even when a zero dim makes it empty (NumPy refuses
 * the same: "array is too big"): by the constructors, by jx_load_npy, and by
 * the shape rules of ops, eagerly and under jit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
// clang-format off
#include <cmocka.h>
// clang-format on
#include <jx/jx.h>

#include "test_util.h"

#define TWO40 ((int64_t)1 << 40)
#define TWO31 ((int64_t)1 << 31)

static void constructors(void **state) {
  (void)state;
  assert_true(jx_is_poisoned(jx_zeros(JX_F32, JX_SHAPE(0, TWO40, TWO40))));
  assert_error_has("jx_zeros: the shape [0,1099511627776,1099511627776] has too many elements");
  assert_true(jx_is_poisoned(jx_full(JX_I8, JX_SHAPE(TWO40, 0, TWO40), 1)));
  assert_error_has("too many elements");
  assert_true(jx_is_poisoned(jx_array_from(JX_F32, JX_SHAPE(TWO40, TWO40, 0), NULL)));
  assert_error_has("too many elements");
  /* empty shapes within the limit are fine, and so is their reduction */
  jx_array *z = jx_zeros(JX_F32, JX_SHAPE(0, TWO31, 2));
  check_ok(jx_last_status());
  jx_array *s = jx_sum(z, JX_AXES(1), 0);
  check_ok(jx_last_status());
  assert_int_equal(jx_size(s), 0);
}

/* A .npy file of f32 with the given shape text and no data. */
static void write_npy(const char *path, const char *shape) {
  char dict[128];
  int n =
      snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shape);
  int total = (10 + n + 1 + 63) / 64 * 64, hlen = total - 10;
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc(hlen & 0xff, f);
  fputc(hlen >> 8, f);
  fputs(dict, f);
  for (int i = 10 + n; i < total - 1; i++) fputc(' ', f);
  fputc('\n', f);
  fclose(f);
}

static void npy_files(void **state) {
  (void)state;
  char path[512];
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/shape_overflow_XXXXXX.npy", tmp ? tmp : "/tmp");
  int fd = mkstemps(path, 4);
  assert_true(fd >= 0);
  close(fd);
  write_npy(path, "(0, 1099511627776, 1099511627776)");
  assert_true(jx_is_poisoned(jx_load_npy(path)));
  assert_error_has("has too many elements");
  write_npy(path, "(0, 3)"); /* an ordinary empty array still loads */
  jx_array *a = jx_load_npy(path);
  check_ok(jx_last_status());
  assert_int_equal(jx_shape_of(a).rank, 2);
  assert_int_equal(jx_shape_of(a).dims[1], 3);
  unlink(path);
}

/* [2^31, 0] @ [0, 2^31] is a non-empty [2^31, 2^31] (2^62 elements): the
 * rule's output is refused before anything is allocated or written. */
static void matmul_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_matmul(in[0], in[1]);
}

static void shape_rules(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(TWO31, 0)), *b = jx_zeros(JX_F32, JX_SHAPE(0, TWO31));
  check_ok(jx_last_status());
  assert_true(jx_is_poisoned(jx_matmul(a, b)));
  assert_error_has("the result [2147483648,2147483648] has too many elements");
  jx_array *z = jx_zeros(JX_F32, JX_SHAPE(0, 1));
  assert_true(jx_is_poisoned(jx_broadcast_to(z, JX_SHAPE(0, TWO40, TWO40))));
  assert_error_has("too many elements");
  jx_fn *f = jx_fn_create("matmul", 2, 1, matmul_body, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *in[2] = {a, b}, *out[1];
  assert_int_equal(jx_call(jf, in, out), JX_ERR_SHAPE);
  assert_true(jx_is_poisoned(out[0]));
  assert_error_has("too many elements");
  jx_fn_release(jf);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(constructors, setup, teardown),
      cmocka_unit_test_setup_teardown(npy_files, setup, teardown),
      cmocka_unit_test_setup_teardown(shape_rules, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
