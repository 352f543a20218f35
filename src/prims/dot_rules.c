/* JVP, transpose and batching rules of dot_general (the row is in dot.c).
 * They follow JAX's lax.py: _dot_general_transpose_lhs/_rhs and
 * _dot_general_batch_dim_nums, written with dot_general itself plus a
 * transpose, so that a batched or transposed contraction stays one
 * dot_general. Params: lhs contracting=l0, rhs contracting=l1, lhs batch=l2,
 * rhs batch=l3, has preferred=i0, preferred=dtype (see dot.c). */
#include "../base/error.h"
#include "contract_rules.h"
#include "prims.h"
#include "rules.h"

enum { LC, RC, LB, RB };

jx_array *jx_contract_convert(jx_array *x, jx_dtype dt) {
  if (x->dtype == dt) return x;
  jx_params p = JX_PARAMS_INIT;
  p.dtype = dt;
  return jx_bind1(&jx_prim_convert_element_type, 1, &x, &p);
}

jx_array *jx_contract_permute(jx_array *x, int n, const int64_t *perm) {
  int identity = 1;
  for (int i = 0; i < n; i++) identity &= perm[i] == i;
  if (identity) return x;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = n;
  for (int i = 0; i < n; i++) p.l[0].v[i] = perm[i];
  return jx_bind1(&jx_prim_transpose, 1, &x, &p);
}

static jx_array *dot(jx_array *a, jx_array *b, const jx_params *p) {
  return jx_bind1(&jx_prim_dot_general, 2, (jx_array *[]){a, b}, p);
}

static int member(const jx_ilist *l, int64_t d) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == d) return 1;
  return 0;
}

/* The free dims of an operand of rank `rank`, ascending. */
static int kept(int rank, const jx_ilist *contract, const jx_ilist *batch, int64_t *out) {
  int n = 0;
  for (int d = 0; d < rank; d++)
    if (!member(contract, d) && !member(batch, d)) out[n++] = d;
  return n;
}

/* JAX's ordering of float types for mixed operands (f16 < bf16 < f32 < f64):
 * the wider exponent wins, then the wider mantissa. */
static int float_rank(jx_dtype d) {
  switch (d) {
  case JX_F16: return 1;
  case JX_BF16: return 2;
  case JX_F32: return 3;
  case JX_F64: return 4;
  default: return 0;
  }
}

jx_dtype jx_contract_cotangent_type(jx_dtype g, jx_dtype other, int64_t *has_pref, jx_dtype pref) {
  jx_dtype common = float_rank(g) >= float_rank(other) ? g : other;
  if (*has_pref && float_rank(pref) < float_rank(common)) *has_pref = 0;
  return common;
}

/* The cotangent of operand x (aval xa) of dot_general(x, y) with contracting
 * dims xc/yc and batch dims xb/yb, from the output cotangent g. swap: x is the
 * rhs of the original product, so its free dims come after y's in g. */
static jx_array *transpose_operand(jx_array *g, jx_aval xa, jx_array *y, const jx_ilist *xc,
                                   const jx_ilist *yc, const jx_ilist *xb, const jx_ilist *yb,
                                   int swap, const jx_params *p) {
  int64_t x_kept[JX_MAX_RANK], y_kept[JX_MAX_RANK];
  int nxk = kept(xa.shape.rank, xc, xb, x_kept), nyk = kept(y->shape.rank, yc, yb, y_kept);
  int nb = xb->n;
  jx_params q = JX_PARAMS_INIT;
  q.i[0] = p->i[0];
  q.dtype = p->dtype;
  /* contract g's dims that came from y's free dims with those dims of y */
  int first_y = swap ? nb : nb + nxk;
  q.l[LC].n = q.l[RC].n = nyk;
  for (int i = 0; i < nyk; i++) {
    q.l[LC].v[i] = first_y + i;
    q.l[RC].v[i] = y_kept[i];
  }
  q.l[LB].n = q.l[RB].n = nb;
  for (int i = 0; i < nb; i++) {
    q.l[LB].v[i] = i;
    q.l[RB].v[i] = yb->v[i];
  }
  /* JAX's dot_general takes mixed float operands (the cotangent has the
   * preferred type); here both go to the wider of the two first (see
   * jx_contract_cotangent_type) */
  jx_dtype common = jx_contract_cotangent_type(g->dtype, y->dtype, &q.i[0], q.dtype);
  g = jx_contract_convert(g, common);
  y = jx_contract_convert(y, common);
  /* dot(g, y) is [batch, x free, x contracting dims ordered by their partners
   * in y]; dot(y, g) is [batch, x contracting..., x free]. JAX transposes the
   * first into x's layout; where the second needs no transpose it is used
   * instead, which keeps plain matmuls free of transposes */
  int64_t x_cs[JX_MAX_RANK], unsorted[JX_MAX_RANK], perm[JX_MAX_RANK];
  int ncs = 0, n = 0;
  for (int64_t yd = 0; yd < y->shape.rank; yd++)
    for (int i = 0; i < yc->n; i++)
      if (yc->v[i] == yd) x_cs[ncs++] = xc->v[i];
  for (int i = 0; i < nb; i++) unsorted[n++] = xb->v[i];
  for (int i = 0; i < ncs; i++) unsorted[n++] = x_cs[i];
  for (int i = 0; i < nxk; i++) unsorted[n++] = x_kept[i];
  int y_first = 1;
  for (int i = 0; i < n; i++) y_first &= unsorted[i] == i;
  jx_array *r;
  if (y_first) {
    jx_ilist t = q.l[LC];
    q.l[LC] = q.l[RC];
    q.l[RC] = t;
    t = q.l[LB];
    q.l[LB] = q.l[RB];
    q.l[RB] = t;
    r = dot(y, g, &q);
  } else {
    r = dot(g, y, &q);
    n = 0;
    for (int i = 0; i < nb; i++) unsorted[n++] = xb->v[i];
    for (int i = 0; i < nxk; i++) unsorted[n++] = x_kept[i];
    for (int i = 0; i < ncs; i++) unsorted[n++] = x_cs[i];
    for (int i = 0; i < n; i++) perm[unsorted[i]] = i;
    r = jx_contract_permute(r, n, perm);
  }
  return jx_contract_convert(r, xa.dtype);
}

