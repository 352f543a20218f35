#include "rules.h"

#include <stdlib.h>

#include "../base/error.h"
#include "prims.h"

jx_array *jx_rule_bind1(const jx_prim *p, int nin, jx_array *const *x, const jx_params *params) {
  return jx_bind1(p, nin, x, params);
}

int jx_rule_no_tangent(jx_dtype dt) { return !jx_is_inexact(dt); }

static jx_array *literal(jx_dtype dt, double v) {
  jx_array *s = jx_scalar(dt, v);
  if (s->poisoned) return s;
  s->weak = 0; /* the rule's constants take the operand's exact dtype */
  return s;
}

jx_array *jx_rule_zeros(jx_aval a) {
  jx_array *s = literal(a.dtype, 0);
  if (a.shape.rank == 0) return s;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = a.shape.rank;
  for (int i = 0; i < a.shape.rank; i++) p.l[0].v[i] = a.shape.dims[i];
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &s, &p);
}

jx_array *jx_rule_zeros_like(jx_array *x) {
  return jx_rule_zeros((jx_aval){x->dtype, 0, x->shape, 0});
}

jx_array *jx_rule_full_like(jx_array *x, double v) {
  jx_array *s = literal(x->dtype, v);
  if (x->shape.rank == 0) return s;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = x->shape.rank;
  for (int i = 0; i < x->shape.rank; i++) p.l[0].v[i] = x->shape.dims[i];
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &s, &p);
}

jx_array *jx_rule_add(jx_array *a, jx_array *b) {
  if (!a) return b;
  if (!b) return a;
  return jx_bind1(&jx_prim_add, 2, (jx_array *[]){a, b}, NULL);
}

jx_array *jx_rule_neg(jx_array *a) { return a ? jx_bind1(&jx_prim_neg, 1, &a, NULL) : NULL; }

jx_array *jx_rule_sub(jx_array *a, jx_array *b) {
  if (!b) return a;
  if (!a) return jx_rule_neg(b);
  return jx_bind1(&jx_prim_sub, 2, (jx_array *[]){a, b}, NULL);
}

jx_array *jx_rule_scale(jx_array *t, jx_array *c) {
  if (!t) return NULL;
  return jx_bind1(&jx_prim_mul, 2, (jx_array *[]){t, c}, NULL);
}

jx_status jx_rule_apply(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  return jx_bind_sub(ctx->prim, ctx->nin, in, ctx->params, ctx->nsub, ctx->subs, out);
}

jx_array *jx_rule_apply1(const jx_rule_ctx *ctx, jx_array *const *in) {
  return jx_bind1(ctx->prim, ctx->nin, in, ctx->params);
}

JX_JVP_RULE(jx_jvp_zero) {
  (void)t;
  jx_status st = jx_rule_apply(ctx, x, y);
  for (int o = 0; o < ctx->nout; o++) ty[o] = NULL;
  return st;
}

JX_JVP_RULE(jx_jvp_linear_first) {
  int nin = ctx->nin;
  y[0] = jx_rule_apply1(ctx, x);
  ty[0] = NULL;
  if (t[0]) {
    jx_array *args[JX_MAX_RANK + 2];
    if (nin > JX_MAX_RANK + 2)
      return jx_error_set(JX_ERR_INTERNAL, "%s: too many operands for its JVP", ctx->prim->name);
    args[0] = t[0];
    for (int i = 1; i < nin; i++) args[i] = x[i];
    ty[0] = jx_rule_apply1(ctx, args);
  }
  return jx_last_status();
}

jx_status jx_transpose_linear(const jx_rule_ctx *ctx, jx_linear_transpose_fn f,
                              const jx_aval *avals, jx_array *const *ct, jx_array **ct_in) {
  ct_in[0] = NULL;
  if (!ct[0]) return JX_OK;
  ct_in[0] = f(ctx, ct[0], &avals[0]);
  return jx_last_status();
}

jx_array *jx_deriv_identity(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x, jx_array *y) {
  (void)ctx, (void)x, (void)y;
  return g;
}

jx_status jx_jvp_elementwise(const jx_rule_ctx *ctx, const jx_deriv_fn *d, jx_array *const *x,
                             jx_array *const *t, jx_array **y, jx_array **ty) {
  y[0] = jx_rule_apply1(ctx, x);
  ty[0] = NULL;
  if (jx_rule_no_tangent(y[0]->dtype)) return jx_last_status();
  for (int i = 0; i < ctx->nin; i++)
    if (t[i] && d[i]) ty[0] = jx_rule_add(ty[0], d[i](ctx, t[i], x, y[0]));
  return jx_last_status();
}

JX_JVP_RULE(jx_jvp_bilinear) {
  y[0] = jx_rule_apply1(ctx, x);
  jx_array *lhs = t[0] ? jx_rule_apply1(ctx, (jx_array *[]){t[0], x[1]}) : NULL;
  jx_array *rhs = t[1] ? jx_rule_apply1(ctx, (jx_array *[]){x[0], t[1]}) : NULL;
  ty[0] = jx_rule_add(lhs, rhs);
  return jx_last_status();
}

jx_status jx_transpose_bilinear(const jx_rule_ctx *ctx, jx_bilinear_transpose_fn lhs,
                                jx_bilinear_transpose_fn rhs, jx_array *const *in,
                                const jx_aval *avals, const uint8_t *linear, jx_array *const *ct,
                                jx_array **ct_in) {
  if (linear[0] && linear[1])
    return jx_error_set(JX_ERR_INTERNAL, "transpose of %s: both operands are linear",
                        ctx->prim->name);
  ct_in[0] = ct_in[1] = NULL;
  if (!ct[0]) return JX_OK;
  if (linear[0]) ct_in[0] = lhs(ctx, ct[0], &avals[0], in[1]);
  if (linear[1]) ct_in[1] = rhs(ctx, ct[0], &avals[1], in[0]);
  return jx_last_status();
}

