/* What a call writes to stderr, for tests of JX_LOG_COMPILES messages.
 * Include after <cmocka.h> and <jx/jx.h>, with _GNU_SOURCE defined first
 * (dup, dup2 and fileno are POSIX). */
#ifndef JX_TESTS_UNIT_TEST_CAPTURE_H
#define JX_TESTS_UNIT_TEST_CAPTURE_H

#include <stdio.h>
#include <unistd.h>

/* Runs fn with stderr sent to a file; returns what was written (static). */
static const char *captured(jx_status (*fn)(void *), void *ctx, jx_status *st) {
  static char buf[4096];
  fflush(stderr);
  FILE *tmp = tmpfile();
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  *st = fn(ctx);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t n = fread(buf, 1, sizeof buf - 1, tmp);
  buf[n] = 0;
  fclose(tmp);
  return buf;
}

#endif