static jx_array *transpose_lhs(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval,
                               jx_array *rhs) {
  const jx_params *p = ctx->params;
  return transpose_operand(ct, *aval, rhs, &p->l[LC], &p->l[RC], &p->l[LB], &p->l[RB], 0, p);
}
static jx_array *transpose_rhs(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval,
                               jx_array *lhs) {
  const jx_params *p = ctx->params;
  return transpose_operand(ct, *aval, lhs, &p->l[RC], &p->l[LC], &p->l[RB], &p->l[LB], 1, p);
}
JX_DEFBILINEAR_TRANSPOSE(jx_transpose_dot_general, transpose_lhs, transpose_rhs)

/* Dims of l at or after the new axis b shift up by one. */
static void bump(jx_ilist *l, int64_t b) {
  for (int i = 0; i < l->n; i++) l->v[i] += l->v[i] >= b;
}

/* JAX's _dot_general_batch_dim_nums: both operands mapped, the mapped axes
 * become a leading batch dim; one mapped, its axis becomes a free dim. */
JX_BATCH_RULE(jx_batch_dot_general) {
  const jx_params *p = ctx->params;
  (void)axis_size;
  int lbd = bdim[0], rbd = bdim[1];
  jx_params q = *p;
  if (lbd == JX_NOT_MAPPED && rbd == JX_NOT_MAPPED) {
    out[0] = dot(in[0], in[1], p);
    out_bdim[0] = JX_NOT_MAPPED;
    return jx_last_status();
  }
  if (q.l[LB].n + 1 > JX_MAX_RANK)
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "vmap of dot_general: too many batch dims");
  if (lbd != JX_NOT_MAPPED && rbd != JX_NOT_MAPPED) {
    bump(&q.l[LB], lbd);
    bump(&q.l[RB], rbd);
    bump(&q.l[LC], lbd);
    bump(&q.l[RC], rbd);
    for (int i = q.l[LB].n; i > 0; i--) {
      q.l[LB].v[i] = q.l[LB].v[i - 1];
      q.l[RB].v[i] = q.l[RB].v[i - 1];
    }
    q.l[LB].v[0] = lbd;
    q.l[RB].v[0] = rbd;
    q.l[LB].n++;
    q.l[RB].n++;
    out_bdim[0] = 0;
  } else if (lbd != JX_NOT_MAPPED) {
    /* the new lhs free dim sits among the lhs free dims, after the batch dims */
    int before = 0;
    for (int d = 0; d < lbd; d++) before += !member(&p->l[LC], d) && !member(&p->l[LB], d);
    out_bdim[0] = p->l[LB].n + before;
    bump(&q.l[LB], lbd);
    bump(&q.l[LC], lbd);
  } else {
    /* after the batch and lhs free dims, among the rhs free dims */
    int before = 0;
    for (int d = 0; d < rbd; d++) before += !member(&p->l[RC], d) && !member(&p->l[RB], d);
    out_bdim[0] = in[0]->shape.rank - p->l[LC].n + before;
    bump(&q.l[RB], rbd);
    bump(&q.l[RC], rbd);
  }
  out[0] = dot(in[0], in[1], &q);
  return jx_last_status();
}
