/* Transformation rules of gather and the scatters (rows in gather.c), after
 * JAX's lax/slicing.py:
 *  - gather is linear in the operand; its transpose is a scatter_add of the
 *    cotangent into zeros with the matching dimension numbers;
 *  - scatter_add is linear in operand and updates; the updates' cotangent is
 *    the "inverse gather" of the cotangent (zero for dropped updates);
 *  - scatter (replace) follows _scatter_jvp: unique ids scattered like the
 *    updates find the update that won each element, and the tangent is a
 *    scatter_add of the masked tangents, so no scatter transpose is needed;
 *  - scatter_mul: d/d operand is scatter_mul(t, i, updates) (transposed the
 *    same way); d/d updates is JAX's x * scatter_add(0, i, t) for unique
 *    indices, generalized here to duplicate indices (JAX raises
 *    NotImplementedError without unique_indices=True): each update's tangent
 *    is scaled by the product of the other updates hitting its element,
 *    computed without dividing by zero (see exclusive_products);
 *  - scatter_min/max follow _scatter_extremal_jvp (ties share the tangent).
 * Batching follows _gather_batching_rule / _scatter_batching_rule: batch axes
 * go to the front and become an extra window dim (operand only batched) or an
 * extra index dim (indices only batched); when both are batched an iota of
 * batch positions is prepended to every index vector.
 * One deliberate difference: JAX's inverse gathers use its default gather
 * mode whatever the scatter's mode; here they use the scatter's own mode
 * (clip <-> clip, drop <-> fill), so that the derivatives of clipped updates
 * are right. */
#include "../base/error.h"
#include "prims.h"
#include "rules.h"
#include "structural_rules.h"

/* ---- shared helpers ---- */
jx_dtype jx_sr_index_dtype(jx_dtype dt, int64_t n) {
  if (!jx_is_int(dt)) return JX_I64;
  int bits = jx_dtype_bits(dt);
  if (bits >= 64) return dt;
  int64_t max = jx_is_signed_int(dt) ? (INT64_C(1) << (bits - 1)) - 1 : (INT64_C(1) << bits) - 1;
  return n - 1 <= max ? dt : JX_I64;
}

jx_array *jx_sr_convert(jx_array *x, jx_dtype dt) {
  if (x->dtype == dt) return x;
  jx_params q = JX_PARAMS_INIT;
  q.dtype = dt;
  return jx_bind1(&jx_prim_convert_element_type, 1, &x, &q);
}

jx_array *jx_sr_full(jx_dtype dt, jx_shape shape, double v) {
  jx_array *s = jx_scalar(dt, v);
  if (s->poisoned) return s;
  s->weak = 0;
  if (shape.rank == 0) return s;
  jx_params q = JX_PARAMS_INIT;
  q.l[0].n = shape.rank;
  for (int d = 0; d < shape.rank; d++) q.l[0].v[d] = shape.dims[d];
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &s, &q);
}

jx_array *jx_sr_iota(jx_dtype dt, jx_shape shape, int dim) {
  jx_params q = JX_PARAMS_INIT;
  q.dtype = dt;
  q.i[0] = dim;
  q.l[0].n = shape.rank;
  for (int d = 0; d < shape.rank; d++) q.l[0].v[d] = shape.dims[d];
  return jx_bind1(&jx_prim_iota, 0, NULL, &q);
}

static jx_array *b2(const jx_prim *p, jx_array *a, jx_array *b) {
  return jx_bind1(p, 2, (jx_array *[]){a, b}, NULL);
}
/* pred ? t : f */
static jx_array *sel(jx_array *pred, jx_array *f, jx_array *t) {
  return jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){pred, f, t}, NULL);
}
static jx_array *scat(const jx_prim *prim, jx_array *op, jx_array *idx, jx_array *up,
                      const jx_params *p) {
  return jx_bind1(prim, 3, (jx_array *[]){op, idx, up}, p);
}
static int contains(const jx_ilist *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return 1;
  return 0;
}
static jx_ilist plus_one(const jx_ilist *l, int lead_zero) {
  jx_ilist r = {0, {0}};
  if (lead_zero) r.v[r.n++] = 0;
  for (int i = 0; i < l->n && r.n < JX_MAX_RANK; i++) r.v[r.n++] = l->v[i] + 1;
  return r;
}

