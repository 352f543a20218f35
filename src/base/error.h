/* Internal error recording. Ops call jx_error_set with a message that names
 * the op and its operands; the public location macros (base.h) add the
 * caller's file:line once the outermost located call returns. Only the first
 * error of a thread is kept until jx_clear_error. Inside a located call,
 * jx_last_status and jx_error_pending see only the errors of that call (an
 * error an earlier call left recorded does not count), so code inside jx
 * judges "did this fail?" with them. */
#ifndef JX_SRC_BASE_ERROR_H
#define JX_SRC_BASE_ERROR_H

#include <jx/base.h>

/* Records code and the printf-formatted message unless an error is already
 * recorded; returns code either way, so callers can `return jx_error_set(...)`. */
jx_status jx_error_set(jx_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int jx_error_pending(void); /* 1 while the current call has an error (see above) */
/* Marks the current call failed with code without recording a message (an
 * input that carries an earlier error: that error's message stays the one
 * kept); returns code. */
jx_status jx_error_fail_call(jx_status code);

/* Counts every jx_error_set call on this thread (recorded or not), so a
 * caller can tell whether anything failed during a stretch of code. */
uint64_t jx_error_serial(void);

/* The chain of transformations being applied, for messages: while a context
 * is pushed, recorded errors end with "(in grad ∘ vmap of 'f')". */
void jx_error_context_push(const char *transform, const char *fn_name);
void jx_error_context_pop(void);

/* The caller's "file:line" of the located public call now running (the
 * outermost one), or NULL outside any: where the arrays it makes come from. */
const char *jx_error_call_site(void);

/* Called with the caller's "file:line" each time a located public call
 * returns (the tracer uses it to tag the equations the call recorded). */
void jx_set_location_hook(void (*hook)(const char *where));

/* Aborts with file:line for a broken invariant of jx itself (never for user input). */
#define JX_ASSERT(cond)                                                                            \
  do {                                                                                             \
    if (!(cond)) jx_assert_fail_(__FILE__, __LINE__, #cond);                                       \
  } while (0)
_Noreturn void jx_assert_fail_(const char *file, int line, const char *cond);

#endif
