/* The public collectives (jx/parallel.h): argument checks with errors named
 * after the function, then one primitive of collective.c.
 *
 * Axis lists: "a" or "a,b" (a major: ranks are row-major over the axes in the
 * order named). Each axis must be bound by an enclosing shard_map, pmap or
 * jx_vmap_axis (or be an axis of the mesh whose device thread runs the call).
 * As JAX: psum of bool sums int32 ones; pmean divides by the group size (true
 * division: integers give floats); all_gather's untiled dim may be the rank
 * (a new trailing axis). jx_all_to_all is JAX's tiled form: split_dim is cut
 * into n chunks (it must be divisible by the group size n), chunk q goes to
 * rank q, and the chunks received are concatenated along concat_dim. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../ir/axis_env.h"
#include "../trace/dispatch.h"
#include "collective_rules.h"

/* Fills p->l[0] with the ids of the axes named in axis; 0 with an error
 * naming op when one is unknown. *group: the product of their sizes. */
static int parse_axes(const char *op, const char *axis, jx_params *p, int64_t *group) {
  if (!axis) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the axis name is NULL", op);
    return 0;
  }
  const char *s = axis;
  while (*s) {
    while (isspace((unsigned char)*s)) s++;
    const char *e = s;
    while (*e && *e != ',') e++;
    size_t len = (size_t)(e - s);
    while (len && isspace((unsigned char)s[len - 1])) len--;
    char name[128];
    if (!len || len >= sizeof name) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: '%s' is not a list of axis names", op, axis);
      return 0;
    }
    if (p->l[0].n == JX_MAX_RANK) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: '%s' names more than %d axes", op, axis,
                   JX_MAX_RANK);
      return 0;
    }
    memcpy(name, s, len);
    name[len] = 0;
    int64_t size = jx_axis_env_size(name);
    const jx_spmd_ctx *c = jx_spmd_current();
    if (size < 0 && c) size = jx_mesh_axis_size(c->mesh, name);
    if (size < 0) {
      char bound[256];
      jx_axis_env_names(bound, sizeof bound);
      jx_error_set(JX_ERR_INVALID_ARGUMENT,
                   "%s: no enclosing shard_map, pmap or vmap binds an axis named '%s' (%s%s)", op,
                   name, bound[0] ? "bound: " : "no axis is bound", bound);
      return 0;
    }
    p->l[0].v[p->l[0].n++] = jx_axis_id(name);
    s = *e ? e + 1 : e;
    if (*e && !*s) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: '%s' is not a list of axis names", op, axis);
      return 0;
    }
  }
  if (!p->l[0].n) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the axis name is empty", op);
    return 0;
  }
  return !jx_collective_group_size(p, op, 0, group);
}

/* Checks x and the axes; 0 (error recorded) on failure. */
static int start(const char *op, jx_array *x, const char *axis, jx_params *p, int64_t *group) {
  if (jx_check_inputs(op, 1, &x)) return 0;
  return parse_axes(op, axis, p, group);
}

static jx_array *reduce(const char *op, const jx_prim *prim, jx_array *x, const char *axis) {
  jx_params p = JX_PARAMS_INIT;
  int64_t n;
  if (!start(op, x, axis, &p, &n)) return jx_poison();
  return jx_bind1(prim, 1, &x, &p);
}

jx_array *jx_psum(jx_array *x, const char *axis) {
  if (x && !x->poisoned && x->dtype == JX_BOOL) x = jx_astype(x, JX_I32);
  return reduce("jx_psum", &jx_prim_psum, x, axis);
}

jx_array *jx_pmax(jx_array *x, const char *axis) {
  return reduce("jx_pmax", &jx_prim_pmax, x, axis);
}

jx_array *jx_pmin(jx_array *x, const char *axis) {
  return reduce("jx_pmin", &jx_prim_pmin, x, axis);
}

jx_array *jx_pmean(jx_array *x, const char *axis) {
  jx_params p = JX_PARAMS_INIT;
  int64_t n;
  if (!start("jx_pmean", x, axis, &p, &n)) return jx_poison();
  if (x->dtype == JX_BOOL) x = jx_astype(x, JX_I32);
  return jx_div(jx_bind1(&jx_prim_psum, 1, &x, &p), jx_scalar(JX_I32, (double)n));
}

static jx_array *dim_op(const char *op, const jx_prim *prim, jx_array *x, const char *axis, int d0,
                        int d0_extra, int d1, int tiled, int has_d1) {
  jx_params p = JX_PARAMS_INIT;
  int64_t n;
  if (!start(op, x, axis, &p, &n)) return jx_poison();
  int r = x->shape.rank;
  int a = jx_normalize_axis(d0, r + d0_extra, op);
  int b = has_d1 ? jx_normalize_axis(d1, r, op) : 0;
  if (a < 0 || b < 0) return jx_poison();
  p.i[0] = a;
  p.i[1] = has_d1 ? b : !!tiled;
  p.i[2] = n;
  return jx_bind1(prim, 1, &x, &p);
}

jx_array *jx_all_gather(jx_array *x, const char *axis, int dim, int tiled) {
  int extra = x && !x->poisoned && !tiled; /* untiled: the new axis may go last */
  return dim_op("jx_all_gather", &jx_prim_all_gather, x, axis, dim, extra, 0, tiled, 0);
}

jx_array *jx_psum_scatter(jx_array *x, const char *axis, int dim, int tiled) {
  return dim_op("jx_psum_scatter", &jx_prim_psum_scatter, x, axis, dim, 0, 0, tiled, 0);
}

jx_array *jx_all_to_all(jx_array *x, const char *axis, int split_dim, int concat_dim) {
  return dim_op("jx_all_to_all", &jx_prim_all_to_all, x, axis, split_dim, 0, concat_dim, 0, 1);
}

jx_array *jx_ppermute(jx_array *x, const char *axis, int npairs, const int (*pairs)[2]) {
  const char *op = "jx_ppermute";
  jx_params p = JX_PARAMS_INIT;
  int64_t n;
  if (!start(op, x, axis, &p, &n)) return jx_poison();
  if (npairs < 0 || (npairs > 0 && !pairs)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %d pairs given%s", op, npairs,
                 npairs > 0 ? " but the pair list is NULL" : "");
    return jx_poison();
  }
  int64_t flat[2 * 64], *v = flat;
  if (npairs > 64 && !(v = malloc(sizeof *v * 2 * (size_t)npairs))) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return jx_poison();
  }
  for (int k = 0; k < npairs; k++) {
    v[2 * k] = pairs[k][0];
    v[2 * k + 1] = pairs[k][1];
  }
  p.i[0] = jx_intern_ints(v, 2 * npairs);
  p.i[1] = n;
  if (v != flat) free(v);
  if (!p.i[0]) return jx_poison();
  return jx_bind1(&jx_prim_ppermute, 1, &x, &p);
}
