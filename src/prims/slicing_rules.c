/* Transformation rules of the slicing primitives (rows in slicing.c), after
 * JAX's lax/slicing.py and lax/lax.py: all are linear in their array
 * operands (the integer start indices have no tangent), so the JVPs apply the
 * primitive to the tangents and the transposes move cotangents back:
 * pad <-> slice, concatenate -> slices, dynamic_slice <-> dynamic_update_slice.
 * Batching puts the batch axis in front; batched start indices turn
 * dynamic_slice into a gather and dynamic_update_slice into a scatter, whose
 * index vectors begin with the batch position (JAX does the same). */
#include <stdlib.h>

#include "../base/error.h"
#include "prims.h"
#include "rules.h"
#include "structural_rules.h"

static jx_array *scalar_zero(jx_dtype dt) { return jx_rule_zeros((jx_aval){dt, 0, {0, {0}}, 0}); }

/* Sum of all elements (a scalar). */
static jx_array *total(jx_array *x) {
  if (x->shape.rank == 0) return x;
  jx_params q = JX_PARAMS_INIT;
  q.l[0].n = x->shape.rank;
  for (int d = 0; d < x->shape.rank; d++) q.l[0].v[d] = d;
  return jx_bind1(&jx_prim_reduce_sum, 1, &x, &q);
}

/* ---- pad ---- */
JX_JVP_RULE(jx_jvp_pad) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(&jx_prim_pad, 2, x, p);
  ty[0] = NULL;
  if (t[0] || t[1]) {
    jx_array *a[2] = {t[0] ? t[0] : jx_rule_zeros_like(x[0]),
                      t[1] ? t[1] : jx_rule_zeros_like(x[1])};
    ty[0] = jx_bind1(&jx_prim_pad, 2, a, p);
  }
  return jx_last_status();
}

/* JAX's _pad_transpose: un-pad with the negated edges (which also undoes
 * negative padding, with zeros), then take every (interior + 1)-th element;
 * the padding value receives what the operand did not. */
JX_TRANSPOSE_RULE(jx_transpose_pad) {
  const jx_params *p = ctx->params;
  (void)in, (void)avals;
  ct_in[0] = ct_in[1] = NULL;
  if (!ct[0]) return JX_OK;
  int r = ct[0]->shape.rank;
  jx_params q = JX_PARAMS_INIT;
  q.l[0].n = q.l[1].n = q.l[2].n = r;
  for (int d = 0; d < r; d++) {
    q.l[0].v[d] = -p->l[0].v[d];
    q.l[1].v[d] = -p->l[1].v[d];
  }
  jx_array *unpadded =
      jx_bind1(&jx_prim_pad, 2, (jx_array *[]){ct[0], scalar_zero(ct[0]->dtype)}, &q);
  jx_params sl = JX_PARAMS_INIT;
  sl.l[0].n = sl.l[1].n = sl.l[2].n = r;
  for (int d = 0; d < r && !unpadded->poisoned; d++) {
    sl.l[1].v[d] = unpadded->shape.dims[d];
    sl.l[2].v[d] = p->l[2].v[d] + 1;
  }
  jx_array *t_op = jx_bind1(&jx_prim_slice, 1, &unpadded, &sl);
  if (linear[0]) ct_in[0] = t_op;
  if (linear[1]) ct_in[1] = jx_rule_sub(total(ct[0]), total(t_op));
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_pad) {
  const jx_params *p = ctx->params;
  jx_array *op = jx_rule_batch_to_front(in[0], bdim[0], axis_size);
  jx_params q = *p;
  int r = p->l[0].n;
  if (r + 1 > JX_MAX_RANK)
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "vmap of pad: rank over %d", JX_MAX_RANK);
  for (int k = 0; k < 3; k++) {
    q.l[k].n = r + 1;
    q.l[k].v[0] = 0;
    for (int d = 0; d < r; d++) q.l[k].v[d + 1] = p->l[k].v[d];
  }
  out_bdim[0] = 0;
  if (bdim[1] == JX_NOT_MAPPED) {
    out[0] = jx_bind1(&jx_prim_pad, 2, (jx_array *[]){op, in[1]}, &q);
    return jx_last_status();
  }
  /* a batched padding value: pad with zeros, then select the padding value
   * (broadcast per batch element) wherever a mask padded with false says */
  jx_array *x = jx_bind1(&jx_prim_pad, 2, (jx_array *[]){op, scalar_zero(op->dtype)}, &q);
  jx_array *ones = jx_sr_full(JX_BOOL, op->shape, 1);
  jx_array *mask = jx_bind1(&jx_prim_pad, 2, (jx_array *[]){ones, scalar_zero(JX_BOOL)}, &q);
  jx_params b = JX_PARAMS_INIT;
  b.l[0].n = x->shape.rank;
  for (int d = 0; d < x->shape.rank; d++) b.l[0].v[d] = x->shape.dims[d];
  b.l[1].n = 1;
  jx_array *pv = in[1];
  pv = jx_bind1(&jx_prim_broadcast_in_dim, 1, &pv, &b);
  out[0] = jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){mask, pv, x}, NULL);
  return jx_last_status();
}

