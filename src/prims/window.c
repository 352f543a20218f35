/* Windowed reductions, as lax.reduce_window with add, max or min:
 * window dims = l0, strides = l1, padding lo = l2, padding hi = l3,
 * base (lhs) dilation = l4, window dilation = l5. Each list has one entry per
 * operand dim; an empty list means all 1 (l0, l1, l4, l5) or all 0 (l2, l3).
 * The operand is dilated (base dilation puts d-1 holes between elements),
 * padded, and every window position reads the op's identity from holes and
 * padding (sum 0, max -inf or the integer minimum, min +inf or the maximum).
 * Output dim = floor((padded - dilated window) / stride) + 1, or 0 when the
 * window does not fit. Sums take numbers, max/min every dtype; integers
 * wrap; floats accumulate in f64 (windows are short) and round once; float
 * max/min propagate NaN. Padding must be >= 0 (lax also allows cropping with
 * negative padding; jx does not yet). Windows wholly inside an f32/f64
 * operand (pooling) take window_fast.c's path, with the same bits.
 * Transformation rules: window_rules.c. */
#include "../base/error.h"
#include "prims.h"
#include "rules.h"
#include "reduce_rules.h"
#include "structural_rules.h"
#include "window_kernels.h"

static const char *const list_names[6] = {"window_dimensions", "window_strides", "padding lo",
                                          "padding hi",        "base_dilation",  "window_dilation"};

jx_status jx_window_read_params(const char *name, const jx_params *p, const jx_aval *in,
                                jx_window_params *w) {
  char s[JX_AVAL_STR_CAP];
  int r = in->shape.rank;
  int64_t *dst[6] = {w->win, w->stride, w->lo, w->hi, w->bdil, w->wdil};
  for (int k = 0; k < 6; k++) {
    const jx_ilist *l = &p->l[k];
    if (l->n != 0 && l->n != r)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: %s has %d entries for operand %s of rank %d", name, list_names[k],
                          l->n, jx_aval_str(in->dtype, in->shape, s), r);
    int64_t dflt = (k == 2 || k == 3) ? 0 : 1, least = dflt;
    for (int i = 0; i < r; i++) {
      dst[k][i] = l->n ? l->v[i] : dflt;
      if (dst[k][i] < least)
        return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %s[%d] = %lld must be >= %lld", name,
                            list_names[k], i, (long long)dst[k][i], (long long)least);
    }
  }
  return JX_OK;
}

static int64_t dilated(int64_t d, int64_t dil) { return d == 0 ? 0 : (d - 1) * dil + 1; }

static jx_status infer_window(jx_window_op op, const char *name, const jx_params *p,
                              const jx_aval *in, jx_aval *out) {
  char s[JX_AVAL_STR_CAP];
  if (op == JX_WINDOW_SUM && in->dtype == JX_BOOL)
    return jx_error_set(JX_ERR_DTYPE, "%s: operand %s needs a numeric (non-bool) dtype", name,
                        jx_aval_str(in->dtype, in->shape, s));
  jx_window_params w;
  jx_status st = jx_window_read_params(name, p, in, &w);
  if (st) return st;
  *out = *in;
  for (int i = 0; i < in->shape.rank; i++) {
    int64_t padded = dilated(in->shape.dims[i], w.bdil[i]) + w.lo[i] + w.hi[i];
    int64_t win = dilated(w.win[i], w.wdil[i]);
    out->shape.dims[i] = padded < win ? 0 : (padded - win) / w.stride[i] + 1;
  }
  return JX_OK;
}

/* One element into a float window's accumulator: sum, or max/min with NaN
 * winning (as XLA). */
static inline void fold(double *acc, double v, jx_window_op op) {
  if (op == JX_WINDOW_SUM)
    *acc += v;
  else if (v != v || *acc != *acc)
    *acc = *acc != *acc ? *acc : v;
  else if (op == JX_WINDOW_MAX ? v > *acc : v < *acc)
    *acc = v;
}

