/* A growing text buffer: the printer's program text, the renderer's kernels,
 * a translation unit of kernels. Appends never fail one by one: the first
 * allocation that fails marks the buffer failed, later appends do nothing,
 * and the owner reports it once, as an out-of-memory error, when it takes
 * the text or checks the status. (base/str_append.h is the other thing:
 * messages truncated into a fixed array, with no allocation at all.)
 *
 *   jx_strbuf b = JX_STRBUF_INIT;
 *   jx_strbuf_appendf(&b, "x%d = %s;\n", k, expr);
 *   char *text = jx_strbuf_take(&b, "render"); // caller frees; NULL on OOM
 *
 * Not thread safe: one buffer belongs to one thread at a time. */
#ifndef JX_SRC_BASE_STRBUF_H
#define JX_SRC_BASE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

#include <jx/base.h>

typedef struct {
  char *text; /* NUL-terminated; NULL until something is appended; owned */
  size_t len; /* bytes of text, not counting the NUL */
  size_t cap; /* bytes allocated at text */
  int failed; /* an allocation failed: text is incomplete, appends are ignored */
} jx_strbuf;

#define JX_STRBUF_INIT                                                                             \
  { 0 }

void jx_strbuf_init(jx_strbuf *b);

/* Appends printf-formatted text. */
void jx_strbuf_appendf(jx_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jx_strbuf_vappendf(jx_strbuf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Appends the n bytes at s (which need not be NUL-terminated). */
void jx_strbuf_append(jx_strbuf *b, const char *s, size_t n);

/* JX_OK, or (the buffer failed) JX_ERR_OUT_OF_MEMORY with "<who>: out of
 * memory" recorded unless an error already is. */
jx_status jx_strbuf_status(const jx_strbuf *b, const char *who);

/* Hands the text over (the caller frees it; "" when nothing was appended)
 * and leaves b empty; NULL, with the error jx_strbuf_status records, when
 * the buffer failed. */
char *jx_strbuf_take(jx_strbuf *b, const char *who);

/* Frees the text and leaves b empty. */
void jx_strbuf_free(jx_strbuf *b);

#endif
