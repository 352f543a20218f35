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

#define UNUSED_JVP (void)nin, (void)nout, (void)nsub, (void)s
#define UNUSED_T   (void)nin, (void)in, (void)linear, (void)nout, (void)nsub, (void)s
#define UNUSED_B   (void)nin, (void)nout, (void)nsub, (void)s

static jx_array *bind_list(const jx_prim *prim, jx_array *x, const jx_ilist *l) {
  jx_params q = JX_PARAMS_INIT;
  q.l[0] = *l;
  return jx_bind1(prim, 1, &x, &q);
}

JX_SR_JVP(jx_jvp_linear_first) {
  (void)nout, (void)nsub, (void)s;
  const jx_prim *prim = jx_rule_current_prim;
  y[0] = jx_bind1(prim, nin, x, p);
  ty[0] = NULL;
  if (t[0]) {
    jx_array *args[JX_MAX_RANK + 2];
    if (nin > JX_MAX_RANK + 2)
      return jx_error_set(JX_ERR_INTERNAL, "%s: too many operands for its JVP", prim->name);
    args[0] = t[0];
    for (int i = 1; i < nin; i++) args[i] = x[i];
    ty[0] = jx_bind1(prim, nin, args, p);
  }
  return jx_last_status();
}

/* ---- transposes ---- */

/* Sums the cotangent over the dims broadcast_in_dim created or expanded, then
 * restores the operand's size-1 dims (JAX's _broadcast_in_dim_transpose_rule). */
JX_SR_TRANSPOSE(jx_transpose_broadcast_in_dim) {
  UNUSED_T;
  ct_in[0] = NULL;
  if (!ct[0]) return JX_OK;
  jx_shape os = avals[0].shape;
  int keep[JX_MAX_RANK] = {0};
  for (int i = 0; i < os.rank; i++)
    if (os.dims[i] != 1) keep[p->l[1].v[i]] = 1;
  jx_ilist axes = {0, {0}};
  for (int d = 0; d < ct[0]->shape.rank; d++)
    if (!keep[d]) axes.v[axes.n++] = d;
  jx_array *r = axes.n ? bind_list(&jx_prim_reduce_sum, ct[0], &axes) : ct[0];
  if (!jx_shape_equal(r->shape, os)) {
    jx_ilist sh = {os.rank, {0}};
    for (int i = 0; i < os.rank; i++) sh.v[i] = os.dims[i];
    r = bind_list(&jx_prim_reshape, r, &sh);
  }
  ct_in[0] = r;
  return jx_last_status();
}

JX_SR_TRANSPOSE(jx_transpose_reshape) {
  UNUSED_T;
  (void)p;
  ct_in[0] = NULL;
  if (!ct[0]) return JX_OK;
  jx_shape os = avals[0].shape;
  jx_ilist sh = {os.rank, {0}};
  for (int i = 0; i < os.rank; i++) sh.v[i] = os.dims[i];
  ct_in[0] = bind_list(&jx_prim_reshape, ct[0], &sh);
  return jx_last_status();
}

/* squeeze and expand_dims with the same dims undo each other. */
JX_SR_TRANSPOSE(jx_transpose_squeeze) {
  UNUSED_T;
  (void)avals;
  ct_in[0] = ct[0] ? bind_list(&jx_prim_expand_dims, ct[0], &p->l[0]) : NULL;
  return jx_last_status();
}

JX_SR_TRANSPOSE(jx_transpose_expand_dims) {
  UNUSED_T;
  (void)avals;
  ct_in[0] = ct[0] ? bind_list(&jx_prim_squeeze, ct[0], &p->l[0]) : NULL;
  return jx_last_status();
}

JX_SR_TRANSPOSE(jx_transpose_transpose) {
  UNUSED_T;
  (void)avals;
  jx_ilist inv = {p->l[0].n, {0}};
  for (int i = 0; i < inv.n; i++) inv.v[p->l[0].v[i]] = i;
  ct_in[0] = ct[0] ? bind_list(&jx_prim_transpose, ct[0], &inv) : NULL;
  return jx_last_status();
}

JX_SR_TRANSPOSE(jx_transpose_rev) {
  UNUSED_T;
  (void)avals;
  ct_in[0] = ct[0] ? bind_list(&jx_prim_rev, ct[0], &p->l[0]) : NULL;
  return jx_last_status();
}

/* ---- batching ---- */

/* Dim d of the unbatched operand in the operand batched along b. */
static int64_t shifted(int64_t d, int b) { return d < b ? d : d + 1; }

JX_SR_BATCH(jx_batch_broadcast_in_dim) {
  UNUSED_B;
  jx_array *x = jx_rule_batch_to_front(in[0], bdim[0], n);
  jx_params q = JX_PARAMS_INIT;
  q.l[0].n = p->l[0].n + 1;
  q.l[0].v[0] = n;
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

JX_SR_BATCH(jx_batch_reshape) {
  UNUSED_B;
  if (p->l[0].n + 1 > JX_MAX_RANK)
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "vmap of reshape: rank over %d", JX_MAX_RANK);
  jx_array *x = jx_rule_batch_to_front(in[0], bdim[0], n);
  jx_ilist sh = {p->l[0].n + 1, {n}};
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

JX_SR_BATCH(jx_batch_squeeze) {
  UNUSED_B;
  return batch_dims_plus_one(&jx_prim_squeeze, p, in, bdim, n, out, out_bdim);
}

JX_SR_BATCH(jx_batch_expand_dims) {
  UNUSED_B;
  return batch_dims_plus_one(&jx_prim_expand_dims, p, in, bdim, n, out, out_bdim);
}

/* The batch axis goes first in the permutation: one transpose does both. */
JX_SR_BATCH(jx_batch_transpose) {
  UNUSED_B;
  (void)n;
  int b = bdim[0];
  jx_ilist perm = {p->l[0].n + 1, {b}};
  for (int i = 0; i < p->l[0].n; i++) perm.v[i + 1] = shifted(p->l[0].v[i], b);
  out[0] = bind_list(&jx_prim_transpose, in[0], &perm);
  out_bdim[0] = 0;
  return jx_last_status();
}

JX_SR_BATCH(jx_batch_rev) {
  UNUSED_B;
  (void)n;
  int b = bdim[0];
  jx_ilist d = p->l[0];
  for (int i = 0; i < d.n; i++) d.v[i] = shifted(d.v[i], b);
  out[0] = bind_list(&jx_prim_rev, in[0], &d);
  out_bdim[0] = b;
  return jx_last_status();
}
