/* Transformation rules of the reductions (rows in reduce.c), after JAX's
 * lax.py:
 *  - reduce_sum is linear; its transpose broadcasts the cotangent back over
 *    the reduced axes (_reduce_sum_transpose_rule);
 *  - reduce_prod differentiates a pairwise product tree, as _reduce_prod_jvp_rule
 *    (JVP of _reduce_tree): the reduced axes are flattened into a leading
 *    axis that is halved until one element is left, each step a product
 *    x1 * x2 with tangent t1 * x2 + x1 * t2. No division, so zeros (even
 *    several) are handled exactly. The primal output is the primitive's own
 *    (the tree only gives the tangent), so y agrees bitwise with eager code;
 *  - reduce_max/min use _reduce_chooser_jvp_rule: the tangent averaged over
 *    the positions equal to the extremum (ties share it equally);
 *  - reduce_and/or and argmax/argmin have integer or bool outputs: zero
 *    tangents (jx_jvp_zero in the rows).
 * Batching (batching.defreducer, _argminmax batching): the reduced axes are
 * renumbered around the batch axis, which stays where it is. */
#include "reduce_rules.h"
#include "../base/error.h"
#include "prims.h"
#include "rules.h"

static jx_array *b2(const jx_prim *pr, jx_array *a, jx_array *b) {
  return jx_bind1(pr, 2, (jx_array *[]){a, b}, NULL);
}

static jx_array *bind_list(const jx_prim *pr, jx_array *x, const jx_ilist *l) {
  jx_params q = JX_PARAMS_INIT;
  q.l[0] = *l;
  return jx_bind1(pr, 1, &x, &q);
}

static jx_array *convert(jx_array *x, jx_dtype dt) {
  if (x->dtype == dt) return x;
  jx_params q = JX_PARAMS_INIT;
  q.dtype = dt;
  return jx_bind1(&jx_prim_convert_element_type, 1, &x, &q);
}

/* x (a reduction over axes of an array of shape s) broadcast back to s. */
static jx_array *broadcast_back(jx_array *x, jx_shape s, const jx_ilist *axes) {
  jx_params q = JX_PARAMS_INIT;
  int drop[JX_MAX_RANK] = {0};
  for (int i = 0; i < axes->n; i++) drop[axes->v[i]] = 1;
  q.l[0].n = s.rank;
  for (int d = 0; d < s.rank; d++) {
    q.l[0].v[d] = s.dims[d];
    if (!drop[d]) q.l[1].v[q.l[1].n++] = d;
  }
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &x, &q);
}

/* x sliced to [lo, hi) along axis 0 */
static jx_array *slice0(jx_array *x, int64_t lo, int64_t hi) {
  jx_params q = JX_PARAMS_INIT;
  int r = x->shape.rank;
  q.l[0].n = q.l[1].n = r;
  for (int d = 0; d < r; d++) q.l[1].v[d] = x->shape.dims[d];
  q.l[0].v[0] = lo;
  q.l[1].v[0] = hi;
  return jx_bind1(&jx_prim_slice, 1, &x, &q);
}

/* x with one element of value v appended along axis 0 */
static jx_array *pad0_one(jx_array *x, double v) {
  jx_params q = JX_PARAMS_INIT;
  int r = x->shape.rank;
  q.l[0].n = q.l[1].n = q.l[2].n = r;
  q.l[1].v[0] = 1;
  jx_array *val = jx_scalar(x->dtype, v);
  val->weak = 0;
  return jx_bind1(&jx_prim_pad, 2, (jx_array *[]){x, val}, &q);
}

static jx_array *unreduce(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  return broadcast_back(ct, aval->shape, &ctx->params->l[0]);
}
JX_DEFLINEAR_TRANSPOSE(jx_transpose_reduce_sum, unreduce)

/* x with the reduced axes moved to the front and flattened into one of size n. */
static jx_array *flatten_axes(jx_array *x, const jx_ilist *axes, int64_t *n) {
  jx_shape s = x->shape;
  int drop[JX_MAX_RANK] = {0};
  jx_ilist perm = {0, {0}}, sizes = {1, {1}};
  for (int i = 0; i < axes->n; i++) {
    drop[axes->v[i]] = 1;
    perm.v[perm.n++] = axes->v[i];
    sizes.v[0] *= s.dims[axes->v[i]];
  }
  for (int d = 0; d < s.rank; d++)
    if (!drop[d]) {
      perm.v[perm.n++] = d;
      sizes.v[sizes.n++] = s.dims[d];
    }
  int identity = 1;
  for (int d = 0; d < perm.n; d++) identity &= perm.v[d] == d;
  if (!identity) x = bind_list(&jx_prim_transpose, x, &perm);
  *n = sizes.v[0];
  return bind_list(&jx_prim_reshape, x, &sizes);
}

