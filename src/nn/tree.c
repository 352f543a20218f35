/* Trees: ordered lists of named arrays (the C form of a pytree). Lookups
 * are linear: trees are models' parameter lists, tens to hundreds long, and
 * are walked in order far more often than searched. The order is the order
 * of insertion; jx_tree_flatten_sorted gives JAX's (a dotted name is a path
 * of nested dicts, whose keys JAX sorts at every level). */
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

/* JAX's order of two dotted names: segment by segment, each compared as
 * Python compares str keys (by code point, which is UTF-8's byte order); a
 * name that is a path prefix of the other comes first. */
static int path_cmp(const char *a, const char *b) {
  for (;;) {
    size_t la = strcspn(a, "."), lb = strcspn(b, ".");
    int c = memcmp(a, b, la < lb ? la : lb);
    if (c) return c;
    if (la != lb) return la < lb ? -1 : 1;
    a += la;
    b += lb;
    if (!*a || !*b) return !*a && !*b ? 0 : !*a ? -1 : 1;
    a++;
    b++;
  }
}

typedef struct {
  const char *name;
  int index;
} named_index;

static int named_index_cmp(const void *x, const void *y) {
  return path_cmp(((const named_index *)x)->name, ((const named_index *)y)->name);
}

/* order[k] = the insertion index of the k-th name in JAX's order; 0 when
 * out of memory (recorded). */
static int sorted_order(const char *fn, const jx_tree *t, int *order) {
  named_index *v = malloc(sizeof *v * (size_t)(t->n + 1));
  if (!v) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    return 0;
  }
  for (int i = 0; i < t->n; i++) v[i] = (named_index){t->names[i], i};
  qsort(v, (size_t)t->n, sizeof *v, named_index_cmp); /* names are unique: no ties */
  for (int k = 0; k < t->n; k++) order[k] = v[k].index;
  free(v);
  return 1;
}

void jx_tree_flatten_sorted(const jx_tree *t, jx_array **out) {
  if (!t) return;
  int *order = malloc(sizeof *order * (size_t)(t->n + 1));
  if (order && sorted_order("jx_tree_flatten_sorted", t, order))
    for (int k = 0; k < t->n; k++) out[k] = t->arrays[order[k]];
  else if (!order)
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_tree_flatten_sorted: out of memory");
  free(order);
}

jx_tree *jx_tree_unflatten_sorted(const jx_tree *like, jx_array *const *arrays) {
  jx_tree *t = jx_tree_create();
  if (!t || !like) return t;
  /* like's names in like's order, each taking its array from its sorted place */
  int *order = malloc(sizeof *order * (size_t)(like->n + 1)),
      *place = malloc(sizeof *place * (size_t)(like->n + 1));
  if (order && place && sorted_order("jx_tree_unflatten_sorted", like, order)) {
    for (int k = 0; k < like->n; k++) place[order[k]] = k;
    for (int i = 0; i < like->n; i++) jx_tree_set(t, like->names[i], arrays[place[i]]);
  } else if (!order || !place) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_tree_unflatten_sorted: out of memory");
  }
  free(order);
  free(place);
  return t;
}

jx_tree *jx_tree_map_n(int n, const jx_tree *const *trees, jx_tree_map_n_fn fn, void *ctx) {
  const char *op = "jx_tree_map_n";
  if (n < 1 || !trees || !fn) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: %s", op,
                    n < 1    ? "needs at least one tree"
                    : !trees ? "the list of trees is NULL"
                             : "the function is NULL");
    return NULL;
  }
  for (int k = 0; k < n; k++) {
    if (!trees[k]) {
      jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: tree %d is NULL", op, k);
      return NULL;
    }
    if (trees[k]->n != trees[0]->n) {
      jx_report_error(JX_ERR_INVALID_ARGUMENT,
                      "%s: tree %d has %d arrays but tree 0 has %d (the trees must have the "
                      "same names)",
                      op, k, trees[k]->n, trees[0]->n);
      return NULL;
    }
  }
  jx_array **args = malloc(sizeof *args * (size_t)n);
  jx_tree *t = args ? jx_tree_create() : NULL;
  if (!t) {
    free(args);
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  for (int i = 0; i < trees[0]->n; i++) {
    const char *name = trees[0]->names[i];
    int found = 1;
    for (int k = 0; k < n && found; k++) { /* the same name, wherever the other tree has it */
      args[k] =
          !strcmp(trees[k]->names[i], name) ? trees[k]->arrays[i] : jx_tree_get(trees[k], name);
      if (!args[k]) {
        jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: tree %d has no '%s' (tree 0 has)", op, k,
                        name);
        found = 0;
      }
    }
    jx_array *a = found ? fn(ctx, name, n, args) : NULL;
    if (!a) {
      free(args);
      jx_tree_release(t);
      return NULL;
    }
    jx_tree_set(t, name, a);
  }
  free(args);
  return t;
}

int64_t jx_tree_numel(const jx_tree *t) {
  int64_t n = 0;
  for (int i = 0; t && i < t->n; i++) n += jx_size(t->arrays[i]);
  return n;
}