/* ---- concatenate ---- */
JX_JVP_RULE(jx_jvp_concatenate) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(&jx_prim_concatenate, ctx->nin, x, p);
  ty[0] = NULL;
  int any = 0;
  for (int i = 0; i < ctx->nin; i++) any |= t[i] != NULL;
  if (!any) return jx_last_status();
  jx_array **a = malloc(sizeof *a * (size_t)ctx->nin);
  if (!a) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "concatenate JVP: out of memory");
  for (int i = 0; i < ctx->nin; i++) a[i] = t[i] ? t[i] : jx_rule_zeros_like(x[i]);
  ty[0] = jx_bind1(&jx_prim_concatenate, ctx->nin, a, p);
  free(a);
  return jx_last_status();
}

JX_TRANSPOSE_RULE(jx_transpose_concatenate) {
  (void)in;
  int ax = (int)ctx->params->i[0];
  int64_t off = 0;
  for (int i = 0; i < ctx->nin; i++) {
    jx_shape sh = avals[i].shape;
    ct_in[i] = NULL;
    if (linear[i] && ct[0]) {
      jx_params q = JX_PARAMS_INIT;
      q.l[0].n = q.l[1].n = sh.rank;
      for (int d = 0; d < sh.rank; d++) q.l[1].v[d] = ct[0]->shape.dims[d];
      q.l[0].v[ax] = off;
      q.l[1].v[ax] = off + sh.dims[ax];
      ct_in[i] = jx_bind1(&jx_prim_slice, 1, &ct[0], &q);
    }
    off += sh.dims[ax];
  }
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_concatenate) {
  const jx_params *p = ctx->params;
  jx_array **a = malloc(sizeof *a * (size_t)ctx->nin);
  if (!a) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "vmap of concatenate: out of memory");
  for (int i = 0; i < ctx->nin; i++) a[i] = jx_rule_batch_to_front(in[i], bdim[i], axis_size);
  jx_params q = *p;
  q.i[0] = p->i[0] + 1;
  out[0] = jx_bind1(&jx_prim_concatenate, ctx->nin, a, &q);
  out_bdim[0] = 0;
  free(a);
  return jx_last_status();
}

/* ---- slice ---- */

/* JAX's _slice_transpose_rule: pad the cotangent back with zeros, the strides
 * becoming interior padding. */
JX_TRANSPOSE_RULE(jx_transpose_slice) {
  const jx_params *p = ctx->params;
  (void)in, (void)linear;
  ct_in[0] = NULL;
  if (!ct[0]) return JX_OK;
  jx_shape os = avals[0].shape, ts = ct[0]->shape;
  jx_params q = JX_PARAMS_INIT;
  q.l[0].n = q.l[1].n = q.l[2].n = os.rank;
  for (int d = 0; d < os.rank; d++) {
    int64_t st = p->l[2].n ? p->l[2].v[d] : 1, lo = p->l[0].v[d];
    int64_t real_limit = lo + (ts.dims[d] == 0 ? 0 : 1 + (ts.dims[d] - 1) * st);
    q.l[0].v[d] = lo;
    q.l[1].v[d] = os.dims[d] - real_limit;
    q.l[2].v[d] = st - 1;
  }
  ct_in[0] = jx_bind1(&jx_prim_pad, 2, (jx_array *[]){ct[0], scalar_zero(ct[0]->dtype)}, &q);
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_slice) {
  const jx_params *p = ctx->params;
  int b = bdim[0], r = p->l[0].n;
  jx_params q = JX_PARAMS_INIT;
  for (int k = 0; k < 3; k++) {
    if (k == 2 && p->l[k].n == 0) continue; /* empty strides stay "all 1" */
    q.l[k].n = r + 1;
    for (int d = 0, j = 0; d <= r; d++)
      q.l[k].v[d] = d == b ? (k == 0 ? 0 : k == 1 ? axis_size : 1) : p->l[k].v[j++];
  }
  out[0] = jx_bind1(&jx_prim_slice, 1, &in[0], &q);
  out_bdim[0] = b;
  return jx_last_status();
}

