/* Transformation rules of the windowed reductions (rows in window.c), after
 * JAX's lax/windowed_reductions.py:
 *  - reduce_window_sum is linear; its transpose is JAX's
 *    _reduce_window_sum_transpose_rule: the cotangent, dilated by the strides
 *    and padded as for a convolution's input gradient
 *    (_conv_general_vjp_lhs_padding; negative padding crops), summed over
 *    the same window with the base dilation as strides;
 *  - reduce_window_max/min: JAX uses the select_and_gather_add primitive
 *    (each window carries the tangent of its chosen element). jx has no such
 *    primitive and gets the same tangent from ordinary ones: the operand and
 *    the tangent are dilated and padded as the window sees them (identity
 *    -inf/+inf resp. 0), and for each of the window's positions a strided
 *    slice gives, for every output, the element at that position. The
 *    tangent of the first position (row-major in the window) whose value
 *    equals the output is selected. This is linear in the tangent (pad,
 *    slice and select_n transpose), differentiable again, and costs one
 *    slice per window position, which suits pooling windows. Among tied
 *    maxima one element gets the whole tangent, as with XLA's select (JAX
 *    does not average here, unlike reduce_max);
 *  - batching (_reduce_window_batch_rule): a window of 1 with stride 1, no
 *    padding and no dilation on the batch axis. */
#include <math.h>

#include "../base/error.h"
#include "prims.h"
#include "reduce_rules.h"
#include "rules.h"

/* The six lists of a reduce_window row filled to the operand's rank. */
typedef struct {
  int64_t v[6][JX_MAX_RANK]; /* window, strides, pad lo, pad hi, base dil., window dil. */
} wlists;
enum { WIN, STRIDE, LO, HI, BDIL, WDIL };

static wlists read_lists(const jx_params *p, int rank) {
  wlists w;
  for (int k = 0; k < 6; k++)
    for (int d = 0; d < rank; d++)
      w.v[k][d] = p->l[k].n ? p->l[k].v[d] : (k == LO || k == HI) ? 0 : 1;
  return w;
}

static jx_params write_lists(const wlists *w, int rank) {
  jx_params q = JX_PARAMS_INIT;
  for (int k = 0; k < 6; k++) {
    q.l[k].n = rank;
    for (int d = 0; d < rank; d++) q.l[k].v[d] = w->v[k][d];
  }
  return q;
}

static int64_t dilate(int64_t n, int64_t d) { return n == 0 ? 0 : (n - 1) * d + 1; }

static jx_array *literal(jx_dtype dt, double v) {
  jx_array *a = jx_scalar(dt, v);
  a->weak = 0;
  return a;
}

static jx_array *pad(jx_array *x, jx_array *value, const int64_t *lo, const int64_t *hi,
                     const int64_t *interior) {
  jx_params q = JX_PARAMS_INIT;
  int r = x->shape.rank;
  q.l[0].n = q.l[1].n = q.l[2].n = r;
  for (int d = 0; d < r; d++) {
    q.l[0].v[d] = lo[d];
    q.l[1].v[d] = hi[d];
    q.l[2].v[d] = interior[d];
  }
  return jx_bind1(&jx_prim_pad, 2, (jx_array *[]){x, value}, &q);
}

