#include "fusion.h"

#include <stdlib.h>
#include <string.h>

#include "../array/array.h"
#include "../array/dtype.h"
#include "../base/env.h"
#include "../base/error.h"
#include "prim_lowering.h"

/* bf16 values are computed in float and rounded after every equation, as
 * the reference kernels do; complex values in C99's complex types; the
 * integers where the dialect renders them (ints: jx_fuse_device) */
static int fusible_dtype(jx_dtype d, int ints) {
  if (d == JX_F32 || d == JX_F64 || d == JX_BF16 || d == JX_BOOL || d == JX_C64 || d == JX_C128)
    return 1;
  return ints && jx_is_int(d);
}

/* A reduction's operand a kernel may sum (complex: pairwise per part, which
 * is the same tree over complex values) or take the max or min of. On the
 * device (device = 1) a bf16 operand is summed too, as the reference kernel
 * sums it: loaded into floats, the f32 pairwise tree, one rounding of the
 * result; the C backend leaves bf16 sums to the reference kernel. */
static int reducible(jx_dtype d, int op, int device) {
  return d == JX_F32 || d == JX_F64 || ((d == JX_C64 || d == JX_C128) && op == JX_LOWER_SUM) ||
         (device && d == JX_BF16 && op == JX_LOWER_SUM);
}

int jx_fusion_renderable(const jx_eqn *e, const jx_program *p) {
  return jx_fusion_renderable_on(e, p, 0);
}

int jx_fusion_renderable_on(const jx_eqn *e, const jx_program *p, int ints) {
  if (e->nout != 1 || e->nsub || !jx_lower_computes(e->prim)) return 0;
  const jx_prim_lowering *x = jx_prim_lowering_of(e->prim);
  jx_dtype to = p->avals[e->out[0]].dtype;
  if (!fusible_dtype(to, ints) || (x->device && !ints)) return 0;
  if (x->kind == JX_LOWER_IOTA) return e->nin == 0 && p->avals[e->out[0]].shape.rank > 0;
  if (e->nin < 1) return 0;
  for (int i = 0; i < e->nin; i++)
    if (!fusible_dtype(p->avals[e->in[i]].dtype, ints)) return 0;
  /* an expression for the operands' dtype (some rows have complex ones only) */
  const char *expr =
      x->kind == JX_LOWER_EXPR ? jx_lower_expr(x, p->avals[e->in[x->typed_by]].dtype) : NULL;
  if (x->kind == JX_LOWER_EXPR && (!expr || (!ints && expr == x->ints && expr != x->f32)))
    return 0; /* no expression, or an integer one (bool's and, or, xor) for a C kernel */
  /* arithmetic on bool is not a float op: leave it to the reference kernels */
  if (!x->on_bool && p->avals[e->in[0]].dtype == JX_BOOL) return 0;
  if (e->prim->id == JX_PRIM_select_n && (e->nin != 3 || p->avals[e->in[0]].dtype != JX_BOOL))
    return 0;
  /* f64 (c128's real part) -> bf16 rounds once from the double (through
   * float would round twice) */
  jx_dtype from = p->avals[e->in[0]].dtype;
  if (x->kind == JX_LOWER_CONVERT && (from == JX_F64 || from == JX_C128) && to == JX_BF16) return 0;
  /* integers: an integer -> bf16 rounds once from the integer (through float
   * would round twice); complex ones and integer powers are not rendered */
  if (jx_is_int(from) || jx_is_int(to)) {
    if (x->kind == JX_LOWER_CONVERT && jx_is_int(from) && to == JX_BF16) return 0;
    if (x->kind == JX_LOWER_CONVERT && (jx_is_complex(from) || jx_is_complex(to))) return 0;
    if (x->kind == JX_LOWER_INTEGER_POW) return 0;
  }
  return 1;
}

