/* The growing text buffer (src/base/strbuf.h): text built by thousands of
 * appends equals the same text printed at once, and a failed allocation is
 * sticky and reported once, as out of memory, naming the owner. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "base/strbuf.h"
#include "test_util.h"

/* The oracle: snprintf of each piece into a fixed array. */
static void many_appends_equal_one_print(void **state) {
  (void)state;
  static char want[1 << 17];
  size_t at = 0;
  jx_strbuf b = JX_STRBUF_INIT;
  for (int i = 0; i < 5000; i++) {
    /* pieces of growing length cross every capacity the buffer doubles to */
    at += (size_t)snprintf(want + at, sizeof want - at, "x%d = %.*s;\n", i, i % 17,
                           "abcdefghijklmnopq");
    jx_strbuf_appendf(&b, "x%d = %.*s;\n", i, i % 17, "abcdefghijklmnopq");
    if (i % 100 == 0) {
      memcpy(want + at, "[\0raw]", 6); /* n bytes, a NUL among them */
      jx_strbuf_append(&b, "[\0raw]", 6);
      at += 6;
      want[at] = '\0';
    }
  }
  assert_int_equal(b.len, at);
  assert_memory_equal(b.text, want, at + 1);
  check_ok(jx_strbuf_status(&b, "test"));
  char *text = jx_strbuf_take(&b, "test");
  assert_non_null(text);
  assert_null(b.text); /* handed over */
  assert_int_equal(b.len, 0);
  assert_memory_equal(text, want, at + 1);
  free(text);
}

static void empty_buffer_takes_an_empty_string(void **state) {
  (void)state;
  jx_strbuf b;
  jx_strbuf_init(&b);
  jx_strbuf_appendf(&b, "%s", "");
  char *text = jx_strbuf_take(&b, "test");
  assert_non_null(text);
  assert_string_equal(text, "");
  free(text);
  jx_strbuf_free(&b); /* after take: nothing to free, no double free */
}

/* A size that cannot be allocated fails the buffer without touching its
 * text; later appends are ignored and taking it reports out of memory. */
static void failure_is_sticky_and_reported_once(void **state) {
  (void)state;
  jx_strbuf b = JX_STRBUF_INIT;
  jx_strbuf_appendf(&b, "kept %d", 1);
  jx_strbuf_append(&b, "never", SIZE_MAX / 2);
  assert_true(b.failed);
  assert_string_equal(b.text, "kept 1");
  jx_strbuf_appendf(&b, " ignored %d", 2);
  assert_int_equal(b.len, strlen("kept 1"));
  assert_int_equal(jx_last_status(), JX_OK); /* nothing recorded until the owner asks */
  assert_int_equal(jx_strbuf_status(&b, "render"), JX_ERR_OUT_OF_MEMORY);
  assert_null(jx_strbuf_take(&b, "render"));
  assert_int_equal(jx_last_status(), JX_ERR_OUT_OF_MEMORY);
  assert_string_equal(jx_last_error(), "render: out of memory");
  assert_null(b.text);
  jx_clear_error();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(many_appends_equal_one_print, setup, teardown),
      cmocka_unit_test_setup_teardown(empty_buffer_takes_an_empty_string, setup, teardown),
      cmocka_unit_test_setup_teardown(failure_is_sticky_and_reported_once, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
