#define _GNU_SOURCE /* fileno, dup */
/* Memory without scopes: arrays made with no scope open live until
 * jx_shutdown, and once 10,000 of them are held jx warns once per process,
 * naming jx_scope_begin/jx_scope_end; arrays in scopes never count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
// clang-format off
#include <cmocka.h>
// clang-format on
#include <jx/jx.h>

#include "test_util.h"

static FILE *captured;
static int saved_stderr = -1;

static void capture_begin(void) {
  fflush(stderr);
  captured = tmpfile();
  assert_non_null(captured);
  saved_stderr = dup(2);
  dup2(fileno(captured), 2);
}

/* What was written to stderr since capture_begin (static buffer). */
static const char *capture_end(void) {
  static char text[8192];
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  rewind(captured);
  size_t n = fread(text, 1, sizeof text - 1, captured);
  text[n] = 0;
  fclose(captured);
  return text;
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

static void make_scalars(int n) {
  for (int i = 0; i < n; i++) jx_scalar(JX_F32, i);
}

static void scoped_loops_never_warn(void **state) {
  (void)state;
  capture_begin();
  for (int step = 0; step < 3; step++) {
    jx_scope_begin();
    make_scalars(12000);
    jx_scope_end();
  }
  assert_int_equal(count(capture_end(), "warning"), 0);
}

static void unscoped_arrays_warn_once(void **state) {
  (void)state;
  capture_begin();
  make_scalars(9990);
  const char *text = capture_end();
  assert_int_equal(count(text, "warning"), 0);
  capture_begin();
  make_scalars(20);
  make_scalars(10000);
  text = capture_end();
  if (count(text, "jx: warning:") != 1) fprintf(stderr, "stderr was: %s\n", text);
  assert_int_equal(count(text, "jx: warning:"), 1);
  assert_non_null(strstr(text, "arrays (0 MiB) are held outside any scope"));
  assert_non_null(strstr(text, "jx_scope_begin() ... jx_scope_end()"));
  check_ok(jx_last_status());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scoped_loops_never_warn),
      cmocka_unit_test(unscoped_arrays_warn_once),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
