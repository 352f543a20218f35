#include "fusion.h"

#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/prims.h"

static const jx_prim *const computable[] = {&jx_prim_add,
                                            &jx_prim_sub,
                                            &jx_prim_mul,
                                            &jx_prim_div,
                                            &jx_prim_neg,
                                            &jx_prim_abs,
                                            &jx_prim_exp,
                                            &jx_prim_exp2,
                                            &jx_prim_expm1,
                                            &jx_prim_log,
                                            &jx_prim_log1p,
                                            &jx_prim_erf,
                                            &jx_prim_sqrt,
                                            &jx_prim_rsqrt,
                                            &jx_prim_tanh,
                                            &jx_prim_logistic,
                                            &jx_prim_sin,
                                            &jx_prim_cos,
                                            &jx_prim_max,
                                            &jx_prim_min,
                                            &jx_prim_pow,
                                            &jx_prim_integer_pow,
                                            &jx_prim_select_n,
                                            &jx_prim_eq,
                                            &jx_prim_ne,
                                            &jx_prim_lt,
                                            &jx_prim_le,
                                            &jx_prim_gt,
                                            &jx_prim_ge,
                                            &jx_prim_convert_element_type,
                                            &jx_prim_stop_gradient,
                                            NULL};

static int fusible_dtype(jx_dtype d) { return d == JX_F32 || d == JX_F64 || d == JX_BOOL; }

int jx_fusion_renderable(const jx_eqn *e, const jx_program *p) {
  if (e->nout != 1 || e->nsub) return 0;
  int known = e->prim == &jx_prim_broadcast_in_dim;
  for (int k = 0; computable[k] && !known; k++) known = computable[k] == e->prim;
  if (!known) return 0;
  if (!fusible_dtype(p->avals[e->out[0]].dtype)) return 0;
  for (int i = 0; i < e->nin; i++)
    if (!fusible_dtype(p->avals[e->in[i]].dtype)) return 0;
  /* arithmetic on bool is not a float op: leave it to the reference kernels */
  if (e->prim != &jx_prim_select_n && e->prim != &jx_prim_convert_element_type &&
      e->prim != &jx_prim_broadcast_in_dim && e->prim != &jx_prim_stop_gradient &&
      p->avals[e->in[0]].dtype == JX_BOOL)
    return 0;
  if (e->prim == &jx_prim_select_n && (e->nin != 3 || p->avals[e->in[0]].dtype != JX_BOOL))
    return 0;
  return 1;
}

int jx_fusion_find_load(const jx_fusion_group *g, int var, const int64_t *strides) {
  for (int k = 0; k < g->nloads; k++)
    if (g->loads[k].var == var &&
        memcmp(g->loads[k].strides, strides, sizeof g->loads[k].strides) == 0)
      return k;
  return -1;
}

static void contiguous_strides(jx_shape s, int64_t *st) {
  int64_t acc = 1;
  for (int d = s.rank - 1; d >= 0; d--) {
    st[d] = s.dims[d] == 1 ? 0 : acc;
    acc *= s.dims[d];
  }
}

/* Adds the load of var (shape `of`) spread to the group's shape through
 * `dims` (output dimension of each operand dimension; NULL: same shape or a
 * scalar). Returns 0 when the group has no room. */
static int add_load(jx_fusion_group *g, int var, jx_shape of, const int64_t *dims) {
  int64_t st[JX_MAX_RANK] = {0}, own[JX_MAX_RANK] = {0};
  contiguous_strides(of, own);
  if (dims) {
    for (int k = 0; k < of.rank; k++) st[dims[k]] = own[k];
  } else if (of.rank == g->shape.rank) {
    memcpy(st, own, sizeof st);
  }
  if (jx_fusion_find_load(g, var, st) >= 0) return 1;
  if (g->nloads == JX_FUSION_MAX_LOADS) return 0;
  g->loads[g->nloads].var = var;
  memcpy(g->loads[g->nloads].strides, st, sizeof st);
  g->nloads++;
  return 1;
}

