#include "fusion.h"

#include <stdlib.h>
#include <string.h>

#include "../array/array.h"
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

/* bf16 values are computed in float and rounded after every equation, as
 * the reference kernels do */
static int fusible_dtype(jx_dtype d) {
  return d == JX_F32 || d == JX_F64 || d == JX_BF16 || d == JX_BOOL;
}

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
  /* f64 -> bf16 rounds once from the double (through float would round twice) */
  if (e->prim == &jx_prim_convert_element_type && p->avals[e->in[0]].dtype == JX_F64 &&
      p->avals[e->out[0]].dtype == JX_BF16)
    return 0;
  return 1;
}

/* 0 none, else 1 sum, 2 max, 3 min: e is a plain reduction a kernel may end with. */
static int reduce_op(const jx_eqn *e) {
  int op = e->prim == &jx_prim_reduce_sum   ? 1
           : e->prim == &jx_prim_reduce_max ? 2
           : e->prim == &jx_prim_reduce_min ? 3
                                            : 0;
  return e->nin == 1 && e->nout == 1 && !e->nsub ? op : 0;
}

int jx_fusion_row_reduce(const jx_eqn *e, const jx_program *p) {
  int op = reduce_op(e);
  if (!op) return 0;
  jx_aval a = p->avals[e->in[0]];
  if (a.dtype != JX_F32 && a.dtype != JX_F64) return 0;
  if (a.shape.rank < 1 || e->params.l[0].n != 1 || e->params.l[0].v[0] != a.shape.rank - 1)
    return 0;
  return op;
}

int jx_fusion_col_reduce(const jx_eqn *e, const jx_program *p, int *lead) {
  int op = reduce_op(e);
  if (!op) return 0;
  jx_aval a = p->avals[e->in[0]];
  const jx_ilist *axes = &e->params.l[0];
  if (a.dtype != JX_F32 && a.dtype != JX_F64) return 0;
  /* the leading axes, at least one kept: reducing every axis is a row
   * reduction's job (rank 1) or the eager kernel's (one long contiguous sum) */
  if (axes->n < 1 || axes->n >= a.shape.rank) return 0;
  int64_t rows = 1;
  for (int i = 0; i < axes->n; i++) {
    if (axes->v[i] != i) return 0;
    rows *= a.shape.dims[i];
  }
  if (rows >= (int64_t)1 << JX_FUSION_COL_DEPTH) return 0; /* beyond the kernel's stack */
  if (lead) *lead = axes->n;
  return op;
}

int jx_fusion_store_may_reuse(const jx_program *p, const jx_fusion_group *g, int o, int l) {
  if (g->reduces) return 0;
  int v = g->loads[l].var;
  jx_aval in = p->avals[v], out = p->avals[g->stores[o]];
  int64_t n = jx_shape_numel(g->shape);
  if (jx_dtype_size(in.dtype) != jx_dtype_size(out.dtype) || jx_shape_numel(in.shape) != n ||
      jx_shape_numel(out.shape) != n)
    return 0;
  int64_t rowmajor[JX_MAX_RANK];
  jx_shape_strides(g->shape, rowmajor);
  for (int d = 0; d < g->shape.rank; d++)
    if (g->shape.dims[d] != 1 && g->loads[l].strides[d] != rowmajor[d]) return 0;
  for (int m = 0; m < g->nloads; m++)
    if (m != l && g->loads[m].var == v) return 0;
  return 1;
}

int64_t jx_fusion_kernel_rows(const jx_fusion_group *g) {
  int rank = g->shape.rank;
  if (rank < 2) return 1;
  int64_t rows = 1;
  for (int d = g->reduces ? g->lead : 0; d < rank - 1; d++) rows *= g->shape.dims[d];
  return rows;
}

/* A lone computation as a kernel: the reference kernels walk elements one at
 * a time through dtype switches; a kernel of one vectorized loop is several
 * times faster once the array is big enough to pay for a kernel call. */
