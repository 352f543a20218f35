#include <string.h>

#include "../base/error.h"
#include "prims.h"

static const jx_prim *const *const families[] = {
    jx_prims_unary,   jx_prims_binary,     jx_prims_select,  jx_prims_fma,
    jx_prims_convert, jx_prims_shape,      jx_prims_slicing, jx_prims_gather,
    jx_prims_reduce,  jx_prims_cumulative, jx_prims_sort,    jx_prims_dot,
    jx_prims_conv,    jx_prims_window,     jx_prims_random,  jx_prims_complex,
};

/* The families of the layers above, most recently registered first. */
static jx_prim_family *registered;

void jx_prim_register_family(jx_prim_family *f) {
  for (jx_prim_family *g = registered; g; g = g->next)
    if (g == f) return;
  f->next = registered;
  registered = f;
}

void jx_prim_foreach(void (*fn)(const jx_prim *p, void *ctx), void *ctx) {
  for (size_t f = 0; f < sizeof families / sizeof *families; f++)
    for (const jx_prim *const *p = families[f]; *p; p++) fn(*p, ctx);
  for (jx_prim_family *g = registered; g; g = g->next)
    for (const jx_prim *const *p = g->rows; *p; p++) fn(*p, ctx);
}

struct named {
  const char *name;
  const jx_prim *found;
};

static void match(const jx_prim *p, void *ctx) {
  struct named *n = ctx;
  if (!n->found && strcmp(p->name, n->name) == 0) n->found = p;
}

const jx_prim *jx_prim_lookup(const char *name) {
  struct named n = {name, NULL};
  jx_prim_foreach(match, &n);
  return n.found;
}

jx_status jx_prim_check_outputs(const jx_prim *p, int nout, const jx_aval *out) {
  jx_status st = JX_OK;
  for (int o = 0; o < nout && !st; o++) st = jx_shape_check(out[o].shape, p->name, "the result");
  return st;
}

int jx_normalize_axis(int axis, int rank, const char *op) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: axis %d is out of range for rank %d", op, axis,
                 rank);
    return -1;
  }
  return a;
}