/* 0 none, else 1 sum, 2 max, 3 min: e is a plain reduction a kernel may end with. */
static int reduce_op(const jx_eqn *e) {
  const jx_prim_lowering *x = jx_prim_lowering_of(e->prim);
  int op = x->kind == JX_LOWER_REDUCE ? x->reduce : 0;
  return e->nin == 1 && e->nout == 1 && !e->nsub ? op : 0;
}

int jx_fusion_row_reduce(const jx_eqn *e, const jx_program *p) {
  return jx_fusion_row_reduce_on(e, p, 0);
}

int jx_fusion_row_reduce_on(const jx_eqn *e, const jx_program *p, int device) {
  int op = reduce_op(e);
  if (!op) return 0;
  jx_aval a = p->avals[e->in[0]];
  if (!reducible(a.dtype, op, device)) return 0;
  if (a.shape.rank < 1 || e->params.l[0].n != 1 || e->params.l[0].v[0] != a.shape.rank - 1)
    return 0;
  return op;
}

int jx_fusion_full_reduce(const jx_eqn *e, const jx_program *p) {
  return jx_fusion_full_reduce_on(e, p, 0);
}

int jx_fusion_full_reduce_on(const jx_eqn *e, const jx_program *p, int device) {
  int op = reduce_op(e);
  if (!op) return 0; /* before reading an operand: e may have none */
  jx_aval a = p->avals[e->in[0]];
  if (!reducible(a.dtype, op, device) || a.shape.rank < 2 || e->params.l[0].n != a.shape.rank)
    return 0;
  for (int i = 0; i < a.shape.rank; i++)
    if (e->params.l[0].v[i] != i) return 0;
  return op;
}

int jx_fusion_col_reduce(const jx_eqn *e, const jx_program *p, int *lead) {
  return jx_fusion_col_reduce_on(e, p, 0, lead);
}

