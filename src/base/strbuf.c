#include "strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

void jx_strbuf_init(jx_strbuf *b) { memset(b, 0, sizeof *b); }

/* Room for `more` bytes and the NUL after text; 0 (and the buffer failed)
 * when it cannot be had. Doubles, so n appends copy O(total) bytes. */
static int reserve(jx_strbuf *b, size_t more) {
  if (b->failed) return 0;
  if (more < b->cap && b->len < b->cap - more) return 1; /* len + more + 1 <= cap */
  const size_t half = (size_t)-1 / 2;                    /* so that the doubled size fits */
  if (b->len >= half || more >= half - b->len) {
    b->failed = 1;
    return 0;
  }
  size_t cap = 2 * (b->len + more + 1);
  if (cap < 256) cap = 256;
  char *grown = realloc(b->text, cap);
  if (!grown) {
    b->failed = 1;
    return 0;
  }
  if (!b->text) grown[0] = '\0';
  b->text = grown;
  b->cap = cap;
  return 1;
}

void jx_strbuf_vappendf(jx_strbuf *b, const char *fmt, va_list ap) {
  if (b->failed) return;
  va_list again;
  va_copy(again, ap);
  size_t room = b->text ? b->cap - b->len : 0;
  int n = vsnprintf(b->text ? b->text + b->len : NULL, room, fmt, ap);
  if (n >= 0 && (size_t)n >= room && reserve(b, (size_t)n))
    n = vsnprintf(b->text + b->len, b->cap - b->len, fmt, again);
  va_end(again);
  if (n >= 0 && !b->failed)
    b->len += (size_t)n;
  else if (b->text)
    b->text[b->len] = '\0'; /* an encoding error appends nothing */
}

void jx_strbuf_appendf(jx_strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  jx_strbuf_vappendf(b, fmt, ap);
  va_end(ap);
}

void jx_strbuf_append(jx_strbuf *b, const char *s, size_t n) {
  if (!reserve(b, n)) return;
  memcpy(b->text + b->len, s, n);
  b->len += n;
  b->text[b->len] = '\0';
}

jx_status jx_strbuf_status(const jx_strbuf *b, const char *who) {
  return b->failed ? jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", who) : JX_OK;
}

char *jx_strbuf_take(jx_strbuf *b, const char *who) {
  if (!b->failed && !b->text) reserve(b, 0);
  if (jx_strbuf_status(b, who)) {
    jx_strbuf_free(b);
    return NULL;
  }
  char *text = b->text;
  jx_strbuf_init(b);
  return text;
}

void jx_strbuf_free(jx_strbuf *b) {
  free(b->text);
  jx_strbuf_init(b);
}
