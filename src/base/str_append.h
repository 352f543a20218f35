/* Appending formatted text to a fixed buffer, for error messages built in
 * pieces (the names of the processes that did not arrive, ...). Header
 * only: the MPI plugin, a library of its own, uses it too. */
#ifndef JX_SRC_BASE_STR_APPEND_H
#define JX_SRC_BASE_STR_APPEND_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Appends to the NUL-terminated text in buf (cap bytes), truncating. */
static inline void jx_str_append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void jx_str_append(char *buf, size_t cap, const char *fmt, ...) {
  size_t len = strlen(buf);
  if (len + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, cap - len, fmt, ap);
  va_end(ap);
}

#endif