int jx_fusion_col_reduce_on(const jx_eqn *e, const jx_program *p, int device, int *lead) {
  int op = reduce_op(e);
  if (!op) return 0;
  jx_aval a = p->avals[e->in[0]];
  const jx_ilist *axes = &e->params.l[0];
  if (!reducible(a.dtype, op, device)) return 0;
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
  return g->loads[l].offset == 0 && g->loads[l].nwin == 0;
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

static int is_view_on(const jx_eqn *e, const jx_program *p, int ints);

static int single_worth(const jx_program *p, const jx_eqn *e, int ints) {
  if (is_view_on(e, p, ints) || e->prim->id == JX_PRIM_stop_gradient ||
      jx_fusion_row_reduce_on(e, p, ints) || jx_fusion_col_reduce_on(e, p, ints, NULL) ||
      !jx_fusion_renderable_on(e, p, ints))
    return 0;
  return jx_shape_numel(p->avals[e->out[0]].shape) >= SINGLE_KERNEL_MIN_ELEMENTS;
}

int jx_fusion_single_worth_a_kernel(const jx_program *p, const jx_eqn *e) {
  return single_worth(p, e, 0);
}

int jx_fusion_find_view(const jx_fusion_group *g, int var, int64_t offset, const int64_t *strides) {
  for (int k = 0; k < g->nloads; k++)
    if (g->loads[k].var == var && g->loads[k].offset == offset && g->loads[k].nwin == 0 &&
        memcmp(g->loads[k].strides, strides, sizeof g->loads[k].strides) == 0)
      return k;
  return -1;
}

int jx_fusion_find_load(const jx_fusion_group *g, int var, const int64_t *strides) {
  return jx_fusion_find_view(g, var, 0, strides);
}

static void contiguous_strides(jx_shape s, int64_t *st) {
  int64_t acc = 1;
  for (int d = s.rank - 1; d >= 0; d--) {
    st[d] = s.dims[d] == 1 ? 0 : acc;
    acc *= s.dims[d];
  }
}

/* The equation that produces v, searched backwards from equation `before`,
 * or -1. */
static int producer(const jx_program *p, int v, int before) {
  for (int k = before - 1; k >= 0; k--)
    for (int o = 0; o < p->eqns[k].nout; o++)
      if (p->eqns[k].out[o] == v) return k;
  return -1;
}

/* Views of integers are views only where integers fuse (ints); a chain of
 * views keeps its dtype, so reading one through (jx_fusion_is_view, with
 * integers) never reaches an integer view from a kernel of floats. */
static int is_view_on(const jx_eqn *e, const jx_program *p, int ints) {
  if (e->nin != 1 || e->nout != 1 || e->nsub || !jx_lower_is_view(e->prim)) return 0;
  return fusible_dtype(p->avals[e->out[0]].dtype, ints) &&
         fusible_dtype(p->avals[e->in[0]].dtype, ints);
}

int jx_fusion_is_view(const jx_eqn *e, const jx_program *p) { return is_view_on(e, p, 1); }

/* Where the elements of a variable are: element i (a multi-index) is
 * element offset + sum_d i[d] * st[d] of variable var. */
typedef struct {
  int var;
  int64_t offset;
  int64_t st[JX_MAX_RANK];
} address;

/* The strides of `to` that read an array of shape `from` laid out with
 * strides fst in row-major order of `to` (a reshape): 1 when every run of
 * dims that `to` splits or merges is contiguous in fst (NumPy's no-copy
 * reshape), else 0. */
static int reshape_strides(jx_shape from, const int64_t *fst, jx_shape to, int64_t *tst) {
  int64_t od[JX_MAX_RANK], os[JX_MAX_RANK];
  int on = 0;
  if (jx_shape_numel(from) == 0) return 0;
  for (int d = 0; d < from.rank; d++)
    if (from.dims[d] != 1) {
      od[on] = from.dims[d];
      os[on++] = fst[d];
    }
  int oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < to.rank && oi < on) {
    int64_t np = to.dims[ni], op = od[oi];
    while (np != op) {
      if (np < op) {
        if (nj >= to.rank) return 0;
        np *= to.dims[nj++];
      } else {
        if (oj >= on) return 0;
        op *= od[oj++];
      }
    }
    for (int k = oi; k < oj - 1; k++)
      if (os[k] != od[k + 1] * os[k + 1]) return 0; /* the run is not contiguous */
    tst[nj - 1] = os[oj - 1];
    for (int k = nj - 1; k > ni; k--) tst[k - 1] = tst[k] * to.dims[k];
    ni = nj++;
    oi = oj++;
  }
  for (int k = ni; k < to.rank; k++) tst[k] = 0; /* trailing dims of size 1 */
  return 1;
}

enum { MAX_VIEW_CHAIN = 16 };

/* The address of v's elements: through the views that made it (produced
 * before equation `before`), else v itself. */
static void address_of(const jx_program *p, int v, int before, int depth, address *a) {
  jx_shape s = p->avals[v].shape;
  int k = depth < MAX_VIEW_CHAIN ? producer(p, v, before) : -1;
  const jx_eqn *e = k >= 0 ? &p->eqns[k] : NULL;
  memset(a, 0, sizeof *a);
  if (e && jx_fusion_is_view(e, p)) {
    address u;
    jx_shape us = p->avals[e->in[0]].shape;
    address_of(p, e->in[0], k, depth + 1, &u);
    int ok = 1;
    a->var = u.var;
    a->offset = u.offset;
    switch (e->prim->id) {
    case JX_PRIM_broadcast_in_dim:
      for (int d = 0; d < us.rank; d++) a->st[e->params.l[1].v[d]] = us.dims[d] == 1 ? 0 : u.st[d];
      break;
    case JX_PRIM_slice: {
      const jx_ilist *step = &e->params.l[2];
      for (int d = 0; d < us.rank; d++) {
        a->offset += e->params.l[0].v[d] * u.st[d];
        a->st[d] = u.st[d] * (step->n ? step->v[d] : 1);
      }
      break;
    }
    case JX_PRIM_transpose:
      for (int d = 0; d < s.rank; d++) a->st[d] = u.st[e->params.l[0].v[d]];
      break;
    default: /* reshape, squeeze, expand_dims */ ok = reshape_strides(us, u.st, s, a->st);
    }
    if (ok) {
      for (int d = 0; d < s.rank; d++)
        if (s.dims[d] == 1) a->st[d] = 0;
      return;
    }
    memset(a, 0, sizeof *a); /* a reshape the strides cannot say: read what it makes */
  }
  a->var = v;
  contiguous_strides(s, a->st);
}