JX_TRANSPOSE_RULE(jx_transpose_reduce_window_sum) {
  (void)in, (void)linear;
  ct_in[0] = NULL;
  if (!ct[0]) return JX_OK;
  jx_shape is = avals[0].shape;
  int r = is.rank;
  if (jx_shape_numel(is) == 0) {
    ct_in[0] = jx_rule_zeros((jx_aval){ct[0]->dtype, 0, is, 0});
    return jx_last_status();
  }
  wlists w = read_lists(ctx->params, r);
  int64_t lo[JX_MAX_RANK] = {0}, hi[JX_MAX_RANK] = {0}, interior[JX_MAX_RANK] = {0};
  for (int d = 0; d < r; d++) {
    int64_t lhs = dilate(is.dims[d], w.v[BDIL][d]), rhs = dilate(w.v[WIN][d], w.v[WDIL][d]);
    int64_t out = dilate(ct[0]->shape.dims[d], w.v[STRIDE][d]);
    lo[d] = rhs - w.v[LO][d] - 1;
    hi[d] = lhs + rhs - 1 - out - lo[d];
    interior[d] = w.v[STRIDE][d] - 1;
  }
  jx_array *padded = pad(ct[0], literal(ct[0]->dtype, 0), lo, hi, interior);
  wlists t = w;
  for (int d = 0; d < r; d++) {
    t.v[STRIDE][d] = w.v[BDIL][d];
    t.v[LO][d] = t.v[HI][d] = 0;
    t.v[BDIL][d] = 1;
  }
  jx_params q = write_lists(&t, r);
  ct_in[0] = jx_bind1(&jx_prim_reduce_window_sum, 1, &padded, &q);
  return jx_last_status();
}

JX_JVP_RULE(jx_jvp_reduce_window_chooser) {
  const jx_params *p = ctx->params;
  const jx_prim *prim = ctx->prim;
  y[0] = jx_bind1(prim, 1, x, p);
  ty[0] = NULL;
  if (!t[0] || jx_rule_no_tangent(x[0]->dtype) || y[0]->poisoned) return jx_last_status();
  jx_array *acc = jx_rule_zeros_like(y[0]);
  if (jx_shape_numel(y[0]->shape) == 0) {
    ty[0] = acc;
    return jx_last_status();
  }
  int r = x[0]->shape.rank;
  wlists w = read_lists(p, r);
  int64_t interior[JX_MAX_RANK] = {0}, nwin = 1;
  for (int d = 0; d < r; d++) {
    interior[d] = w.v[BDIL][d] - 1;
    nwin *= w.v[WIN][d];
  }
  double ident = prim == &jx_prim_reduce_window_max ? -INFINITY : INFINITY;
  jx_array *xp = pad(x[0], literal(x[0]->dtype, ident), w.v[LO], w.v[HI], interior);
  jx_array *tp = pad(t[0], literal(t[0]->dtype, 0), w.v[LO], w.v[HI], interior);
  /* window positions from the last to the first, so that the first match wins */
  for (int64_t k = nwin - 1; k >= 0 && !jx_last_status(); k--) {
    jx_params q = JX_PARAMS_INIT;
    q.l[0].n = q.l[1].n = q.l[2].n = r;
    int64_t rest = k;
    for (int d = r - 1; d >= 0; d--) {
      int64_t pos = rest % w.v[WIN][d], o = y[0]->shape.dims[d];
      rest /= w.v[WIN][d];
      q.l[0].v[d] = pos * w.v[WDIL][d];
      q.l[1].v[d] = q.l[0].v[d] + (o - 1) * w.v[STRIDE][d] + 1;
      q.l[2].v[d] = w.v[STRIDE][d];
    }
    jx_array *xk = jx_bind1(&jx_prim_slice, 1, &xp, &q);
    jx_array *tk = jx_bind1(&jx_prim_slice, 1, &tp, &q);
    jx_array *hit = jx_bind1(&jx_prim_eq, 2, (jx_array *[]){xk, y[0]}, NULL);
    acc = jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){hit, acc, tk}, NULL);
  }
  ty[0] = acc;
  return jx_last_status();
}

JX_BATCH_RULE(jx_batch_reduce_window) {
  int b = bdim[0];
  jx_array *x = in[0];
  if (b == JX_NOT_MAPPED) x = jx_rule_batch_to_front(x, b, axis_size), b = 0;
  int r = x->shape.rank; /* with the batch axis */
  wlists w = read_lists(ctx->params, r - 1), v;
  for (int k = 0; k < 6; k++)
    for (int d = 0, e = 0; d < r; d++)
      v.v[k][d] = d == b ? ((k == LO || k == HI) ? 0 : 1) : w.v[k][e++];
  jx_params q = write_lists(&v, r);
  out[0] = jx_bind1(ctx->prim, 1, &x, &q);
  out_bdim[0] = b;
  return jx_last_status();
}
