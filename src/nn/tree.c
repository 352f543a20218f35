/* Trees: ordered lists of named arrays (the C form of a pytree). Lookups
 * are linear: trees are models' parameter lists, tens to hundreds long, and
 * are walked in order far more often than searched. */
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

struct jx_tree {
  int n, cap;
  char **names;
  jx_array **arrays; /* one reference each */
};

jx_tree *jx_tree_create(void) { return calloc(1, sizeof(jx_tree)); }

void jx_tree_set(jx_tree *t, const char *name, jx_array *a) {
  if (!t || !name || !a) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_tree_set: the %s is NULL",
                    !t      ? "tree"
                    : !name ? "name"
                            : "array");
    return;
  }
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->names[i], name) == 0) {
      jx_keep(a);
      jx_release(t->arrays[i]);
      t->arrays[i] = a;
      return;
    }
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 16;
    char **nn = realloc(t->names, sizeof *nn * (size_t)cap);
    if (nn) t->names = nn;
    jx_array **na = nn ? realloc(t->arrays, sizeof *na * (size_t)cap) : NULL;
    if (na) t->arrays = na;
    if (!nn || !na) return;
    t->cap = cap;
  }
  char *copy = strdup(name);
  if (!copy) return;
  t->names[t->n] = copy;
  t->arrays[t->n] = jx_keep(a);
  t->n++;
}

jx_array *jx_tree_get(const jx_tree *t, const char *name) {
  for (int i = 0; t && name && i < t->n; i++)
    if (strcmp(t->names[i], name) == 0) return t->arrays[i];
  return NULL;
}

int jx_tree_size(const jx_tree *t) { return t ? t->n : 0; }
const char *jx_tree_name(const jx_tree *t, int i) {
  return t && i >= 0 && i < t->n ? t->names[i] : NULL;
}
jx_array *jx_tree_at(const jx_tree *t, int i) {
  return t && i >= 0 && i < t->n ? t->arrays[i] : NULL;
}

void jx_tree_release(jx_tree *t) {
  if (!t) return;
  for (int i = 0; i < t->n; i++) {
    jx_release(t->arrays[i]);
    free(t->names[i]);
  }
  free(t->names);
  free(t->arrays);
  free(t);
}

void jx_tree_flatten(const jx_tree *t, jx_array **out) {
  for (int i = 0; t && i < t->n; i++) out[i] = t->arrays[i];
}

jx_tree *jx_tree_unflatten(const jx_tree *like, jx_array *const *arrays) {
  jx_tree *t = jx_tree_create();
  for (int i = 0; t && like && i < like->n; i++) jx_tree_set(t, like->names[i], arrays[i]);
  return t;
}

jx_tree *jx_tree_map(const jx_tree *src, jx_tree_map_fn fn, void *ctx) {
  jx_tree *t = jx_tree_create();
  for (int i = 0; t && src && i < src->n; i++) {
    jx_array *a = fn(ctx, src->names[i], src->arrays[i]);
    if (!a) {
      jx_tree_release(t);
      return NULL;
    }
    jx_tree_set(t, src->names[i], a);
  }
  return t;
}

int64_t jx_tree_numel(const jx_tree *t) {
  int64_t n = 0;
  for (int i = 0; t && i < t->n; i++) n += jx_size(t->arrays[i]);
  return n;
}
