#include "error.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { MESSAGE_CAP = 2048 };

enum { CONTEXT_CAP = 16 };

/* Errors belong to calls. A located public call entered with no other open
 * (depth 0 -> 1) starts a new call generation, and the first error recorded
 * during it is that call's (call_code). Inside a call (depth > 0)
 * jx_last_status and jx_error_pending report only the current call's
 * error, so an error left recorded by an earlier, finished call never makes
 * a later valid call fail: every internal "did this fail?" check reads
 * them. At depth 0 (the caller, after its calls) they report the thread's
 * first recorded error, kept until jx_clear_error. */
typedef struct {
  uint64_t serial;
  uint64_t gen;        /* the current call's generation */
  jx_status call_code; /* the current call's first error (when call_gen == gen) */
  uint64_t call_gen;
  uint64_t code_gen;     /* the generation in which `code` was recorded */
  const char *call_site; /* the caller's file:line of the open outermost located call */
  int ncontext;
  const char *context_transform[CONTEXT_CAP], *context_fn[CONTEXT_CAP];
  jx_status code;
  char message[MESSAGE_CAP];
  int depth;         /* how many located calls are open on this thread */
  int pending_depth; /* the depth whose leave completes the message; -1 if none */
} error_state;

static _Thread_local error_state tls = {.code = JX_OK, .pending_depth = -1};
/* Process-wide, read by every thread's calls: set and read atomically. */
static jx_error_handler handler; /* set once at start-up by the program */
static void (*location_hook)(const char *where);

void jx_set_location_hook(void (*hook)(const char *where)) {
  __atomic_store_n(&location_hook, hook, __ATOMIC_RELEASE);
}

static void complete(void) {
  jx_error_handler h = __atomic_load_n(&handler, __ATOMIC_ACQUIRE);
  if (h) h(tls.code, tls.message);
}

uint64_t jx_error_serial(void) { return tls.serial; }

void jx_error_context_push(const char *transform, const char *fn_name) {
  if (tls.ncontext < CONTEXT_CAP) {
    tls.context_transform[tls.ncontext] = transform;
    tls.context_fn[tls.ncontext] = fn_name;
  }
  tls.ncontext++;
}

void jx_error_context_pop(void) {
  if (tls.ncontext > 0) tls.ncontext--;
}

/* " (in grad ∘ vmap of 'f')": the transformations outermost first, and the
 * function they were applied to. */
static void append_context(void) {
  int n = tls.ncontext < CONTEXT_CAP ? tls.ncontext : CONTEXT_CAP;
  if (n == 0) return;
  size_t len = strlen(tls.message);
  int w = snprintf(tls.message + len, MESSAGE_CAP - len, " (in ");
  for (int i = 0; i < n && w > 0; i++) {
    len = strlen(tls.message);
    w = snprintf(tls.message + len, MESSAGE_CAP - len, "%s%s", i ? " \u2218 " : "",
                 tls.context_transform[i]);
  }
  len = strlen(tls.message);
  snprintf(tls.message + len, MESSAGE_CAP - len, " of '%s')", tls.context_fn[n - 1]);
}

jx_status jx_error_fail_call(jx_status code) {
  if (tls.call_gen != tls.gen || tls.call_code == JX_OK) {
    tls.call_code = code;
    tls.call_gen = tls.gen;
  }
  return code;
}

static jx_status record(jx_status code, const char *fmt, va_list ap) {
  tls.serial++;
  jx_error_fail_call(code);
  if (tls.code != JX_OK) return code;
  tls.code = code;
  tls.code_gen = tls.gen;
  vsnprintf(tls.message, MESSAGE_CAP, fmt, ap);
  append_context();
  if (tls.depth == 0)
    complete();
  else
    tls.pending_depth = tls.depth;
  return code;
}

jx_status jx_error_set(jx_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  jx_status st = record(code, fmt, ap);
  va_end(ap);
  return st;
}

jx_status jx_report_error(jx_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  jx_status st = record(code, fmt, ap);
  va_end(ap);
  return st;
}

/* The error that counts for the code asking: the current call's inside one,
 * the recorded one outside. */
static jx_status current_code(void) {
  if (tls.depth == 0) return tls.code;
  return tls.call_gen == tls.gen ? tls.call_code : JX_OK;
}

int jx_error_pending(void) { return current_code() != JX_OK; }

const char *jx_last_error(void) { return tls.message; }
jx_status jx_last_status(void) { return current_code(); }

/* Inside a call (code of jx that swallows an error it expected) only that
 * call's error is cleared; an earlier call's stays for the caller. */
void jx_clear_error(void) {
  tls.call_code = JX_OK;
  if (tls.depth > 0 && tls.code_gen != tls.gen) return;
  tls.code = JX_OK;
  tls.message[0] = '\0';
  tls.pending_depth = -1;
}

void jx_set_error_handler(jx_error_handler fn) { __atomic_store_n(&handler, fn, __ATOMIC_RELEASE); }

void jx_error_abort(jx_status code, const char *message) {
  fprintf(stderr, "jx error %d: %s\n", code, message);
  abort();
}

void jx_loc_enter_(void) {
  if (tls.depth++ == 0) {
    tls.gen++;
    tls.call_site = NULL;
  }
}

void jx_loc_enter_at_(const char *where) {
  if (tls.depth == 0) {
    jx_loc_enter_();
    tls.call_site = where;
  } else {
    tls.depth++;
  }
}

const char *jx_error_call_site(void) { return tls.depth > 0 ? tls.call_site : NULL; }

/* Prepends "where: " to the message recorded inside this located call. */
static void leave(const char *where) {
  void (*hook)(const char *) = __atomic_load_n(&location_hook, __ATOMIC_ACQUIRE);
  if (hook) hook(where);
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
int64_t jx_loc_leave_i64_(const char *where, int64_t result) {
  leave(where);
  return result;
}
void *jx_loc_leave_ptr_(const char *where, void *result) {
  leave(where);
  return result;
}
void jx_loc_leave_void_(const char *where) { leave(where); }

void jx_assert_fail_(const char *file, int line, const char *cond) {
  fprintf(stderr, "jx internal error at %s:%d: assertion '%s' failed\n", file, line, cond);
  abort();
}