void jx_reduce_window_reference(jx_window_op op, const jx_params *p, const jx_tensor *in,
                                jx_tensor *out) {
  jx_aval a = {in->dtype, 0, in->shape, 0};
  jx_window_params w;
  if (jx_window_read_params("reduce_window", p, &a, &w)) return; /* checked by the rule */
  int r = in->shape.rank;
  int64_t nout = jx_shape_numel(out->shape), nwin = 1, istr[JX_MAX_RANK];
  for (int i = 0; i < r; i++) nwin *= w.win[i];
  jx_shape_strides(in->shape, istr);
  jx_dtype dt = in->dtype;
  int is_float = jx_is_float(dt), sgn = jx_is_signed_int(dt), bits = jx_dtype_bits(dt);
  uint64_t top = 1ull << (bits - 1);
  uint64_t imax_id = dt == JX_BOOL ? 0 : sgn ? (uint64_t)0 - top : 0; /* max identity */
  uint64_t imin_id = dt == JX_BOOL ? 1 : sgn ? top - 1 : ~0ull;       /* min identity */
  /* f32/f64 windows that lie wholly inside an undilated operand read the
   * window's elements at precomputed offsets (the same elements in the same
   * order as the general walk below, so the same result) */
  enum { FAST_WIN = 256 };
  int64_t woff[FAST_WIN];
  int fast = (dt == JX_F32 || dt == JX_F64) && nwin <= FAST_WIN;
  for (int i = 0; i < r; i++) fast = fast && w.bdil[i] == 1;
  if (fast) {
    int64_t widx[JX_MAX_RANK] = {0};
    for (int64_t k = 0; k < nwin; k++) {
      woff[k] = 0;
      for (int i = 0; i < r; i++) woff[k] += widx[i] * w.wdil[i] * istr[i];
      for (int i = r - 1; i >= 0; i--) {
        if (++widx[i] < w.win[i]) break;
        widx[i] = 0;
      }
    }
  }
  int64_t oidx[JX_MAX_RANK] = {0};
  for (int64_t o = 0; o < nout; o++) {
    double facc = op == JX_WINDOW_SUM ? 0 : op == JX_WINDOW_MAX ? -INFINITY : INFINITY;
    uint64_t iacc = op == JX_WINDOW_SUM ? 0 : op == JX_WINDOW_MAX ? imax_id : imin_id;
    int64_t widx[JX_MAX_RANK] = {0}, base = 0;
    int inner = fast;
    for (int i = 0; i < r && inner; i++) {
      int64_t pos = oidx[i] * w.stride[i] - w.lo[i];
      inner = pos >= 0 && pos + (w.win[i] - 1) * w.wdil[i] < in->shape.dims[i];
      base += pos * istr[i];
    }
    if (inner) {
      const float *xf = (const float *)in->data + base;
      const double *xd = (const double *)in->data + base;
      for (int64_t k = 0; k < nwin; k++) {
        fold(&facc, dt == JX_F32 ? (double)xf[woff[k]] : xd[woff[k]], op);
      }
    }
    for (int64_t k = 0; k < (inner ? 0 : nwin); k++) {
      int64_t off = 0, inside = 1;
      for (int i = 0; i < r && inside; i++) {
        int64_t pos = oidx[i] * w.stride[i] + widx[i] * w.wdil[i] - w.lo[i];
        if (pos < 0 || pos % w.bdil[i] != 0 || pos / w.bdil[i] >= in->shape.dims[i])
          inside = 0;
        else
          off += pos / w.bdil[i] * istr[i];
      }
      if (inside) {
        if (is_float) {
          fold(&facc, jx_load_f64(in->data, dt, off), op);
        } else {
          uint64_t v = (uint64_t)jx_load_i64(in->data, dt, off);
          if (op == JX_WINDOW_SUM)
            iacc += v;
          else if (op == JX_WINDOW_MAX ? (sgn ? (int64_t)v > (int64_t)iacc : v > iacc)
                                       : (sgn ? (int64_t)v < (int64_t)iacc : v < iacc))
            iacc = v;
        }
      }
      for (int i = r - 1; i >= 0; i--) {
        if (++widx[i] < w.win[i]) break;
        widx[i] = 0;
      }
    }
    if (is_float)
      jx_store_f64(out->data, dt, o, facc);
    else
      jx_store_i64(out->data, dt, o, (int64_t)iacc);
    for (int i = r - 1; i >= 0; i--) {
      if (++oidx[i] < out->shape.dims[i]) break;
      oidx[i] = 0;
    }
  }
}

/* Pooling windows (inside the operand, f32/f64) take the fast path. */
static void eval_window(jx_window_op op, const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  jx_aval a = {in->dtype, 0, in->shape, 0};
  jx_window_params w;
  if (jx_window_read_params("reduce_window", p, &a, &w)) return; /* checked by the rule */
  if (!jx_reduce_window_fast(op, &w, in, out)) jx_reduce_window_reference(op, p, in, out);
}

#define WINDOW_ROW(NAME, OP, JVP, T)                                                               \
  static jx_status infer_##NAME(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {         \
    return infer_window(OP, #NAME, ctx->params, in, out);                                          \
  }                                                                                                \
  static void eval_##NAME(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {           \
    eval_window(OP, ctx->params, in, out);                                                         \
  }                                                                                                \
  const jx_prim jx_prim_##NAME = {                                                                 \
      .name = #NAME,                                                                               \
      .id = JX_PRIM_##NAME,                                                                        \
      .nin = 1,                                                                                    \
      .nout = 1,                                                                                   \
      .params = "window_dimensions=l0 window_strides=l1 padding_lo=l2 padding_hi=l3 "              \
                "base_dilation=l4 window_dilation=l5",                                             \
      .infer = infer_##NAME,                                                                       \
      .eval = eval_##NAME,                                                                         \
      .jvp = JVP,                                                                                  \
      .transpose = T,                                                                              \
      .batch = jx_batch_reduce_window};

WINDOW_ROW(reduce_window_sum, JX_WINDOW_SUM, jx_jvp_linear_first, jx_transpose_reduce_window_sum)
WINDOW_ROW(reduce_window_max, JX_WINDOW_MAX, jx_jvp_reduce_window_chooser, NULL)
WINDOW_ROW(reduce_window_min, JX_WINDOW_MIN, jx_jvp_reduce_window_chooser, NULL)

const jx_prim *const jx_prims_window[] = {&jx_prim_reduce_window_sum, &jx_prim_reduce_window_max,
                                          &jx_prim_reduce_window_min, NULL};