void jx_fusion_operand(const jx_program *p, const jx_fusion_group *g, int v, int *var,
                       int64_t *offset, int64_t *strides) {
  address a;
  address_of(p, v, g->first + g->count, 0, &a);
  memset(strides, 0, sizeof(int64_t) * JX_MAX_RANK);
  jx_shape vs = p->avals[v].shape;
  if (g->collapsed && vs.rank > 0) { /* the members' shape read as the group's (collapse) */
    if (!reshape_strides(vs, a.st, g->shape, strides))
      memset(strides, 0, sizeof(int64_t) * JX_MAX_RANK);
  } else if (vs.rank == g->shape.rank) {
    memcpy(strides, a.st, sizeof a.st);
  }
  *var = a.var;
  *offset = a.offset;
}

int jx_fusion_operand_load(const jx_program *p, const jx_fusion_group *g, int v) {
  int var;
  int64_t off, st[JX_MAX_RANK];
  jx_fusion_operand(p, g, v, &var, &off, st);
  int k = jx_fusion_find_view(g, var, off, st);
  if (k < 0) { /* a group built by hand reads v itself (flat: a full reduction's) */
    jx_shape vs = p->avals[v].shape;
    if (vs.rank == g->shape.rank) {
      contiguous_strides(vs, st);
    } else {
      memset(st, 0, sizeof st);
      if (g->shape.rank == 1 && g->shape.dims[0] > 1 && jx_shape_numel(vs) == g->shape.dims[0])
        st[0] = 1;
    }
    k = jx_fusion_find_load(g, v, st);
  }
  return k;
}

int jx_fusion_add_operand(const jx_program *p, jx_fusion_group *g, int v) {
  int var;
  int64_t off, st[JX_MAX_RANK];
  jx_fusion_operand(p, g, v, &var, &off, st);
  if (jx_fusion_find_view(g, var, off, st) >= 0) return 1;
  if (g->nloads == JX_FUSION_MAX_LOADS) return 0;
  jx_fusion_load *l = &g->loads[g->nloads++];
  l->var = var;
  l->offset = off;
  memcpy(l->strides, st, sizeof l->strides);
  return 1;
}

static int window_op_on(const jx_eqn *e, const jx_program *p, int ints);

int jx_fusion_is_window_op(const jx_eqn *e, const jx_program *p) { return window_op_on(e, p, 1); }

static int window_op_on(const jx_eqn *e, const jx_program *p, int ints) {
  if (e->nout != 1 || e->nsub) return 0;
  const int pad = e->prim->id == JX_PRIM_pad;
  if (jx_prim_lowering_of(e->prim)->kind != JX_LOWER_WINDOW || (pad ? e->nin != 2 : e->nin < 2))
    return 0;
  jx_aval out = p->avals[e->out[0]];
  if (!fusible_dtype(out.dtype, ints) || out.shape.rank < 1) return 0;
  int ndata = pad ? 1 : e->nin;
  for (int i = 0; i < e->nin; i++) {
    jx_aval a = p->avals[e->in[i]];
    if (a.dtype != out.dtype) return 0;
    /* an empty operand has no element to clamp a read to */
    if (i < ndata && (a.shape.rank != out.shape.rank || jx_shape_numel(a.shape) == 0)) return 0;
    int n;
    jx_fusion_window w[JX_FUSION_MAX_WINDOWS];
    if (i < ndata && !jx_fusion_windows(p, e, i, &n, w)) return 0;
  }
  return 1;
}