/* The gather that reads, for each element of the updates of scatter p (shape
 * us), the operand element it lands on: JAX's inverse gather. Clip scatters
 * clip; dropping scatters fill. */
static jx_params inverse_params(const jx_params *p, jx_shape os, jx_shape us) {
  jx_params g = JX_PARAMS_INIT;
  g.l[0] = p->l[0];
  g.l[1] = p->l[1];
  g.l[2] = p->l[2];
  g.l[3].n = os.rank;
  for (int d = 0, k = 0; d < os.rank; d++)
    g.l[3].v[d] = contains(&p->l[1], d) ? 1 : us.dims[p->l[0].v[k++]];
  g.i[0] = p->i[0];
  g.i[1] = p->i[1] == 1 ? 0 : 1;
  return g;
}
static jx_array *inverse_gather(const jx_params *p, jx_array *src, jx_array *idx, jx_shape us) {
  jx_params g = inverse_params(p, src->shape, us);
  return jx_bind1(&jx_prim_gather, 2, (jx_array *[]){src, idx}, &g);
}
/* A gather in fill mode with zeros (not gather's fill values) for the
 * slices out of range, as JAX's gather(..., fill_value=0). */
static jx_array *gather_fill0(const jx_params *g, jx_array *src, jx_array *idx) {
  jx_array *r = jx_bind1(&jx_prim_gather, 2, (jx_array *[]){src, idx}, g);
  if (r->poisoned) return r;
  jx_array *ones = jx_sr_full(JX_I8, src->shape, 1);
  jx_array *m = jx_bind1(&jx_prim_gather, 2, (jx_array *[]){ones, idx}, g);
  jx_array *inside = b2(&jx_prim_eq, m, jx_sr_full(JX_I8, r->shape, 1));
  return sel(inside, jx_rule_zeros_like(r), r);
}
/* The inverse gather with zeros for the updates a dropping scatter skips. */
static jx_array *inverse_gather0(const jx_params *p, jx_array *src, jx_array *idx, jx_shape us) {
  if (p->i[1] == 1) return inverse_gather(p, src, idx, us);
  jx_params g = inverse_params(p, src->shape, us);
  return gather_fill0(&g, src, idx);
}

/* ---- gather ---- */

/* JAX's _gather_jvp_rule: the tangent is gathered with fill value 0. */
JX_JVP_RULE(jx_jvp_gather) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(&jx_prim_gather, 2, x, p);
  ty[0] = NULL;
  if (t[0])
    ty[0] = p->i[1] == 1 ? gather_fill0(p, t[0], x[1])
                         : jx_bind1(&jx_prim_gather, 2, (jx_array *[]){t[0], x[1]}, p);
  return jx_last_status();
}

JX_TRANSPOSE_RULE(jx_transpose_gather) {
  const jx_params *p = ctx->params;
  (void)linear;
  ct_in[0] = ct_in[1] = NULL;
  if (!ct[0]) return JX_OK;
  jx_params q = JX_PARAMS_INIT;
  q.l[0] = p->l[0];
  q.l[1] = p->l[1];
  q.l[2] = p->l[2];
  q.i[0] = p->i[0];
  q.i[1] = p->i[1] == 1 ? 0 : 1; /* fill -> drop, clip -> clip */
  jx_array *z = jx_rule_zeros((jx_aval){avals[0].dtype, 0, avals[0].shape, 0});
  ct_in[0] = scat(&jx_prim_scatter_add, z, in[1], ct[0], &q);
  return jx_last_status();
}

/* Indices batched along axis 0 whose index vectors (along ivd, which may be
 * the implicit trailing dim) get the batch position prepended. */
static jx_array *prepend_counts(jx_array *idx, int ivd, int64_t n, int *new_ivd) {
  int r = idx->shape.rank;
  if (ivd == r) {
    jx_params e = JX_PARAMS_INIT;
    e.l[0].n = 1;
    e.l[0].v[0] = r;
    idx = jx_bind1(&jx_prim_expand_dims, 1, &idx, &e);
  }
  if (idx->poisoned) return idx;
  jx_dtype dt = jx_sr_index_dtype(idx->dtype, n);
  idx = jx_sr_convert(idx, dt);
  jx_shape cs = idx->shape;
  cs.dims[ivd] = 1;
  jx_params c = JX_PARAMS_INIT;
  c.i[0] = ivd;
  *new_ivd = ivd;
  return jx_bind1(&jx_prim_concatenate, 2, (jx_array *[]){jx_sr_iota(dt, cs, 0), idx}, &c);
}