/* Whether e can join g: same shape; inputs from the group, scalars, or of
 * the group's shape; a broadcast must read from outside the group. */
static int joins(const jx_program *p, const jx_fusion_group *g, const uint8_t *in_group,
                 const jx_eqn *e) {
  if (!jx_fusion_renderable(e, p)) return 0;
  jx_shape s = p->avals[e->out[0]].shape;
  if (g->count && !jx_shape_equal(s, g->shape)) return 0;
  if (jx_shape_numel(s) == 0) return 0;
  for (int i = 0; i < e->nin; i++) {
    int v = e->in[i];
    jx_shape vs = p->avals[v].shape;
    if (e->prim == &jx_prim_broadcast_in_dim) return !in_group[v];
    if (in_group[v]) continue;
    if (vs.rank != 0 && !jx_shape_equal(vs, s)) return 0;
  }
  return 1;
}

int jx_fuse(const jx_program *p, jx_fusion_group **out) {
  jx_fusion_group *groups = calloc((size_t)p->neqns + 1, sizeof *groups);
  uint8_t *in_group = calloc((size_t)p->nvars + 1, 1);
  int *last_use = malloc(sizeof *last_use * (size_t)(p->nvars + 1));
  if (!groups || !in_group || !last_use) {
    free(groups);
    free(in_group);
    free(last_use);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    return -1;
  }
  for (int v = 0; v < p->nvars; v++) last_use[v] = -1;
  for (int k = 0; k < p->neqns; k++)
    for (int i = 0; i < p->eqns[k].nin; i++) last_use[p->eqns[k].in[i]] = k;
  for (int o = 0; o < p->nout; o++) last_use[p->out[o]] = p->neqns; /* outputs live on */

  int ng = 0;
  jx_fusion_group *g = NULL;
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    if (g && joins(p, g, in_group, e) && g->nloads + e->nin <= JX_FUSION_MAX_LOADS) {
      g->count++;
    } else {
      if (g)
        for (int j = g->first; j < g->first + g->count; j++) in_group[p->eqns[j].out[0]] = 0;
      g = &groups[ng++];
      memset(g, 0, sizeof *g);
      g->first = k;
      int fusible = joins(p, g, in_group, e);
      g->count = 1;
      if (!fusible) {
        g = NULL; /* run as it is */
        continue;
      }
      g->shape = p->avals[e->out[0]].shape;
    }
    for (int o = 0; o < e->nout; o++) in_group[e->out[o]] = 1;
  }
  /* loads, stores and compute counts of each fused group */
  for (int n = 0; n < ng; n++) {
    jx_fusion_group *f = &groups[n];
    if (f->count < 2) continue; /* one equation runs as it is */
    memset(in_group, 0, (size_t)p->nvars + 1);
    int ok = 1;
    for (int j = f->first; j < f->first + f->count && ok; j++) {
      const jx_eqn *e = &p->eqns[j];
      if (!jx_fusion_renderable(e, p)) break;
      if (e->prim == &jx_prim_broadcast_in_dim) {
        ok = add_load(f, e->in[0], p->avals[e->in[0]].shape, e->params.l[1].v);
      } else {
        f->compute++;
        for (int i = 0; i < e->nin && ok; i++)
          if (!in_group[e->in[i]]) ok = add_load(f, e->in[i], p->avals[e->in[i]].shape, NULL);
      }
      in_group[e->out[0]] = 1;
    }
    for (int j = f->first; j < f->first + f->count && ok; j++) {
      int v = p->eqns[j].out[0];
      if (last_use[v] >= f->first + f->count) {
        if (f->nstores == JX_FUSION_MAX_STORES)
          ok = 0;
        else
          f->stores[f->nstores++] = v;
      }
    }
    if (!ok) f->compute = 0; /* too wide: the executable runs it equation by equation */
  }
  free(in_group);
  free(last_use);
  *out = groups;
  return ng;
}