int jx_fusion_windows(const jx_program *p, const jx_eqn *e, int i, int *n, jx_fusion_window *win) {
  jx_shape in = p->avals[e->in[i]].shape, out = p->avals[e->out[0]].shape;
  *n = 0;
  if (e->prim->id == JX_PRIM_concatenate) {
    int64_t axis = e->params.i[0], lo = 0;
    for (int k = 0; k < i; k++) lo += p->avals[e->in[k]].shape.dims[axis];
    win[(*n)++] = (jx_fusion_window){(int)axis, lo, 1, in.dims[axis]};
    return 1;
  }
  for (int d = 0; d < in.rank; d++) {
    int64_t lo = e->params.l[0].v[d], step = e->params.l[2].v[d] + 1;
    if (lo == 0 && step == 1 && in.dims[d] == out.dims[d]) continue; /* the identity */
    if (*n == JX_FUSION_MAX_WINDOWS) return 0;
    win[(*n)++] = (jx_fusion_window){d, lo, step, in.dims[d]};
  }
  return 1;
}

/* The load of operand i of window op e: the operand's address (through
 * views) and e's windows. */
static int window_load_of(const jx_program *p, const jx_fusion_group *g, const jx_eqn *e, int i,
                          jx_fusion_load *l) {
  memset(l, 0, sizeof *l);
  jx_fusion_operand(p, g, e->in[i], &l->var, &l->offset, l->strides);
  return jx_fusion_windows(p, e, i, &l->nwin, l->win);
}

static int same_load(const jx_fusion_load *a, const jx_fusion_load *b) {
  if (a->var != b->var || a->offset != b->offset || a->nwin != b->nwin ||
      memcmp(a->strides, b->strides, sizeof a->strides))
    return 0;
  for (int w = 0; w < a->nwin; w++)
    if (a->win[w].dim != b->win[w].dim || a->win[w].lo != b->win[w].lo ||
        a->win[w].step != b->win[w].step || a->win[w].count != b->win[w].count)
      return 0;
  return 1;
}

int jx_fusion_window_load(const jx_program *p, const jx_fusion_group *g, const jx_eqn *e, int i) {
  jx_fusion_load l;
  if (!window_load_of(p, g, e, i, &l)) return -1;
  for (int k = 0; k < g->nloads; k++)
    if (same_load(&g->loads[k], &l)) return k;
  return -1;
}

int jx_fusion_add_window_operand(const jx_program *p, jx_fusion_group *g, const jx_eqn *e, int i) {
  if (jx_fusion_window_load(p, g, e, i) >= 0) return 1;
  if (g->nloads == JX_FUSION_MAX_LOADS) return 0;
  return window_load_of(p, g, e, i, &g->loads[g->nloads++]);
}

/* A view a kernel can read through: its address is another variable's (an
 * array; or a reshape on the chain that the strides cannot say, which runs
 * as it is). It may join a group as a member that computes nothing, or be
 * skipped when only kernels read it. */
static int read_through(const jx_program *p, int k, int ints) {
  const jx_eqn *e = &p->eqns[k];
  if (!is_view_on(e, p, ints)) return 0;
  address a;
  address_of(p, e->out[0], k + 1, 0, &a);
  return a.var != e->out[0];
}

/* Whether equation k can join g: same shape; inputs from the group,
 * scalars, or of the group's shape; a view (a member that computes nothing:
 * the kernel loads what it reads through) must read from outside the group. */