JX_BATCH_RULE(jx_batch_gather) {
  const jx_params *p = ctx->params;
  const jx_ilist *offs = &p->l[0], *coll = &p->l[1], *sim = &p->l[2], *ss = &p->l[3];
  jx_params q = *p;
  out_bdim[0] = 0;
  if (offs->n + 1 > JX_MAX_RANK || ss->n + 1 > JX_MAX_RANK)
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "vmap of gather: rank over %d", JX_MAX_RANK);
  if (bdim[1] == JX_NOT_MAPPED) { /* the batch axis becomes a window dim */
    jx_array *op = jx_rule_moveaxis(in[0], bdim[0], 0);
    q.l[3].n = ss->n + 1;
    q.l[3].v[0] = axis_size;
    for (int d = 0; d < ss->n; d++) q.l[3].v[d + 1] = ss->v[d];
    q.l[0] = plus_one(offs, 1);
    q.l[1] = plus_one(coll, 0);
    q.l[2] = plus_one(sim, 0);
    out[0] = jx_bind1(&jx_prim_gather, 2, (jx_array *[]){op, in[1]}, &q);
    return jx_last_status();
  }
  jx_array *idx = jx_rule_moveaxis(in[1], bdim[1], 0);
  if (bdim[0] == JX_NOT_MAPPED) { /* the batch axis is one more index batch dim */
    q.l[0] = plus_one(offs, 0);
    q.i[0] = p->i[0] + 1;
    out[0] = jx_bind1(&jx_prim_gather, 2, (jx_array *[]){in[0], idx}, &q);
    return jx_last_status();
  }
  jx_array *op = jx_rule_moveaxis(in[0], bdim[0], 0);
  if (axis_size == 0) { /* no size-1 slice fits a size-0 batch axis: the (empty) result directly */
    jx_aval a[2] = {{op->dtype, op->weak, op->shape, 0}, {idx->dtype, 0, idx->shape, 0}}, o;
    for (int k = 0; k < 2; k++) {
      a[k].shape.rank--;
      for (int d = 0; d < a[k].shape.rank; d++) a[k].shape.dims[d] = a[k].shape.dims[d + 1];
    }
    jx_status st = jx_prim_gather.infer(ctx, a, &o);
    if (st) return st;
    jx_shape sh = {o.shape.rank + 1, {0}};
    for (int d = 0; d < o.shape.rank; d++) sh.dims[d + 1] = o.shape.dims[d];
    out[0] = jx_rule_zeros((jx_aval){o.dtype, 0, sh, 0});
    return jx_last_status();
  }
  int ivd = 0;
  idx = prepend_counts(idx, (int)p->i[0] + 1, axis_size, &ivd);
  q.l[3].n = ss->n + 1;
  q.l[3].v[0] = 1;
  for (int d = 0; d < ss->n; d++) q.l[3].v[d + 1] = ss->v[d];
  q.l[0] = plus_one(offs, 0);
  q.l[1] = plus_one(coll, 1);
  q.l[2] = plus_one(sim, 1);
  q.i[0] = ivd;
  out[0] = jx_bind1(&jx_prim_gather, 2, (jx_array *[]){op, idx}, &q);
  return jx_last_status();
}

/* ---- scatter batching (all five) ---- */
JX_BATCH_RULE(jx_batch_scatter) {
  const jx_params *p = ctx->params;
  const jx_prim *prim = ctx->prim;
  const jx_ilist *uwd = &p->l[0], *iwd = &p->l[1], *sdod = &p->l[2];
  jx_array *op = jx_rule_batch_to_front(in[0], bdim[0], axis_size);
  jx_array *up = jx_rule_batch_to_front(in[2], bdim[2], axis_size);
  jx_params q = *p;
  out_bdim[0] = 0;
  if (bdim[1] == JX_NOT_MAPPED) { /* the batch axis is one more window dim */
    q.l[0] = plus_one(uwd, 1);
    q.l[1] = plus_one(iwd, 0);
    q.l[2] = plus_one(sdod, 0);
    out[0] = scat(prim, op, in[1], up, &q);
    return jx_last_status();
  }
  int ivd = 0;
  jx_array *idx =
      prepend_counts(jx_rule_moveaxis(in[1], bdim[1], 0), (int)p->i[0] + 1, axis_size, &ivd);
  q.l[0] = plus_one(uwd, 0);
  q.l[1] = plus_one(iwd, 1);
  q.l[2] = plus_one(sdod, 1);
  q.i[0] = ivd;
  out[0] = scat(prim, op, idx, up, &q);
  return jx_last_status();
}

