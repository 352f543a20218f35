/* Windowed reductions: lax.reduce_window with add/max/min, and flax.linen's
 * max_pool and avg_pool on top of it.
 *
 * Pools take (batch..., spatial..., features) inputs, as flax: the window and
 * strides cover the spatial dims just before the last one; batch and feature
 * dims get window and stride 1. "SAME" pads each spatial dim by
 * max((ceil(n / s) - 1) * s + w - n, 0), the smaller half before (as
 * lax.padtype_to_pads). avg_pool divides by the full window size, padding
 * included (flax's count_include_pad=True); integer inputs give f64, as
 * flax's division by np.prod(window) does in 64-bit mode. */
#include <string.h>

#include "../array/array.h"
#include "ops_util.h"

/* Copies a user list of rank a_rank into l, or fills it with dflt when empty. */
static jx_status list_param(const char *op, const char *what, jx_shape v, jx_array *a, int64_t dflt,
                            jx_ilist *l) {
  char s[JX_AVAL_STR_CAP];
  int r = a->shape.rank;
  if (v.rank != 0 && v.rank != r)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %s has %d entries for operand %s of rank %d",
                        op, what, v.rank, jx_aval_str(a->dtype, a->shape, s), r);
  l->n = r;
  for (int i = 0; i < r; i++) l->v[i] = v.rank ? v.dims[i] : dflt;
  return JX_OK;
}

static const jx_prim *window_prim(const char *op) {
  if (!op) return NULL;
  if (strcmp(op, "sum") == 0) return &jx_prim_reduce_window_sum;
  if (strcmp(op, "max") == 0) return &jx_prim_reduce_window_max;
  if (strcmp(op, "min") == 0) return &jx_prim_reduce_window_min;
  return NULL;
}

static jx_array *window(const char *fn, const jx_prim *p, jx_array *a, const jx_params *pp) {
  if (p == &jx_prim_reduce_window_sum && a->dtype == JX_BOOL) {
    jx_error_set(JX_ERR_DTYPE, "%s: bool operands cannot be summed", fn);
    return jx_poison();
  }
  return jx_bind1(p, 1, &a, pp);
}

jx_array *jx_reduce_window(jx_array *a, const char *op, jx_shape window_dims, jx_shape strides,
                           jx_shape pad_lo, jx_shape pad_hi) {
  const char *fn = "jx_reduce_window";
  if (jx_check_inputs(fn, 1, &a)) return jx_poison();
  const jx_prim *p = window_prim(op);
  if (!p) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: op \"%s\" is not one of sum, max, min", fn,
                 op ? op : "(null)");
    return jx_poison();
  }
  char s[JX_AVAL_STR_CAP];
  if (window_dims.rank != a->shape.rank) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: window has %d entries for operand %s of rank %d", fn,
                 window_dims.rank, jx_aval_str(a->dtype, a->shape, s), a->shape.rank);
    return jx_poison();
  }
  jx_params pp = JX_PARAMS_INIT;
  if (list_param(fn, "window", window_dims, a, 1, &pp.l[0]) ||
      list_param(fn, "strides", strides, a, 1, &pp.l[1]) ||
      list_param(fn, "pad_lo", pad_lo, a, 0, &pp.l[2]) ||
      list_param(fn, "pad_hi", pad_hi, a, 0, &pp.l[3]))
    return jx_poison();
  return window(fn, p, a, &pp);
}

/* flax.linen.pooling.pool: params for reduce_window over the spatial dims. */
static jx_status pool_params(const char *fn, jx_array *x, jx_shape win, jx_shape strides,
                             const char *padding, jx_params *pp) {
  char s[JX_AVAL_STR_CAP];
  int r = x->shape.rank, nsp = win.rank;
  if (nsp < 0 || r < nsp + 1)
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: a window of %d spatial dims needs an input of rank >= %d "
                        "(batch..., spatial..., features), got %s",
                        fn, nsp, nsp + 1, jx_aval_str(x->dtype, x->shape, s));
  if (strides.rank != 0 && strides.rank != nsp)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: strides have %d entries, window has %d", fn,
                        strides.rank, nsp);
  int same;
  if (padding && strcmp(padding, "VALID") == 0)
    same = 0;
  else if (padding && strcmp(padding, "SAME") == 0)
    same = 1;
  else
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: padding \"%s\" is not \"VALID\" or \"SAME\"",
                        fn, padding ? padding : "(null)");
  int first = r - 1 - nsp; /* the first spatial dim */
  for (int k = 0; k < 4; k++) pp->l[k].n = r;
  for (int i = 0; i < r; i++) {
    int sp = i >= first && i < r - 1;
    int64_t w = sp ? win.dims[i - first] : 1;
    int64_t st = sp && strides.rank ? strides.dims[i - first] : 1;
    if (w < 1 || st < 1)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: window and strides must be >= 1, got window %lld stride %lld", fn,
                          (long long)w, (long long)st);
    int64_t n = x->shape.dims[i], pad = 0;
    if (same) {
      int64_t out = (n + st - 1) / st;
      pad = (out - 1) * st + w - n;
      if (pad < 0) pad = 0;
    }
    pp->l[0].v[i] = w;
    pp->l[1].v[i] = st;
    pp->l[2].v[i] = pad / 2;
    pp->l[3].v[i] = pad - pad / 2;
  }
  return JX_OK;
}

jx_array *jx_max_pool(jx_array *x, jx_shape win, jx_shape strides, const char *padding) {
  const char *fn = "jx_max_pool";
  if (jx_check_inputs(fn, 1, &x)) return jx_poison();
  jx_params pp = JX_PARAMS_INIT;
  if (pool_params(fn, x, win, strides, padding, &pp)) return jx_poison();
  return window(fn, &jx_prim_reduce_window_max, x, &pp);
}

jx_array *jx_avg_pool(jx_array *x, jx_shape win, jx_shape strides, const char *padding) {
  const char *fn = "jx_avg_pool";
  if (jx_check_inputs(fn, 1, &x)) return jx_poison();
  jx_params pp = JX_PARAMS_INIT;
  if (pool_params(fn, x, win, strides, padding, &pp)) return jx_poison();
  jx_array *y = window(fn, &jx_prim_reduce_window_sum, x, &pp);
  if (y->poisoned) return y;
  double size = 1;
  for (int i = 0; i < win.rank; i++) size *= (double)win.dims[i];
  jx_dtype dt = jx_is_float(y->dtype) ? y->dtype : JX_F64;
  y = jx_ops_convert(y, dt, 0);
  jx_array *d = jx_ops_broadcast(jx_ops_convert(jx_scalar(dt, size), dt, 0), y->shape);
  return jx_bind1(&jx_prim_div, 2, (jx_array *[]){y, d}, NULL);
}