static int joins(const jx_program *p, const jx_fusion_group *g, const uint8_t *in_group, int k,
                 int ints) {
  const jx_eqn *e = &p->eqns[k];
  if (g->reduces) return 0; /* a reduction ends its group */
  if (g->count &&
      (jx_fusion_row_reduce_on(e, p, ints) || jx_fusion_col_reduce_on(e, p, ints, NULL))) {
    /* the column reduction's row walk does not render windows */
    if (g->windows && jx_fusion_col_reduce_on(e, p, ints, NULL)) return 0;
    /* nor do reductions render an iota (the element's index) */
    for (int m = g->first; m < g->first + g->count; m++)
      if (jx_prim_lowering_of(p->eqns[m].prim)->kind == JX_LOWER_IOTA) return 0;
    return in_group[e->in[0]] && jx_shape_equal(p->avals[e->in[0]].shape, g->shape);
  }
  if (window_op_on(e, p, ints)) { /* its operands come from outside, as a view's */
    jx_shape s = p->avals[e->out[0]].shape;
    if ((g->count && !jx_shape_equal(s, g->shape)) || jx_shape_numel(s) == 0) return 0;
    for (int i = 0; i < e->nin; i++)
      if (in_group[e->in[i]]) return 0;
    return 1;
  }
  int view = is_view_on(e, p, ints);
  if (!view && !jx_fusion_renderable_on(e, p, ints)) return 0;
  jx_shape s = p->avals[e->out[0]].shape;
  if (g->count && !jx_shape_equal(s, g->shape)) return 0;
  if (jx_shape_numel(s) == 0) return 0;
  if (view) return !in_group[e->in[0]] && read_through(p, k, ints);
  for (int i = 0; i < e->nin; i++) {
    int v = e->in[i];
    jx_shape vs = p->avals[v].shape;
    if (in_group[v]) continue;
    if (vs.rank != 0 && !jx_shape_equal(vs, s)) return 0;
  }
  return 1;
}

/* A group of one view that kernels may read through: it runs only when
 * something reads its result as an array. */
static int lone_view(const jx_program *p, const jx_fusion_group *g, int ints) {
  return g->count == 1 && !jx_fusion_group_candidate(g) && read_through(p, g->first, ints);
}

int jx_fusion_kernels_enabled(void) { return jx_env_flag("JX_JIT_KERNELS"); }

static int fuse(const jx_program *p, int ints, jx_fusion_group **out);

int jx_fuse(const jx_program *p, jx_fusion_group **out) { return fuse(p, 0, out); }

int jx_fuse_device(const jx_program *p, jx_fusion_group **out) { return fuse(p, 1, out); }

/* Group f's loads and compute count (its stores come later); operands
 * produced by a broadcast_in_dim are read through it (its operand, stride 0
 * along the new dims), so a broadcast scalar or bias never becomes a full
 * array. A lone equation not worth a kernel is left as it is. Returns 0
 * when the group's operands are too many for one kernel (compute 0: the
 * executable runs it equation by equation), else 1. in_group: nvars + 1
 * bytes of scratch. */
static int plan_group(const jx_program *p, jx_fusion_group *f, uint8_t *in_group, int ints,
                      int kernels) {
  f->nloads = 0;
  f->compute = 0;
  if (f->count < 2) {
    const jx_eqn *e = &p->eqns[f->first];
    /* on the device a lone pad or concatenate is a kernel too (on the
     * host it would copy its operands down and its result up) */
    if (!kernels || !(single_worth(p, e, ints) || (ints && window_op_on(e, p, ints)))) return 1;
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
    if (jx_fusion_is_view(e, p)) {
      ok = jx_fusion_add_operand(p, f, e->out[0]); /* read through */
    } else if (jx_fusion_is_window_op(e, p)) {
      f->compute++; /* a select over its operands' windowed loads */
      int ndata = e->prim->id == JX_PRIM_pad ? 1 : e->nin;
      for (int i = 0; i < e->nin && ok; i++)
        ok = i < ndata ? jx_fusion_add_window_operand(p, f, e, i)
                       : jx_fusion_add_operand(p, f, e->in[i]);
    } else {
      if (!jx_fusion_renderable_on(e, p, ints)) break;
      f->compute++;
      for (int i = 0; i < e->nin && ok; i++)
        if (!in_group[e->in[i]]) ok = jx_fusion_add_operand(p, f, e->in[i]);
    }
    in_group[e->out[0]] = 1;
  }
  if (!ok) f->compute = 0; /* too wide */
  return ok;
}