/* ---- dynamic_slice ---- */
JX_TRANSPOSE_RULE(jx_transpose_dynamic_slice) {
  (void)linear;
  for (int i = 0; i < ctx->nin; i++) ct_in[i] = NULL;
  if (!ct[0]) return JX_OK;
  jx_array **a = malloc(sizeof *a * (size_t)(ctx->nin + 1));
  if (!a) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "dynamic_slice transpose: out of memory");
  a[0] = jx_rule_zeros((jx_aval){avals[0].dtype, 0, avals[0].shape, 0});
  a[1] = ct[0];
  for (int i = 1; i < ctx->nin; i++) a[i + 1] = in[i];
  ct_in[0] = jx_bind1(&jx_prim_dynamic_update_slice, ctx->nin + 1, a, NULL);
  free(a);
  return jx_last_status();
}

static int any_mapped(int first, int nin, const int *bdim) {
  for (int i = first; i < nin; i++)
    if (bdim[i] != JX_NOT_MAPPED) return 1;
  return 0;
}

/* Batched starts in[first..nin) as indices [n, 1 + r] whose rows are
 * (batch position, starts...), in one integer dtype. */
static jx_array *batched_starts(int first, int nin, jx_array *const *in, const int *bdim,
                                int64_t n) {
  int r = nin - first;
  jx_dtype dt = in[first]->dtype;
  for (int i = first + 1; i < nin; i++)
    if (in[i]->dtype != dt) dt = JX_I64;
  dt = jx_sr_index_dtype(dt, n);
  jx_array *cols[JX_MAX_RANK + 1];
  cols[0] = jx_sr_iota(dt, (jx_shape){2, {n, 1}}, 0);
  jx_params e = JX_PARAMS_INIT;
  e.l[0].n = 1;
  e.l[0].v[0] = 1;
  for (int k = 0; k < r; k++) {
    jx_array *c = jx_sr_convert(jx_rule_batch_to_front(in[first + k], bdim[first + k], n), dt);
    cols[k + 1] = jx_bind1(&jx_prim_expand_dims, 1, &c, &e);
  }
  jx_params q = JX_PARAMS_INIT;
  q.i[0] = 1;
  return jx_bind1(&jx_prim_concatenate, r + 1, cols, &q);
}

/* A zero start of the dtype of the other starts (i32 when there are none). */
static jx_array *zero_start(int first, int nin, jx_array *const *in) {
  return scalar_zero(nin > first ? in[first]->dtype : JX_I32);
}

JX_BATCH_RULE(jx_batch_dynamic_slice) {
  const jx_params *p = ctx->params;
  int r = ctx->nin - 1;
  if (r + 1 > JX_MAX_RANK)
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "vmap of dynamic_slice: rank over %d", JX_MAX_RANK);
  jx_array *op = jx_rule_batch_to_front(in[0], bdim[0], axis_size);
  out_bdim[0] = 0;
  if (!any_mapped(1, ctx->nin, bdim)) {
    jx_array *a[JX_MAX_RANK + 1];
    a[0] = op;
    a[1] = zero_start(1, ctx->nin, in);
    for (int i = 1; i < ctx->nin; i++) a[i + 1] = in[i];
    jx_params q = JX_PARAMS_INIT;
    q.l[0].n = r + 1;
    q.l[0].v[0] = axis_size;
    for (int d = 0; d < r; d++) q.l[0].v[d + 1] = p->l[0].v[d];
    out[0] = jx_bind1(&jx_prim_dynamic_slice, r + 2, a, &q);
    return jx_last_status();
  }
  /* a gather of one window per batch element; clip mode clamps the starts
   * exactly as dynamic_slice does */
  jx_array *idx = batched_starts(1, ctx->nin, in, bdim, axis_size);
  jx_params g = JX_PARAMS_INIT;
  g.l[0].n = r;
  for (int d = 0; d < r; d++) g.l[0].v[d] = d + 1;
  g.l[1].n = 1;
  g.l[2].n = r + 1;
  for (int d = 0; d <= r; d++) g.l[2].v[d] = d;
  g.l[3].n = r + 1;
  g.l[3].v[0] = 1;
  for (int d = 0; d < r; d++) g.l[3].v[d + 1] = p->l[0].v[d];
  g.i[0] = 1;
  out[0] = jx_bind1(&jx_prim_gather, 2, (jx_array *[]){op, idx}, &g);
  return jx_last_status();
}