/* ---- scatter (replace) ---- */
JX_JVP_RULE(jx_jvp_scatter) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(&jx_prim_scatter, 3, x, p);
  ty[0] = NULL;
  if (!t[0] && !t[2]) return jx_last_status();
  jx_array *g_op = t[0] ? t[0] : jx_rule_zeros_like(x[0]);
  jx_array *g_up = t[2] ? t[2] : jx_rule_zeros_like(x[2]);
  /* a) an id (from 1) per update window, scattered like the updates */
  jx_shape us = x[2]->shape, is = us;
  for (int k = 0; k < p->l[0].n; k++) is.dims[p->l[0].v[k]] = 1;
  int64_t num = jx_shape_numel(is);
  jx_dtype idt = num < INT64_C(4294967295) ? JX_U32 : JX_U64;
  jx_array *ids = jx_sr_iota(idt, (jx_shape){1, {num}}, 0);
  jx_params rs = JX_PARAMS_INIT;
  rs.l[0].n = is.rank;
  for (int d = 0; d < is.rank; d++) rs.l[0].v[d] = is.dims[d];
  ids = b2(&jx_prim_add, jx_bind1(&jx_prim_reshape, 1, &ids, &rs), jx_sr_full(idt, is, 1));
  jx_params bc = JX_PARAMS_INIT;
  bc.l[0].n = bc.l[1].n = us.rank;
  for (int d = 0; d < us.rank; d++) {
    bc.l[0].v[d] = us.dims[d];
    bc.l[1].v[d] = d;
  }
  ids = jx_bind1(&jx_prim_broadcast_in_dim, 1, &ids, &bc);
  jx_array *scattered = scat(&jx_prim_scatter, jx_sr_full(idt, x[0]->shape, 0), x[1], ids, p);
  /* b) the id that won each update's element; c) keep the winners and the
   * operand elements no update touched; d) add them up */
  jx_array *won = b2(&jx_prim_eq, ids, inverse_gather(p, scattered, x[1], us));
  jx_array *kept = b2(&jx_prim_eq, scattered, jx_sr_full(idt, x[0]->shape, 0));
  ty[0] = scat(&jx_prim_scatter_add, sel(kept, jx_rule_zeros_like(g_op), g_op), x[1],
               sel(won, jx_rule_zeros_like(g_up), g_up), p);
  return jx_last_status();
}

/* ---- scatter_add ---- */
JX_JVP_RULE(jx_jvp_scatter_add) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(&jx_prim_scatter_add, 3, x, p);
  ty[0] = NULL;
  if (t[0] || t[2])
    ty[0] = scat(&jx_prim_scatter_add, t[0] ? t[0] : jx_rule_zeros_like(x[0]), x[1],
                 t[2] ? t[2] : jx_rule_zeros_like(x[2]), p);
  return jx_last_status();
}

JX_TRANSPOSE_RULE(jx_transpose_scatter_add) {
  ct_in[0] = ct_in[1] = ct_in[2] = NULL;
  if (!ct[0]) return JX_OK;
  if (linear[0]) ct_in[0] = ct[0];
  if (linear[2]) ct_in[2] = inverse_gather0(ctx->params, ct[0], in[1], avals[2].shape);
  return jx_last_status();
}

/* ---- scatter_mul ---- */

/* For each update u_j: the product of the other updates that land on its
 * operand element, without dividing by zero. With P the product of the
 * nonzero updates there and Z the count of zero ones: P / u_j when u_j != 0
 * and Z == 0, P when u_j == 0 and Z == 1, else 0. Updates the scatter drops
 * get 0. */