/* Cuts group n of *ng in two halves of its equations (groups after it move
 * up one): a reduction stays the second half's last member. */
static void cut_group(jx_fusion_group *groups, int *ng, int n) {
  jx_fusion_group *f = &groups[n];
  memmove(&groups[n + 2], &groups[n + 1], sizeof *groups * (size_t)(*ng - n - 1));
  jx_fusion_group *second = &groups[n + 1];
  memset(second, 0, sizeof *second);
  int half = f->count / 2;
  second->first = f->first + half;
  second->count = f->count - half;
  second->shape = f->shape;
  second->windows = f->windows;
  second->reduces = f->reduces;
  second->lead = f->lead;
  f->count = half;
  f->reduces = 0;
  f->lead = 0;
  f->nstores = 0;
  (*ng)++;
}

/* An elementwise kernel group's shape with its dims of 1 dropped and each
 * pair of neighbouring dims that every load reads as one dim merged (outer
 * stride = inner dim x inner stride: contiguous, or broadcast along both):
 * the same elements in the same row-major order, so the stores are
 * unchanged, and the loads' strides are what jx_fusion_operand derives for
 * the collapsed shape (reshape_strides). A kernel over [N, 1] otherwise
 * runs a row per element, and one over [B, T] a short row per T. Groups
 * that reduce, select through windows or compute an iota (an element's
 * index along a dim) keep their shape. */
static void collapse(const jx_program *p, jx_fusion_group *g) {
  if (!jx_fusion_group_is_kernel(g) || g->reduces || g->windows || g->shape.rank < 2) return;
  for (int m = g->first; m < g->first + g->count; m++)
    if (jx_prim_lowering_of(p->eqns[m].prim)->kind == JX_LOWER_IOTA) return;
  for (int l = 0; l < g->nloads; l++)
    if (g->loads[l].nwin) return;
  int64_t dims[JX_MAX_RANK], st[JX_FUSION_MAX_LOADS][JX_MAX_RANK];
  int n = 0;
  for (int d = 0; d < g->shape.rank; d++) {
    if (g->shape.dims[d] == 1) continue;
    int merge = n > 0;
    for (int l = 0; l < g->nloads && merge; l++)
      merge = st[l][n - 1] == g->shape.dims[d] * g->loads[l].strides[d];
    int at = merge ? n - 1 : n++;
    dims[at] = merge ? dims[at] * g->shape.dims[d] : g->shape.dims[d];
    for (int l = 0; l < g->nloads; l++) st[l][at] = g->loads[l].strides[d];
  }
  if (n == 0 || n == g->shape.rank) return; /* one element, or nothing to drop or merge */
  g->shape.rank = n;
  for (int d = 0; d < JX_MAX_RANK; d++) g->shape.dims[d] = d < n ? dims[d] : 0;
  for (int l = 0; l < g->nloads; l++)
    for (int d = 0; d < JX_MAX_RANK; d++) g->loads[l].strides[d] = d < n ? st[l][d] : 0;
  g->collapsed = 1;
}