jx_array *jx_rule_moveaxis(jx_array *x, int from, int to) {
  if (from == to) return x;
  int r = x->shape.rank;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = r;
  int k = 0;
  for (int i = 0; i < r; i++) {
    if (i == from) continue;
    if (k == to) p.l[0].v[k++] = from;
    p.l[0].v[k++] = i;
  }
  if (k == to) p.l[0].v[k++] = from;
  return jx_bind1(&jx_prim_transpose, 1, &x, &p);
}

jx_array *jx_rule_batch_to_front(jx_array *x, int bdim, int64_t n) {
  if (bdim != JX_NOT_MAPPED) return jx_rule_moveaxis(x, bdim, 0);
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = x->shape.rank + 1;
  p.l[0].v[0] = n;
  for (int i = 0; i < x->shape.rank; i++) p.l[0].v[i + 1] = x->shape.dims[i];
  p.l[1].n = x->shape.rank;
  for (int i = 0; i < x->shape.rank; i++) p.l[1].v[i] = i + 1;
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &x, &p);
}

/* The full operand index of every output position (the iota of each other
 * dim and idx along axis), gathering single elements. */
jx_array *jx_rule_take_along_axis(jx_array *x, jx_array *idx, int axis) {
  int r = x->shape.rank;
  jx_array *parts[JX_MAX_RANK] = {0};
  for (int d = 0; d < r; d++) {
    jx_array *c = idx;
    if (d != axis) {
      jx_params q = JX_PARAMS_INIT;
      q.dtype = JX_I64;
      q.l[0].n = idx->shape.rank;
      for (int k = 0; k < idx->shape.rank; k++) q.l[0].v[k] = idx->shape.dims[k];
      q.i[0] = d;
      c = jx_bind1(&jx_prim_iota, 0, NULL, &q);
    }
    jx_params e = JX_PARAMS_INIT;
    e.l[0].n = 1;
    e.l[0].v[0] = r;
    parts[d] = jx_bind1(&jx_prim_expand_dims, 1, &c, &e);
  }
  jx_params cp = JX_PARAMS_INIT;
  cp.i[0] = r;
  jx_array *full = jx_bind1(&jx_prim_concatenate, r, parts, &cp);
  jx_params p = JX_PARAMS_INIT;
  p.l[1].n = p.l[2].n = p.l[3].n = r;
  for (int d = 0; d < r; d++) {
    p.l[1].v[d] = p.l[2].v[d] = d;
    p.l[3].v[d] = 1;
  }
  p.i[0] = r;
  p.i[1] = JX_GATHER_FILL;
  return jx_bind1(&jx_prim_gather, 2, (jx_array *[]){x, full}, &p);
}

/* The batched operands, the primitive applied to them, every output batched
 * along axis 0. */
static jx_status apply_batched(const jx_rule_ctx *ctx, jx_array **args, jx_array **out,
                               int *out_bdim) {
  jx_status st = jx_rule_apply(ctx, args, out);
  for (int o = 0; o < ctx->nout; o++) out_bdim[o] = 0;
  return st;
}

JX_BATCH_RULE(jx_batch_vectorized) {
  jx_array *small[16] = {0},
           **args = ctx->nin > 16 ? malloc(sizeof *args * (size_t)ctx->nin) : small;
  if (!args) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", ctx->prim->name);
  for (int i = 0; i < ctx->nin; i++) args[i] = jx_rule_batch_to_front(in[i], bdim[i], axis_size);
  jx_status st = apply_batched(ctx, args, out, out_bdim);
  if (args != small) free(args);
  return st;
}

/* x, an operand of per-example rank 0 batched along its only axis,
 * broadcast over the batched full shape `full` (n first). */
static jx_array *broadcast_leading(jx_array *x, jx_shape full) {
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = full.rank;
  for (int i = 0; i < full.rank; i++) p.l[0].v[i] = full.dims[i];
  p.l[1].n = 1;
  p.l[1].v[0] = 0;
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &x, &p);
}

JX_BATCH_RULE(jx_batch_broadcasting) {
  int nin = ctx->nin, full = -1, full_rank = 0;
  jx_array *small[16] = {0}, **args = nin > 16 ? malloc(sizeof *args * (size_t)nin) : small;
  if (!args) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", ctx->prim->name);
  for (int i = 0; i < nin; i++) { /* the per-example rank of the full-shaped operands */
    int r = in[i]->shape.rank - (bdim[i] != JX_NOT_MAPPED);
    if (full < 0 || r > full_rank) full = i, full_rank = r;
  }
  args[full] = jx_rule_batch_to_front(in[full], bdim[full], axis_size);
  for (int i = 0; i < nin; i++) {
    if (i == full) continue;
    int r = in[i]->shape.rank - (bdim[i] != JX_NOT_MAPPED);
    if (bdim[i] == JX_NOT_MAPPED && r == 0 && full_rank > 0)
      args[i] = in[i];
    else if (r == full_rank)
      args[i] = jx_rule_batch_to_front(in[i], bdim[i], axis_size);
    else
      args[i] = broadcast_leading(in[i], args[full]->shape);
  }
  jx_status st = apply_batched(ctx, args, out, out_bdim);
  if (args != small) free(args);
  return st;
}
