#include "error.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { MESSAGE_CAP = 2048 };

typedef struct {
  jx_status code;
  char message[MESSAGE_CAP];
  int depth;          /* how many located calls are open on this thread */
  int pending_depth;  /* the depth whose leave completes the message; -1 if none */
} error_state;

static _Thread_local error_state tls = {JX_OK, "", 0, -1};
static jx_error_handler handler; /* set once at start-up by the program */

static void complete(void) {
  if (handler) handler(tls.code, tls.message);
}

jx_status jx_error_set(jx_status code, const char *fmt, ...) {
  if (tls.code != JX_OK) return code;
  tls.code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tls.message, MESSAGE_CAP, fmt, ap);
  va_end(ap);
  if (tls.depth == 0)
    complete();
  else
    tls.pending_depth = tls.depth;
  return code;
}

int jx_error_pending(void) { return tls.code != JX_OK; }

const char *jx_last_error(void) { return tls.message; }
jx_status jx_last_status(void) { return tls.code; }

void jx_clear_error(void) {
  tls.code = JX_OK;
  tls.message[0] = '\0';
  tls.pending_depth = -1;
}

void jx_set_error_handler(jx_error_handler fn) { handler = fn; }

void jx_error_abort(jx_status code, const char *message) {
  fprintf(stderr, "jx error %d: %s\n", code, message);
  abort();
}

void jx_loc_enter_(void) { tls.depth++; }

/* Prepends "where: " to the message recorded inside this located call. */
static void leave(const char *where) {
  if (tls.pending_depth == tls.depth) {
    size_t wl = strlen(where), ml = strlen(tls.message);
    if (wl + 2 + ml >= MESSAGE_CAP) ml = MESSAGE_CAP - wl - 3;
    memmove(tls.message + wl + 2, tls.message, ml);
    memcpy(tls.message, where, wl);
    tls.message[wl] = ':';
    tls.message[wl + 1] = ' ';
    tls.message[wl + 2 + ml] = '\0';
    tls.pending_depth = -1;
    tls.depth--;
    complete();
    return;
  }
  tls.depth--;
}

jx_array *jx_loc_leave_(const char *where, jx_array *result) {
  leave(where);
  return result;
}
jx_status jx_loc_leave_status_(const char *where, jx_status result) {
  leave(where);
  return result;
}
double jx_loc_leave_double_(const char *where, double result) {
  leave(where);
  return result;
}

void jx_assert_fail_(const char *file, int line, const char *cond) {
  fprintf(stderr, "jx internal error at %s:%d: assertion '%s' failed\n", file, line, cond);
  abort();
}