JX_JVP_RULE(jx_jvp_reduce_prod) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(&jx_prim_reduce_prod, 1, x, p);
  ty[0] = NULL;
  if (!t[0] || jx_rule_no_tangent(x[0]->dtype) || y[0]->poisoned) return jx_last_status();
  if (p->l[0].n == 0) { /* a reduction over no axes is the identity */
    ty[0] = t[0];
    return jx_last_status();
  }
  int64_t n;
  jx_array *xs = flatten_axes(x[0], &p->l[0], &n), *ts = flatten_axes(t[0], &p->l[0], &n);
  if (n == 0) {
    ty[0] = jx_rule_zeros_like(y[0]);
    return jx_last_status();
  }
  while (n > 1) { /* _reduce_tree: halve the leading axis, padding the odd half with 1 */
    int64_t n1 = (n + 1) / 2, n2 = n - n1;
    jx_array *x1 = slice0(xs, 0, n1), *x2 = slice0(xs, n1, n);
    jx_array *t1 = slice0(ts, 0, n1), *t2 = slice0(ts, n1, n);
    if (n2 != n1) {
      x2 = pad0_one(x2, 1);
      t2 = pad0_one(t2, 0);
    }
    ts = b2(&jx_prim_add, b2(&jx_prim_mul, t1, x2), b2(&jx_prim_mul, x1, t2));
    xs = b2(&jx_prim_mul, x1, x2);
    n = n1;
    if (jx_last_status()) return jx_last_status();
  }
  jx_ilist out = {y[0]->shape.rank, {0}};
  for (int d = 0; d < out.n; d++) out.v[d] = y[0]->shape.dims[d];
  ty[0] = bind_list(&jx_prim_reshape, ts, &out);
  return jx_last_status();
}

JX_JVP_RULE(jx_jvp_reduce_chooser) {
  const jx_params *p = ctx->params;
  const jx_prim *prim = ctx->prim;
  y[0] = jx_bind1(prim, 1, x, p);
  ty[0] = NULL;
  if (!t[0] || jx_rule_no_tangent(x[0]->dtype) || y[0]->poisoned) return jx_last_status();
  const jx_ilist *axes = &p->l[0];
  jx_array *loc =
      convert(b2(&jx_prim_eq, x[0], broadcast_back(y[0], x[0]->shape, axes)), t[0]->dtype);
  jx_array *counts = bind_list(&jx_prim_reduce_sum, loc, axes);
  ty[0] =
      b2(&jx_prim_div, bind_list(&jx_prim_reduce_sum, b2(&jx_prim_mul, t[0], loc), axes), counts);
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_reduce) {
  int b = bdim[0] == JX_NOT_MAPPED ? 0 : bdim[0];
  jx_array *x0 =
      bdim[0] == JX_NOT_MAPPED ? jx_rule_batch_to_front(in[0], bdim[0], axis_size) : in[0];
  jx_params q = *ctx->params;
  int below = 0;
  for (int i = 0; i < q.l[0].n; i++) {
    if (q.l[0].v[i] >= b)
      q.l[0].v[i]++;
    else
      below++;
  }
  out[0] = jx_bind1(ctx->prim, 1, &x0, &q);
  out_bdim[0] = b - below;
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_arg) {
  const jx_params *p = ctx->params;
  int b = bdim[0] == JX_NOT_MAPPED ? 0 : bdim[0];
  jx_array *x0 =
      bdim[0] == JX_NOT_MAPPED ? jx_rule_batch_to_front(in[0], bdim[0], axis_size) : in[0];
  jx_params q = *p;
  if (b <= q.i[0]) q.i[0]++;
  out[0] = jx_bind1(ctx->prim, 1, &x0, &q);
  out_bdim[0] = b > p->i[0] ? b - 1 : b;
  return jx_last_status();
}