/* ---- dynamic_update_slice ---- */
JX_JVP_RULE(jx_jvp_dynamic_update_slice) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(&jx_prim_dynamic_update_slice, ctx->nin, x, p);
  ty[0] = NULL;
  if (!t[0] && !t[1]) return jx_last_status();
  jx_array **a = malloc(sizeof *a * (size_t)ctx->nin);
  if (!a) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "dynamic_update_slice JVP: out of memory");
  a[0] = t[0] ? t[0] : jx_rule_zeros_like(x[0]);
  a[1] = t[1] ? t[1] : jx_rule_zeros_like(x[1]);
  for (int i = 2; i < ctx->nin; i++) a[i] = x[i];
  ty[0] = jx_bind1(&jx_prim_dynamic_update_slice, ctx->nin, a, p);
  free(a);
  return jx_last_status();
}

/* operand: the cotangent with the updated window zeroed; update: that window. */
JX_TRANSPOSE_RULE(jx_transpose_dynamic_update_slice) {
  for (int i = 0; i < ctx->nin; i++) ct_in[i] = NULL;
  if (!ct[0]) return JX_OK;
  jx_array **a = malloc(sizeof *a * (size_t)ctx->nin);
  if (!a)
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "dynamic_update_slice transpose: out of memory");
  if (linear[0]) {
    a[0] = ct[0];
    a[1] = jx_rule_zeros((jx_aval){avals[1].dtype, 0, avals[1].shape, 0});
    for (int i = 2; i < ctx->nin; i++) a[i] = in[i];
    ct_in[0] = jx_bind1(&jx_prim_dynamic_update_slice, ctx->nin, a, ctx->params);
  }
  if (linear[1]) {
    a[0] = ct[0];
    for (int i = 2; i < ctx->nin; i++) a[i - 1] = in[i];
    jx_params q = JX_PARAMS_INIT;
    q.l[0].n = avals[1].shape.rank;
    for (int d = 0; d < q.l[0].n; d++) q.l[0].v[d] = avals[1].shape.dims[d];
    ct_in[1] = jx_bind1(&jx_prim_dynamic_slice, ctx->nin - 1, a, &q);
  }
  free(a);
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_dynamic_update_slice) {
  int r = ctx->nin - 2;
  if (r + 1 > JX_MAX_RANK)
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "vmap of dynamic_update_slice: rank over %d",
                        JX_MAX_RANK);
  jx_array *op = jx_rule_batch_to_front(in[0], bdim[0], axis_size);
  jx_array *up = jx_rule_batch_to_front(in[1], bdim[1], axis_size);
  out_bdim[0] = 0;
  if (!any_mapped(2, ctx->nin, bdim)) {
    jx_array *a[JX_MAX_RANK + 2];
    a[0] = op;
    a[1] = up;
    a[2] = zero_start(2, ctx->nin, in);
    for (int i = 2; i < ctx->nin; i++) a[i + 1] = in[i];
    out[0] = jx_bind1(&jx_prim_dynamic_update_slice, ctx->nin + 1, a, NULL);
    return jx_last_status();
  }
  /* a scatter of one window per batch element; clip mode clamps the starts
   * exactly as dynamic_update_slice does */
  jx_array *idx = batched_starts(2, ctx->nin, in, bdim, axis_size);
  jx_params q = JX_PARAMS_INIT;
  q.l[0].n = r;
  for (int d = 0; d < r; d++) q.l[0].v[d] = d + 1;
  q.l[1].n = 1;
  q.l[2].n = r + 1;
  for (int d = 0; d <= r; d++) q.l[2].v[d] = d;
  q.i[0] = 1;
  q.i[1] = 1;
  out[0] = jx_bind1(&jx_prim_scatter, 3, (jx_array *[]){op, idx, up}, &q);
  return jx_last_status();
}