enum { SINGLE_KERNEL_MIN_ELEMENTS = 4096 };

int jx_fusion_single_worth_a_kernel(const jx_program *p, const jx_eqn *e) {
  if (e->prim == &jx_prim_broadcast_in_dim || e->prim == &jx_prim_stop_gradient ||
      jx_fusion_row_reduce(e, p) || jx_fusion_col_reduce(e, p, NULL) || !jx_fusion_renderable(e, p))
    return 0;
  return jx_shape_numel(p->avals[e->out[0]].shape) >= SINGLE_KERNEL_MIN_ELEMENTS;
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

/* The equation that produces v, searched backwards from equation `before`, or NULL. */
static const jx_eqn *producer(const jx_program *p, int v, int before) {
  for (int k = before - 1; k >= 0; k--)
    for (int o = 0; o < p->eqns[k].nout; o++)
      if (p->eqns[k].out[o] == v) return &p->eqns[k];
  return NULL;
}

/* A broadcast_in_dim the kernels read through: they load its operand with
 * stride 0 along the new dims instead of a materialized copy. */
static int read_through(const jx_program *p, const jx_eqn *b) {
  return b && b->prim == &jx_prim_broadcast_in_dim && jx_fusion_renderable(b, p);
}

void jx_fusion_operand(const jx_program *p, const jx_fusion_group *g, int v, int *var,
                       int64_t *strides) {
  jx_shape vs = p->avals[v].shape;
  memset(strides, 0, sizeof(int64_t) * JX_MAX_RANK);
  const jx_eqn *b = vs.rank == g->shape.rank && vs.rank > 0 ? producer(p, v, g->first) : NULL;
  if (read_through(p, b)) {
    int64_t own[JX_MAX_RANK] = {0};
    jx_shape src = p->avals[b->in[0]].shape;
    contiguous_strides(src, own);
    for (int k = 0; k < src.rank; k++) strides[b->params.l[1].v[k]] = own[k];
    *var = b->in[0];
    return;
  }
  if (vs.rank == g->shape.rank) contiguous_strides(vs, strides);
  *var = v;
}

int jx_fusion_operand_load(const jx_program *p, const jx_fusion_group *g, int v) {
  int var;
  int64_t st[JX_MAX_RANK];
  jx_fusion_operand(p, g, v, &var, st);
  int k = jx_fusion_find_load(g, var, st);
  if (k < 0) { /* a group built by hand reads v itself */
    if (p->avals[v].shape.rank == g->shape.rank)
      contiguous_strides(p->avals[v].shape, st);
    else
      memset(st, 0, sizeof st);
    k = jx_fusion_find_load(g, v, st);
  }
  return k;
}

/* Adds the load of var with these strides; 0 when the group has no room. */
static int add_load_strides(jx_fusion_group *g, int var, const int64_t *st) {
  if (jx_fusion_find_load(g, var, st) >= 0) return 1;
  if (g->nloads == JX_FUSION_MAX_LOADS) return 0;
  g->loads[g->nloads].var = var;
  memcpy(g->loads[g->nloads].strides, st, sizeof g->loads[g->nloads].strides);
  g->nloads++;
  return 1;
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
  return add_load_strides(g, var, st);
}

/* Whether e can join g: same shape; inputs from the group, scalars, or of
 * the group's shape; a broadcast must read from outside the group. */
static int joins(const jx_program *p, const jx_fusion_group *g, const uint8_t *in_group,
                 const jx_eqn *e) {
  if (g->reduces) return 0; /* a reduction ends its group */
  if (g->count && (jx_fusion_row_reduce(e, p) || jx_fusion_col_reduce(e, p, NULL)))
    return in_group[e->in[0]] && jx_shape_equal(p->avals[e->in[0]].shape, g->shape);
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
  if (!groups || !in_group) {
    free(groups);
    free(in_group);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    return -1;
  }

  int ng = 0;
  jx_fusion_group *g = NULL;
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    if (g && joins(p, g, in_group, e) && g->nloads + e->nin <= JX_FUSION_MAX_LOADS) {
      g->count++;
      if (jx_fusion_row_reduce(e, p)) g->reduces = 1;
      if (jx_fusion_col_reduce(e, p, &g->lead)) g->reduces = 1;
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
  /* loads and compute counts of each fused group; operands produced by a
   * broadcast_in_dim are read through it (its operand, stride 0 along the
   * new dims), so a broadcast scalar or bias never becomes a full array */
  for (int n = 0; n < ng; n++) {
    jx_fusion_group *f = &groups[n];
    if (f->count < 2) {
      if (!jx_fusion_single_worth_a_kernel(p, &p->eqns[f->first])) continue;
      f->single = 1;
    }
    memset(in_group, 0, (size_t)p->nvars + 1);
    int ok = 1;
    for (int j = f->first; j < f->first + f->count && ok; j++) {
      const jx_eqn *e = &p->eqns[j];
      if (f->reduces && j == f->first + f->count - 1) {
        f->compute++; /* its operand is a member */
        in_group[e->out[0]] = 1;
        continue;
      }
      if (!jx_fusion_renderable(e, p)) break;
      if (e->prim == &jx_prim_broadcast_in_dim) {
        ok = add_load(f, e->in[0], p->avals[e->in[0]].shape, e->params.l[1].v);
      } else {
        f->compute++;
        for (int i = 0; i < e->nin && ok; i++)
          if (!in_group[e->in[i]]) {
            int var;
            int64_t st[JX_MAX_RANK];
            jx_fusion_operand(p, f, e->in[i], &var, st);
            ok = add_load_strides(f, var, st);
          }
      }
      in_group[e->out[0]] = 1;
    }
    if (!ok) f->compute = 0; /* too wide: the executable runs it equation by equation */
  }
  /* stores: a kernel writes the members that something after it reads as an
   * array (an equation run as it is, another kernel's load, an output).
   * A group that cannot store all of them is demoted, which makes its own
   * operands arrays again: repeat until nothing changes. */
  uint8_t *need = in_group;
  for (int changed = 1; changed;) {
    changed = 0;
    memset(need, 0, (size_t)p->nvars + 1);
    for (int o = 0; o < p->nout; o++) need[p->out[o]] = 1;
    for (int n = 0; n < ng; n++) {
      jx_fusion_group *f = &groups[n];
      if (jx_fusion_group_candidate(f)) {
        for (int l = 0; l < f->nloads; l++) need[f->loads[l].var] = 1;
      } else {
        for (int j = f->first; j < f->first + f->count; j++)
          for (int i = 0; i < p->eqns[j].nin; i++) need[p->eqns[j].in[i]] = 1;
      }
    }
    for (int n = 0; n < ng; n++) {
      jx_fusion_group *f = &groups[n];
      if (!jx_fusion_group_candidate(f)) continue;
      f->nstores = 0;
      for (int j = f->first; j < f->first + f->count; j++) {
        int v = p->eqns[j].out[0];
        if (!need[v]) continue;
        if (f->nstores == JX_FUSION_MAX_STORES) {
          f->compute = 0;
          f->nstores = 0;
          changed = 1;
          break;
        }
        f->stores[f->nstores++] = v;
      }
    }
  }
  /* a group that stores nothing is dead; a broadcast nobody reads as an
   * array is read through by every kernel that uses it */
  for (int n = 0; n < ng; n++) {
    jx_fusion_group *f = &groups[n];
    if (jx_fusion_group_candidate(f) && f->nstores == 0) f->skip = 1;
    if (f->count == 1) {
      const jx_eqn *e = &p->eqns[f->first];
      if (read_through(p, e) && !need[e->out[0]]) f->skip = 1;
    }
  }
  free(in_group);
  *out = groups;
  return ng;
}
