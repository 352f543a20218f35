/* Transformation rules of the shape primitives (rows in shape.c). They all
 * only move elements, so they are linear: the JVP applies the primitive to the
 * tangent, the transpose moves the cotangent back (summing where
 * broadcast_in_dim copied), and batching puts the batch axis in front and
 * shifts the dims in the parameters, as JAX's lax rules do. iota has no
 * operands: it is never differentiated nor batched. */
#include "../base/error.h"
#include "prims.h"
#include "rules.h"
#include "structural_rules.h"

static jx_array *bind_list(const jx_prim *prim, jx_array *x, const jx_ilist *l) {
  jx_params q = JX_PARAMS_INIT;
  q.l[0] = *l;
  return jx_bind1(prim, 1, &x, &q);
}

/* ---- transposes ---- */

/* Sums the cotangent over the dims broadcast_in_dim created or expanded, then
 * restores the operand's size-1 dims (JAX's _broadcast_in_dim_transpose_rule). */
static jx_array *unbroadcast(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  jx_shape os = aval->shape;
  int keep[JX_MAX_RANK] = {0};
  for (int i = 0; i < os.rank; i++)
    if (os.dims[i] != 1) keep[ctx->params->l[1].v[i]] = 1;
  jx_ilist axes = {0, {0}};
  for (int d = 0; d < ct->shape.rank; d++)
    if (!keep[d]) axes.v[axes.n++] = d;
  jx_array *r = axes.n ? bind_list(&jx_prim_reduce_sum, ct, &axes) : ct;
  if (!jx_shape_equal(r->shape, os)) {
    jx_ilist sh = {os.rank, {0}};
    for (int i = 0; i < os.rank; i++) sh.v[i] = os.dims[i];
    r = bind_list(&jx_prim_reshape, r, &sh);
  }
  return r;
}
JX_DEFLINEAR_TRANSPOSE(jx_transpose_broadcast_in_dim, unbroadcast)

static jx_array *reshape_back(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)ctx;
  jx_ilist sh = {aval->shape.rank, {0}};
  for (int i = 0; i < sh.n; i++) sh.v[i] = aval->shape.dims[i];
  return bind_list(&jx_prim_reshape, ct, &sh);
}
JX_DEFLINEAR_TRANSPOSE(jx_transpose_reshape, reshape_back)

/* squeeze and expand_dims with the same dims undo each other. */
static jx_array *unsqueeze(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)aval;
  return bind_list(&jx_prim_expand_dims, ct, &ctx->params->l[0]);
}
JX_DEFLINEAR_TRANSPOSE(jx_transpose_squeeze, unsqueeze)

static jx_array *unexpand(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)aval;
  return bind_list(&jx_prim_squeeze, ct, &ctx->params->l[0]);
}
JX_DEFLINEAR_TRANSPOSE(jx_transpose_expand_dims, unexpand)

static jx_array *untranspose(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)aval;
  const jx_ilist *perm = &ctx->params->l[0];
  jx_ilist inv = {perm->n, {0}};
  for (int i = 0; i < inv.n; i++) inv.v[perm->v[i]] = i;
  return bind_list(&jx_prim_transpose, ct, &inv);
}
JX_DEFLINEAR_TRANSPOSE(jx_transpose_transpose, untranspose)

static jx_array *unrev(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)aval;
  return bind_list(&jx_prim_rev, ct, &ctx->params->l[0]);
}
JX_DEFLINEAR_TRANSPOSE(jx_transpose_rev, unrev)

/* ---- batching ---- */

/* Dim d of the unbatched operand in the operand batched along b. */
static int64_t shifted(int64_t d, int b) { return d < b ? d : d + 1; }

JX_BATCH_RULE(jx_batch_broadcast_in_dim) {
  const jx_params *p = ctx->params;
  jx_array *x = jx_rule_batch_to_front(in[0], bdim[0], axis_size);
  jx_params q = JX_PARAMS_INIT;
  q.l[0].n = p->l[0].n + 1;
  q.l[0].v[0] = axis_size;
  for (int i = 0; i < p->l[0].n; i++) q.l[0].v[i + 1] = p->l[0].v[i];
  q.l[1].n = p->l[1].n + 1;
  for (int i = 0; i < p->l[1].n; i++) q.l[1].v[i + 1] = p->l[1].v[i] + 1;
  if (q.l[0].n > JX_MAX_RANK)
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "vmap of broadcast_in_dim: rank over %d",
                        JX_MAX_RANK);
  out[0] = jx_bind1(&jx_prim_broadcast_in_dim, 1, &x, &q);
  out_bdim[0] = 0;
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_reshape) {
  const jx_params *p = ctx->params;
  if (p->l[0].n + 1 > JX_MAX_RANK)
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "vmap of reshape: rank over %d", JX_MAX_RANK);
  jx_array *x = jx_rule_batch_to_front(in[0], bdim[0], axis_size);
  jx_ilist sh = {p->l[0].n + 1, {axis_size}};
  for (int i = 0; i < p->l[0].n; i++) sh.v[i + 1] = p->l[0].v[i];
  out[0] = bind_list(&jx_prim_reshape, x, &sh);
  out_bdim[0] = 0;
  return jx_last_status();
}

/* squeeze and expand_dims: batch axis in front, their dims one further. */
static jx_status batch_dims_plus_one(const jx_prim *prim, const jx_params *p, jx_array *const *in,
                                     const int *bdim, int64_t n, jx_array **out, int *out_bdim) {
  jx_array *x = jx_rule_batch_to_front(in[0], bdim[0], n);
  jx_ilist d = p->l[0];
  for (int i = 0; i < d.n; i++) d.v[i]++;
  out[0] = bind_list(prim, x, &d);
  out_bdim[0] = 0;
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_squeeze) {
  return batch_dims_plus_one(&jx_prim_squeeze, ctx->params, in, bdim, axis_size, out, out_bdim);
}

JX_BATCH_RULE(jx_batch_expand_dims) {
  return batch_dims_plus_one(&jx_prim_expand_dims, ctx->params, in, bdim, axis_size, out, out_bdim);
}

/* The batch axis goes first in the permutation: one transpose does both. */
JX_BATCH_RULE(jx_batch_transpose) {
  const jx_params *p = ctx->params;
  (void)axis_size;
  int b = bdim[0];
  jx_ilist perm = {p->l[0].n + 1, {b}};
  for (int i = 0; i < p->l[0].n; i++) perm.v[i + 1] = shifted(p->l[0].v[i], b);
  out[0] = bind_list(&jx_prim_transpose, in[0], &perm);
  out_bdim[0] = 0;
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_rev) {
  (void)axis_size;
  int b = bdim[0];
  jx_ilist d = ctx->params->l[0];
  for (int i = 0; i < d.n; i++) d.v[i] = shifted(d.v[i], b);
  out[0] = bind_list(&jx_prim_rev, in[0], &d);
  out_bdim[0] = b;
  return jx_last_status();
}