static int fuse(const jx_program *p, int ints, jx_fusion_group **out) {
  int kernels = jx_fusion_kernels_enabled();
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
    if (g && joins(p, g, in_group, k, ints) && g->nloads + e->nin <= JX_FUSION_MAX_LOADS) {
      g->count++;
      if (jx_fusion_is_window_op(e, p)) g->windows = 1;
      if (jx_fusion_row_reduce_on(e, p, ints)) g->reduces = 1;
      if (jx_fusion_col_reduce_on(e, p, ints, &g->lead)) g->reduces = 1;
    } else {
      if (g)
        for (int j = g->first; j < g->first + g->count; j++) in_group[p->eqns[j].out[0]] = 0;
      g = &groups[ng++];
      memset(g, 0, sizeof *g);
      g->first = k;
      int fusible = kernels && joins(p, g, in_group, k, ints);
      g->count = 1;
      if (!fusible) {
        g = NULL; /* run as it is */
        continue;
      }
      g->shape = p->avals[e->out[0]].shape;
      g->windows = jx_fusion_is_window_op(e, p);
    }
    for (int o = 0; o < e->nout; o++) in_group[e->out[o]] = 1;
  }
  /* loads and compute counts of each fused group; on the device a group too
   * wide for one kernel is cut in two (each half planned again) */
  for (int n = 0; n < ng; n++)
    if (!plan_group(p, &groups[n], in_group, ints, kernels) && ints && groups[n].count >= 2) {
      cut_group(groups, &ng, n);
      n--;
    }
  /* stores: a kernel writes the members that something after it reads as an
   * array (an equation run as it is, another kernel's load, an output).
   * A group that cannot store all of them is demoted, which makes its own
   * operands arrays again: repeat until nothing changes. */
  uint8_t *need = in_group;
  /* lone_view per group (a search each); as many as there are equations, since
   * cuts add groups; scratch: plan_group's marks while need is in use */
  uint8_t *lone = calloc((size_t)p->neqns + 1, 1);
  uint8_t *scratch = calloc((size_t)p->nvars + 1, 1);
  int cuts = 0;
  if (!lone || !scratch) {
    free(lone);
    free(scratch);
    free(groups);
    free(in_group);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    return -1;
  }
  for (int n = 0; n < ng; n++) lone[n] = (uint8_t)lone_view(p, &groups[n], ints);
  for (int changed = 1; changed;) {
    changed = 0;
    if (cuts) /* groups moved: their lone views again */
      for (int n = 0; n < ng; n++) lone[n] = (uint8_t)lone_view(p, &groups[n], ints);
    cuts = 0;
    memset(need, 0, (size_t)p->nvars + 1);
    for (int o = 0; o < p->nout; o++) need[p->out[o]] = 1;
    for (int n = 0; n < ng; n++) {
      jx_fusion_group *f = &groups[n];
      if (jx_fusion_group_candidate(f)) {
        for (int l = 0; l < f->nloads; l++) need[f->loads[l].var] = 1;
      } else if (!lone[n]) {
        for (int j = f->first; j < f->first + f->count; j++)
          for (int i = 0; i < p->eqns[j].nin; i++) need[p->eqns[j].in[i]] = 1;
      }
    }
    /* a lone view runs when its result is read as an array; then it reads
     * its operand (last to first: a chain of views passes the need on) */
    for (int n = ng - 1; n >= 0; n--)
      if (lone[n] && need[p->eqns[groups[n].first].out[0]])
        need[p->eqns[groups[n].first].in[0]] = 1;
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
          if (ints && f->count >= 2) { /* the device: two kernels, not one per equation */
            int at = n;
            cut_group(groups, &ng, at);
            plan_group(p, &groups[at], scratch, ints, kernels);
            plan_group(p, &groups[at + 1], scratch, ints, kernels);
            cuts = 1;
          }
          break;
        }
        f->stores[f->nstores++] = v;
      }
    }
  }
  /* a group that stores nothing is dead; a view nobody reads as an array
   * is read through by every kernel that uses it */
  for (int n = 0; n < ng; n++) {
    jx_fusion_group *f = &groups[n];
    if (jx_fusion_group_candidate(f) && f->nstores == 0) f->skip = 1;
    if (lone[n] && !need[p->eqns[f->first].out[0]]) f->skip = 1;
    if (!ints) collapse(p, f); /* the C dialect's kernels; the device's keep their shape */
  }
  free(lone);
  free(scratch);
  free(in_group);
  *out = groups;
  return ng;
}
