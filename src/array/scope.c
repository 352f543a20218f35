/* Scopes: a per-thread stack of lists of arrays, each holding one reference
 * that is dropped when the scope ends. Frame 0 is the root scope, freed by
 * jx_thread_end (or jx_shutdown). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "../base/error.h"
#include "array.h"

typedef struct {
  jx_array **items;
  size_t len, cap;
} frame;

static _Thread_local frame *frames;
static _Thread_local int depth, frames_cap; /* depth = number of frames, root included */

/* Arrays made with no scope open live until jx_shutdown: a loop written
 * without jx_scope_begin/end grows without bound. Once the root scope of a
 * thread holds this many arrays or bytes, one warning (per process) names
 * the pattern to use. */
enum { ROOT_WARN_ARRAYS = 10000 };
#define ROOT_WARN_BYTES ((size_t)64 << 20)
static _Thread_local size_t root_bytes; /* of the root scope's arrays, as adopted */
static atomic_int root_warned;

static void note_root_growth(const frame *root, const jx_array *a) {
  if (a->buf) root_bytes += a->buf->nbytes;
  if (root->len < ROOT_WARN_ARRAYS && root_bytes < ROOT_WARN_BYTES) return;
  if (atomic_exchange(&root_warned, 1)) return;
  fprintf(stderr,
          "jx: warning: %zu arrays (%zu MiB) are held outside any scope and live until "
          "jx_shutdown; wrap each iteration of a loop in jx_scope_begin() ... jx_scope_end(), "
          "with jx_keep/jx_release for what must outlive it (see jx/jx.h)\n",
          root->len, root_bytes >> 20);
}

static void ensure_root(void) {
  if (depth == 0) {
    if (frames_cap == 0) {
      frames = calloc(8, sizeof *frames);
      JX_ASSERT(frames);
      frames_cap = 8;
    }
    depth = 1;
  }
}

void jx_scope_begin(void) {
  ensure_root();
  if (depth == frames_cap) {
    frame *f = realloc(frames, 2 * (size_t)frames_cap * sizeof *frames);
    JX_ASSERT(f);
    for (int i = frames_cap; i < 2 * frames_cap; i++) f[i] = (frame){0};
    frames = f;
    frames_cap *= 2;
  }
  frames[depth].len = 0;
  depth++;
}

static void drain(frame *f) {
  for (size_t i = 0; i < f->len; i++) jx_release(f->items[i]);
  f->len = 0;
  if (f == frames) root_bytes = 0;
}

void jx_scope_end(void) {
  if (depth <= 1) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_scope_end: no scope is open");
    return;
  }
  depth--;
  drain(&frames[depth]);
}

jx_array *jx_scope_own(jx_array *a) {
  if (a && !a->poisoned && !a->released) jx_scope_adopt(a);
  return a;
}

void jx_scope_adopt(jx_array *a) {
  ensure_root();
  frame *f = &frames[depth - 1];
  if (f->len == f->cap) {
    size_t cap = f->cap ? 2 * f->cap : 64;
    jx_array **items = realloc(f->items, cap * sizeof *items);
    JX_ASSERT(items);
    f->items = items;
    f->cap = cap;
  }
  f->items[f->len++] = a;
  if (depth == 1) note_root_growth(f, a);
}

int jx_scope_release_now(jx_array *a) {
  if (depth == 0) return 0;
  frame *f = &frames[depth - 1];
  for (size_t i = f->len; i-- > 0;)
    if (f->items[i] == a) {
      f->items[i] = f->items[--f->len];
      jx_release(a);
      return 1;
    }
  return 0;
}

void (*jx_before_shutdown)(void);

void jx_thread_end(void) {
  while (depth > 1) jx_scope_end();
  if (depth == 1) drain(&frames[0]);
  for (int i = 0; i < frames_cap; i++) free(frames[i].items);
  free(frames);
  frames = NULL;
  frames_cap = depth = 0;
}

void jx_shutdown(void) {
  void (*before)(void) = __atomic_load_n(&jx_before_shutdown, __ATOMIC_ACQUIRE);
  if (before) before();
  jx_thread_end();
  jx_buffer_cache_clear();
  jx_array_quarantine_clear();
}
