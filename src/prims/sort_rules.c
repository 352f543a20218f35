/* Transformation rules of sort and top_k (rows in sort.c), after JAX's
 * lax.py:
 *  - sort (_sort_jvp): the operands are sorted once more together with an
 *    iota along the sorted dimension (same keys, so the same stable order);
 *    the iota comes out as the permutation, and each tangent is gathered
 *    with it (take_along_axis, a gather: linear in the tangent, transposed
 *    by scatter_add). JAX gathers with operand batching dims; jx's gather
 *    has none, so take_along_axis spells out the full index instead;
 *  - top_k (_top_k_jvp): the tangent gathered at the returned indices;
 *  - batching (_sort_batch_rule, _top_k_batch_rule): sort moves every
 *    operand's batch axis to the first mapped operand's (broadcasting the
 *    unmapped ones) and shifts the dimension; top_k keeps the batch axis
 *    unless it is the last one (top_k works on the last axis), which moves
 *    to the front. */
#include <stdlib.h>

#include "../base/error.h"
#include "prims.h"
#include "reduce_rules.h"
#include "rules.h"

static jx_array *iota(jx_dtype dt, jx_shape shape, int dim) {
  jx_params q = JX_PARAMS_INIT;
  q.dtype = dt;
  q.i[0] = dim;
  q.l[0].n = shape.rank;
  for (int d = 0; d < shape.rank; d++) q.l[0].v[d] = shape.dims[d];
  return jx_bind1(&jx_prim_iota, 0, NULL, &q);
}

/* A permutation the sort made (i32 or i64) as jx_rule_take_along_axis's
 * i64 indices. */
static jx_array *to_i64(jx_array *perm) {
  if (perm->dtype == JX_I64) return perm;
  jx_params q = JX_PARAMS_INIT;
  q.dtype = JX_I64;
  return jx_bind1(&jx_prim_convert_element_type, 1, &perm, &q);
}

JX_JVP_RULE(jx_jvp_sort) {
  const jx_params *p = ctx->params;
  int dim = (int)p->i[0];
  jx_array **args = malloc(sizeof *args * (size_t)(2 * (ctx->nin + 1)));
  if (!args) {
    for (int i = 0; i < ctx->nin; i++) y[i] = jx_poison(), ty[i] = NULL;
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "sort: out of memory");
  }
  jx_array **outs = args + ctx->nin + 1;
  jx_shape shape = x[0]->shape;
  jx_dtype idt = shape.dims[dim] <= INT32_MAX ? JX_I32 : JX_I64;
  for (int i = 0; i < ctx->nin; i++) args[i] = x[i];
  args[ctx->nin] = iota(idt, shape, dim);
  jx_status st = jx_bind(&jx_prim_sort, ctx->nin + 1, args, p, outs);
  for (int i = 0; i < ctx->nin; i++) {
    y[i] = outs[i];
    ty[i] = NULL;
    if (!st && t[i] && !jx_rule_no_tangent(x[i]->dtype))
      ty[i] = jx_rule_take_along_axis(t[i], to_i64(outs[ctx->nin]), dim);
  }
  free(args);
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_sort) {
  (void)axis_size;
  int nb = JX_NOT_MAPPED, proto = 0;
  for (int i = 0; i < ctx->nin && nb == JX_NOT_MAPPED; i++)
    if (bdim[i] != JX_NOT_MAPPED) nb = bdim[i], proto = i;
  if (nb == JX_NOT_MAPPED) return jx_error_set(JX_ERR_INTERNAL, "sort: no batched operand");
  jx_array **args = malloc(sizeof *args * (size_t)ctx->nin);
  if (!args) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "sort: out of memory");
  jx_shape ps = in[proto]->shape;
  for (int i = 0; i < ctx->nin; i++) {
    if (bdim[i] != JX_NOT_MAPPED) {
      args[i] = jx_rule_moveaxis(in[i], bdim[i], nb);
      continue;
    }
    jx_params q = JX_PARAMS_INIT;
    q.l[0].n = ps.rank;
    for (int d = 0; d < ps.rank; d++) {
      q.l[0].v[d] = ps.dims[d];
      if (d != nb) q.l[1].v[q.l[1].n++] = d;
    }
    args[i] = jx_bind1(&jx_prim_broadcast_in_dim, 1, &in[i], &q);
  }
  jx_params q = *ctx->params;
  if (nb <= q.i[0]) q.i[0]++;
  jx_status st = jx_bind(&jx_prim_sort, ctx->nin, args, &q, out);
  for (int i = 0; i < ctx->nin; i++) out_bdim[i] = nb;
  free(args);
  return st;
}

JX_JVP_RULE(jx_jvp_top_k) {
  jx_status st = jx_bind(&jx_prim_top_k, 1, x, ctx->params, y);
  ty[0] = ty[1] = NULL;
  if (!st && t[0] && !jx_rule_no_tangent(x[0]->dtype))
    ty[0] = jx_rule_take_along_axis(t[0], to_i64(y[1]), x[0]->shape.rank - 1);
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_top_k) {
  int b = bdim[0];
  jx_array *x = in[0];
  if (b == JX_NOT_MAPPED || b == x->shape.rank - 1) {
    x = jx_rule_batch_to_front(x, b, axis_size);
    b = 0;
  }
  jx_status st = jx_bind(&jx_prim_top_k, 1, &x, ctx->params, out);
  out_bdim[0] = out_bdim[1] = b;
  return st;
}
