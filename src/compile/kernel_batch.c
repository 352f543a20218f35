#include "kernel_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/hash.h"

/* Appends text to t; JX_OK, or the out-of-memory error recorded. */
static jx_status append(jx_kernel_tu *t, const char *text) {
  jx_strbuf_append(&t->src, text, strlen(text));
  t->text = t->src.text;
  return jx_strbuf_status(&t->src, "jit");
}

jx_status jx_kernel_tu_init_dialect(jx_kernel_tu *t, const jx_dialect *d, const char *prefix) {
  memset(t, 0, sizeof *t);
  t->dialect = d;
  t->prefix = prefix;
  if (strlen(prefix) + 17 > JX_KERNEL_NAME_CAP)
    return jx_error_set(JX_ERR_INTERNAL, "jit: kernel name prefix '%s' is too long", prefix);
  char *prelude = jx_render_prelude(d);
  if (!prelude) return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  jx_status st = append(t, prelude);
  free(prelude);
  t->prelude = t->src.len;
  return st;
}

jx_status jx_kernel_tu_init(jx_kernel_tu *t) {
  return jx_kernel_tu_init_dialect(t, &jx_dialect_c, "jx_kernel_");
}

void jx_kernel_tu_name(const jx_kernel_tu *t, int k, char name[JX_KERNEL_NAME_CAP]) {
  snprintf(name, JX_KERNEL_NAME_CAP, "%s%016llx", t->prefix, (unsigned long long)t->hashes[k]);
}

static int find(const jx_kernel_tu *t, uint64_t h) {
  for (int k = 0; k < t->n; k++)
    if (t->hashes[k] == h) return k;
  return -1;
}

/* Renders group g under a placeholder of the real name's length, names it
 * by the hash of that text and adds it unless t has it; its place in t, or
 * -1 with an error recorded. */
static int add_kernel(jx_kernel_tu *t, const jx_program *p, const jx_fusion_group *g,
                      char name[JX_KERNEL_NAME_CAP]) {
  char placeholder[JX_KERNEL_NAME_CAP];
  snprintf(placeholder, sizeof placeholder, "%s0000000000000000", t->prefix);
  char *src = jx_render_kernel(t->dialect, p, g, placeholder);
  if (!src) return -1;
  uint64_t h = jx_hash_str(JX_HASH_SEED, src);
  int k = find(t, h);
  if (k < 0 && t->n == t->hcap) {
    int cap = t->hcap ? 2 * t->hcap : 16;
    uint64_t *grown = realloc(t->hashes, sizeof *grown * (size_t)cap);
    if (grown) t->hashes = grown;
    size_t *starts = grown ? realloc(t->starts, sizeof *starts * (size_t)cap) : NULL;
    if (!starts) {
      free(src);
      jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
      return -1;
    }
    t->starts = starts;
    t->hcap = cap;
  }
  if (k < 0) {
    k = t->n;
    t->hashes[k] = h;
  }
  jx_kernel_tu_name(t, k, name);
  if (k == t->n) {
    char *at = strstr(src, placeholder); /* the signature's name */
    if (at) memcpy(at, name, strlen(placeholder));
    t->starts[k] = t->src.len;
    if (append(t, src))
      k = -1;
    else
      t->n++;
  }
  free(src);
  return k;
}

int jx_kernel_tu_add(jx_kernel_tu *t, const jx_program *p, const jx_fusion_group *groups, int ng,
                     char (*names)[JX_KERNEL_NAME_CAP], int *index) {
  int nkernels = 0;
  for (int k = 0; k < ng; k++) {
    if (names) names[k][0] = '\0';
    if (index) index[k] = -1;
    if (!jx_fusion_group_is_kernel(&groups[k])) continue;
    char name[JX_KERNEL_NAME_CAP];
    int at = add_kernel(t, p, &groups[k], name);
    if (at < 0) return -1;
    if (names) memcpy(names[k], name, sizeof name);
    if (index) index[k] = at;
    nkernels++;
  }
  return nkernels;
}

char *jx_kernel_tu_part(const jx_kernel_tu *t, int part, int nparts) {
  jx_strbuf b = JX_STRBUF_INIT;
  jx_strbuf_append(&b, t->text, t->prelude);
  for (int k = part; k < t->n; k += nparts) {
    size_t end = k + 1 < t->n ? t->starts[k + 1] : t->src.len;
    jx_strbuf_append(&b, t->text + t->starts[k], end - t->starts[k]);
  }
  return jx_strbuf_take(&b, "jit");
}

void jx_kernel_tu_free(jx_kernel_tu *t) {
  jx_strbuf_free(&t->src);
  free(t->hashes);
  free(t->starts);
  memset(t, 0, sizeof *t);
}
