#include "kernel_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/hash.h"
#include "render_c.h"

/* the placeholder has the length of a real name, so the hash is written over it */
static const char placeholder[] = "jx_kernel_0000000000000000";

/* Appends text to t; JX_OK, or the out-of-memory error recorded. */
static jx_status append(jx_kernel_tu *t, const char *text) {
  jx_strbuf_append(&t->src, text, strlen(text));
  t->text = t->src.text;
  return jx_strbuf_status(&t->src, "jit");
}

jx_status jx_kernel_tu_init(jx_kernel_tu *t) {
  memset(t, 0, sizeof *t);
  char *prelude = jx_render_c_prelude();
  if (!prelude) return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  jx_status st = append(t, prelude);
  free(prelude);
  return st;
}

static int known(const jx_kernel_tu *t, uint64_t h) {
  for (int k = 0; k < t->n; k++)
    if (t->hashes[k] == h) return 1;
  return 0;
}

int jx_kernel_tu_add(jx_kernel_tu *t, const jx_program *p, const jx_fusion_group *groups, int ng,
                     char (*names)[JX_KERNEL_NAME_CAP]) {
  int nkernels = 0;
  for (int k = 0; k < ng; k++) {
    if (names) names[k][0] = '\0';
    if (!jx_fusion_group_is_kernel(&groups[k])) continue;
    char *src = jx_render_c(p, &groups[k], placeholder);
    if (!src) return -1;
    uint64_t h = jx_hash_str(JX_HASH_SEED, src);
    char name[JX_KERNEL_NAME_CAP];
    snprintf(name, sizeof name, "jx_kernel_%016llx", (unsigned long long)h);
    char *at = strstr(src, placeholder); /* the signature's name */
    if (at) memcpy(at, name, strlen(placeholder));
    if (names) memcpy(names[k], name, sizeof name);
    nkernels++;
    if (!known(t, h)) {
      if (t->n == t->hcap) {
        int cap = t->hcap ? 2 * t->hcap : 16;
        uint64_t *grown = realloc(t->hashes, sizeof *grown * (size_t)cap);
        if (!grown) {
          free(src);
          jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
          return -1;
        }
        t->hashes = grown;
        t->hcap = cap;
      }
      if (append(t, src)) {
        free(src);
        return -1;
      }
      t->hashes[t->n++] = h;
    }
    free(src);
  }
  return nkernels;
}

void jx_kernel_tu_free(jx_kernel_tu *t) {
  jx_strbuf_free(&t->src);
  free(t->hashes);
  memset(t, 0, sizeof *t);
}