static jx_array *exclusive_products(const jx_params *p, jx_array *op, jx_array *idx, jx_array *u) {
  jx_array *zero_u = jx_rule_zeros_like(u), *one_u = jx_rule_full_like(u, 1);
  jx_array *is_zero = b2(&jx_prim_eq, u, zero_u);
  jx_array *u_nz = sel(is_zero, u, one_u);
  jx_array *prod = scat(&jx_prim_scatter_mul, jx_rule_full_like(op, 1), idx, u_nz, p);
  jx_array *zc =
      scat(&jx_prim_scatter_add, jx_rule_zeros_like(op), idx, sel(is_zero, zero_u, one_u), p);
  jx_array *P = inverse_gather0(p, prod, idx, u->shape);
  jx_array *Z = inverse_gather0(p, zc, idx, u->shape);
  jx_array *if_nz = sel(b2(&jx_prim_eq, Z, zero_u), zero_u, b2(&jx_prim_div, P, u_nz));
  jx_array *if_z = sel(b2(&jx_prim_eq, Z, one_u), zero_u, P);
  return sel(is_zero, if_nz, if_z);
}

JX_JVP_RULE(jx_jvp_scatter_mul) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(&jx_prim_scatter_mul, 3, x, p);
  jx_array *ta = t[0] ? scat(&jx_prim_scatter_mul, t[0], x[1], x[2], p) : NULL, *tb = NULL;
  if (t[2]) {
    jx_array *w = b2(&jx_prim_mul, t[2], exclusive_products(p, x[0], x[1], x[2]));
    tb = b2(&jx_prim_mul, x[0], scat(&jx_prim_scatter_add, jx_rule_zeros_like(x[0]), x[1], w, p));
  }
  ty[0] = jx_rule_add(ta, tb);
  return jx_last_status();
}

/* Only the operand is linear (the JVP never applies scatter_mul to updates'
 * tangents). */
JX_TRANSPOSE_RULE(jx_transpose_scatter_mul) {
  (void)avals;
  ct_in[0] = ct_in[1] = ct_in[2] = NULL;
  if (linear[2])
    return jx_error_set(JX_ERR_INTERNAL, "transpose of scatter_mul: the updates are linear");
  if (linear[0] && ct[0]) ct_in[0] = scat(&jx_prim_scatter_mul, ct[0], in[1], in[2], ctx->params);
  return jx_last_status();
}

/* ---- scatter_min / scatter_max: JAX's _scatter_extremal_jvp ---- */
JX_JVP_RULE(jx_jvp_scatter_extremum) {
  const jx_params *p = ctx->params;
  const jx_prim *prim = ctx->prim;
  y[0] = jx_bind1(prim, 3, x, p);
  ty[0] = NULL;
  if (!t[0] && !t[2]) return jx_last_status();
  jx_array *op = x[0], *idx = x[1], *u = x[2];
  jx_shape us = u->shape;
  jx_array *g_op = t[0] ? t[0] : jx_rule_zeros_like(op);
  jx_array *zero_u = jx_rule_zeros_like(u), *one_u = jx_rule_full_like(u, 1);
  jx_array *initial = inverse_gather(p, op, idx, us), *target = inverse_gather(p, y[0], idx, us);
  jx_array *success = b2(&jx_prim_eq, u, target), *retained = b2(&jx_prim_eq, initial, target);
  jx_array *num_updates = inverse_gather(
      p, scat(&jx_prim_scatter_add, jx_rule_zeros_like(op), idx, sel(success, zero_u, one_u), p),
      idx, us);
  jx_array *num_refs =
      inverse_gather(p, scat(&jx_prim_scatter_add, jx_rule_zeros_like(op), idx, one_u, p), idx, us);
  jx_array *inv_plus = b2(&jx_prim_div, one_u, b2(&jx_prim_add, num_updates, one_u));
  jx_array *upd_norm = sel(retained, b2(&jx_prim_div, one_u, num_updates), inv_plus);
  jx_array *upd_coef = sel(success, zero_u, upd_norm);
  jx_array *op_norm = sel(retained, zero_u, inv_plus);
  jx_array *op_coef = b2(&jx_prim_div, b2(&jx_prim_sub, op_norm, one_u), num_refs);
  jx_array *tu =
      jx_rule_add(t[0] ? b2(&jx_prim_mul, inverse_gather(p, g_op, idx, us), op_coef) : NULL,
                  t[2] ? b2(&jx_prim_mul, t[2], upd_coef) : NULL);
  ty[0] = scat(&jx_prim_scatter_add, g_op, idx, tu, p);
  return jx_last_status();
}
