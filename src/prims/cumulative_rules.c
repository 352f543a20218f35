/* Transformation rules of the cumulative reductions (rows in cumulative.c),
 * after JAX's lax/control_flow/loops.py:
 *  - cumsum is linear; its transpose is a cumsum in the other direction
 *    (_cumsum_transpose_rule);
 *  - cumprod, cummax, cummin differentiate the parallel prefix scan
 *    (_cumulative_jvp_rule: jvp of associative_scan with mul / max / min):
 *    the scan below carries (primal, tangent) pairs and combines them with
 *    the binary JVP rules of mul, max and min, so products through zeros
 *    are exact and ties of max/min share the tangent as lax.max does. The
 *    primal output is the primitive's own (bitwise equal to eager results);
 *    the scan's primals only feed its tangents;
 *  - batching shifts the axis past the batch axis (_cumred_batch_rule). */
#include "../base/error.h"
#include "binary_rules.h"
#include "prims.h"
#include "reduce_rules.h"
#include "rules.h"

static jx_array *cumsum_reversed(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)aval;
  jx_params q = *ctx->params;
  q.i[1] = !q.i[1];
  return jx_bind1(&jx_prim_cumsum, 1, &ct, &q);
}
JX_DEFLINEAR_TRANSPOSE(jx_transpose_cumsum, cumsum_reversed)

JX_BATCH_RULE(jx_batch_cumulative) {
  (void)axis_size;
  jx_params q = *ctx->params;
  int b = bdim[0];
  jx_array *x = in[0];
  if (b == JX_NOT_MAPPED) x = jx_rule_batch_to_front(in[0], b, axis_size), b = 0;
  if (b <= q.i[0]) q.i[0]++;
  out[0] = jx_bind1(ctx->prim, 1, &x, &q);
  out_bdim[0] = b;
  return jx_last_status();
}

/* ---- the JVP of associative_scan ---- */

typedef struct {
  jx_array *x, *t; /* primal and tangent (never NULL) */
} pair;

static jx_array *slice_in_dim(jx_array *x, int axis, int64_t lo, int64_t hi, int64_t stride) {
  jx_params q = JX_PARAMS_INIT;
  int r = x->shape.rank;
  q.l[0].n = q.l[1].n = q.l[2].n = r;
  for (int d = 0; d < r; d++) {
    q.l[1].v[d] = x->shape.dims[d];
    q.l[2].v[d] = 1;
  }
  q.l[0].v[axis] = lo;
  q.l[1].v[axis] = hi;
  q.l[2].v[axis] = stride;
  return jx_bind1(&jx_prim_slice, 1, &x, &q);
}

static pair slice_pair(pair e, int axis, int64_t lo, int64_t hi, int64_t stride) {
  return (pair){slice_in_dim(e.x, axis, lo, hi, stride), slice_in_dim(e.t, axis, lo, hi, stride)};
}

/* x padded with zeros along axis: lo before, hi after, one between elements */
static jx_array *spread(jx_array *x, int axis, int64_t lo, int64_t hi) {
  jx_params q = JX_PARAMS_INIT;
  int r = x->shape.rank;
  q.l[0].n = q.l[1].n = q.l[2].n = r;
  q.l[0].v[axis] = lo;
  q.l[1].v[axis] = hi;
  q.l[2].v[axis] = 1;
  jx_array *zero = jx_scalar(x->dtype, 0);
  zero->weak = 0;
  return jx_bind1(&jx_prim_pad, 2, (jx_array *[]){x, zero}, &q);
}

/* _interleave: a[0], b[0], a[1], b[1], ... (a has as many elements as b, or one more) */
static jx_array *interleave(jx_array *a, jx_array *b, int axis) {
  int same = a->shape.dims[axis] == b->shape.dims[axis];
  return jx_bind1(&jx_prim_add, 2,
                  (jx_array *[]){spread(a, axis, 0, same), spread(b, axis, 1, !same)}, NULL);
}

static jx_array *concat(jx_array *a, jx_array *b, int axis) {
  jx_params q = JX_PARAMS_INIT;
  q.i[0] = axis;
  return jx_bind1(&jx_prim_concatenate, 2, (jx_array *[]){a, b}, &q);
}

static jx_array *rev(jx_array *x, int axis) {
  jx_params q = JX_PARAMS_INIT;
  q.l[0].n = 1;
  q.l[0].v[0] = axis;
  return jx_bind1(&jx_prim_rev, 1, &x, &q);
}

/* op applied to a and b, and its tangent (op's JVP rule). */
static pair combine(const jx_prim *op, pair a, pair b) {
  static const jx_params none = JX_PARAMS_INIT;
  jx_array *xs[2] = {a.x, b.x}, *ts[2] = {a.t, b.t}, *y = NULL, *ty = NULL;
  op->jvp(&(jx_rule_ctx){op, &none, 2, 1, 0, NULL}, xs, ts, &y, &ty);
  if (!y || y->poisoned) return (pair){jx_poison(), jx_poison()};
  return (pair){y, ty ? ty : jx_rule_zeros_like(y)};
}

/* associative_scan's _scan: the odd elements are the scan of the pairwise
 * combined elements, the even ones combine those with the next element. */
static pair scan(const jx_prim *op, pair e, int axis) {
  int64_t n = e.x->shape.dims[axis];
  if (n < 2 || jx_last_status()) return e;
  pair reduced = combine(op, slice_pair(e, axis, 0, n - 1, 2), slice_pair(e, axis, 1, n, 2));
  pair odd = scan(op, reduced, axis);
  if (jx_last_status()) return odd;
  int64_t m = odd.x->shape.dims[axis];
  pair rest = slice_pair(e, axis, 2, n, 2);
  pair even = combine(op, n % 2 == 0 ? slice_pair(odd, axis, 0, m - 1, 1) : odd, rest);
  pair first = slice_pair(e, axis, 0, 1, 1);
  even = (pair){concat(first.x, even.x, axis), concat(first.t, even.t, axis)};
  return (pair){interleave(even.x, odd.x, axis), interleave(even.t, odd.t, axis)};
}

/* The JVP of the cumulative ctx->prim whose combining primitive is op. */
static jx_status jvp_scan(const jx_rule_ctx *ctx, const jx_prim *op, jx_array *const *x,
                          jx_array *const *t, jx_array **y, jx_array **ty) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(ctx->prim, 1, x, p);
  ty[0] = NULL;
  if (!t[0] || jx_rule_no_tangent(x[0]->dtype) || y[0]->poisoned) return jx_last_status();
  int axis = (int)p->i[0], reverse = p->i[1] != 0;
  pair e = {x[0], t[0]};
  if (reverse) e = (pair){rev(e.x, axis), rev(e.t, axis)};
  pair r = scan(op, e, axis);
  ty[0] = reverse ? rev(r.t, axis) : r.t;
  return jx_last_status();
}

JX_JVP_RULE(jx_jvp_cumprod) { return jvp_scan(ctx, &jx_prim_mul, x, t, y, ty); }
JX_JVP_RULE(jx_jvp_cummax) { return jvp_scan(ctx, &jx_prim_max, x, t, y, ty); }
JX_JVP_RULE(jx_jvp_cummin) { return jvp_scan(ctx, &jx_prim_min, x, t, y, ty); }
