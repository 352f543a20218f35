/* Selection primitives.
 *
 * select_n(which, case0, ..., caseN-1), as lax.select_n: `which` is bool
 * (then exactly two cases; false picks case 0) or an integer; it is a scalar
 * or has the cases' shape; the cases share one dtype and shape. An integer
 * `which` outside [0, N) picks the nearest end case, as XLA's lowering to a
 * tree of selects does.
 *
 * clamp(lo, x, hi), as lax.clamp: min(max(x, lo), hi) with NaN propagating
 * (XLA's elemental clamp); lo and hi are scalars or have x's shape, all three
 * of one dtype. */
#include <stdlib.h>

#include "../base/error.h"
#include "binary_rules.h"
#include "elementwise.h"
#include "prims.h"
#include "rules.h"

/* ---- select_n ---- */

jx_status jx_select_n_rule(const char *name, int nin, const jx_aval *in, jx_aval *out) {
  char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  if (nin < 2)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs `which` and at least one case", name);
  const jx_aval *w = &in[0];
  if (w->dtype != JX_BOOL && !jx_is_int(w->dtype))
    return jx_error_set(JX_ERR_DTYPE, "%s: `which` is %s but must be bool or an integer", name,
                        jx_aval_str(w->dtype, w->shape, a));
  if (w->dtype == JX_BOOL && nin - 1 > 2)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: a bool `which` selects between at most 2 cases, given %d", name,
                        nin - 1);
  for (int i = 2; i < nin; i++)
    if (in[i].dtype != in[1].dtype || !jx_shape_equal(in[i].shape, in[1].shape))
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: cases must have one dtype and shape, got %s "
                          "(case 0) and %s (case %d)",
                          name, jx_aval_str(in[1].dtype, in[1].shape, a),
                          jx_aval_str(in[i].dtype, in[i].shape, b), i - 1);
  if (w->shape.rank != 0 && !jx_shape_equal(w->shape, in[1].shape))
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: `which` %s must be a scalar or have the cases' "
                        "shape %s",
                        name, jx_aval_str(w->dtype, w->shape, a),
                        jx_aval_str(in[1].dtype, in[1].shape, b));
  int weak = 1;
  for (int i = 1; i < nin; i++) weak = weak && in[i].weak;
  out->dtype = in[1].dtype;
  out->shape = in[1].shape;
  out->weak = (uint8_t)weak;
  return JX_OK;
}

static jx_status infer_select_n(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  return jx_select_n_rule("select_n", ctx->nin, in, out);
}

#define SELECT_LOOP(T)                                                                             \
  for (int64_t i = 0; i < n; i++) {                                                                \
    int64_t k = jx_load_i64(w->data, w->dtype, wstep * i);                                         \
    k = k < 0 ? 0 : k > ncase - 1 ? ncase - 1 : k;                                                 \
    ((T *)out)[i] = ((const T *)cases[k].data)[i];                                                 \
  }

static void eval_select_n(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *o) {
  const jx_tensor *w = &in[0], *cases = &in[1];
  int64_t ncase = ctx->nin - 1, n = jx_shape_numel(cases[0].shape);
  int64_t wstep = w->shape.rank == 0 ? 0 : 1;
  void *out = o[0].data;
  if (w->dtype == JX_BOOL && ncase == 2 && jx_dtype_size(cases[0].dtype) == 4) {
    /* the common where(): bool mask between two 32-bit operands */
    const uint8_t *m = w->data;
    const uint32_t *a = cases[0].data, *b = cases[1].data;
    for (int64_t i = 0; i < n; i++) ((uint32_t *)out)[i] = m[wstep * i] ? b[i] : a[i];
    return;
  }
  switch (jx_dtype_size(cases[0].dtype)) {
  case 1: SELECT_LOOP(uint8_t) break;
  case 2: SELECT_LOOP(uint16_t) break;
  case 4: SELECT_LOOP(uint32_t) break;
  case 8: SELECT_LOOP(uint64_t) break;
  default: SELECT_LOOP(double _Complex) break; /* c128: 16 bytes */
  }
}

/* JVP (lax.py _select_jvp): the same selection among the cases' tangents,
 * zeros standing in for symbolic ones; `which` has no tangent. */
static jx_status jvp_select_n(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                              jx_array **y, jx_array **ty) {
  const jx_params *p = ctx->params;
  y[0] = jx_bind1(&jx_prim_select_n, ctx->nin, x, p);
  ty[0] = NULL;
  int any = 0;
  for (int i = 1; i < ctx->nin; i++) any |= t[i] != NULL;
  if (!any) return jx_last_status();
  jx_array *small[16], **tc = ctx->nin > 16 ? malloc(sizeof *tc * (size_t)ctx->nin) : small;
  if (!tc) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "select_n: out of memory");
  tc[0] = x[0];
  for (int i = 1; i < ctx->nin; i++) tc[i] = t[i] ? t[i] : jx_rule_zeros_like(x[i]);
  ty[0] = jx_bind1(&jx_prim_select_n, ctx->nin, tc, p);
  if (tc != small) free(tc);
  return jx_last_status();
}

/* Transpose in the cases (lax.py _select_transpose_rule): case i gets the
 * cotangent where `which` picked it and zero elsewhere. */
static jx_status transpose_select_n(const jx_rule_ctx *ctx, jx_array *const *in,
                                    const jx_aval *avals, const uint8_t *linear,
                                    jx_array *const *ct, jx_array **ct_in) {
  if (linear[0])
    return jx_error_set(JX_ERR_INTERNAL, "transpose of select_n: `which` cannot be linear");
  for (int i = 0; i < ctx->nin; i++) ct_in[i] = NULL;
  if (!ct[0]) return JX_OK;
  jx_array *small[16], **args = ctx->nin > 16 ? malloc(sizeof *args * (size_t)ctx->nin) : small;
  if (!args) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "select_n: out of memory");
  jx_aval za = avals[1];
  za.shape = ct[0]->shape;
  za.dtype = ct[0]->dtype;
  jx_array *zeros = jx_rule_zeros(za);
  args[0] = in[0];
  for (int i = 1; i < ctx->nin; i++) {
    if (!linear[i]) continue;
    for (int j = 1; j < ctx->nin; j++) args[j] = j == i ? ct[0] : zeros;
    ct_in[i] = jx_bind1(&jx_prim_select_n, ctx->nin, args, ctx->params);
  }
  if (args != small) free(args);
  return jx_last_status();
}

/* a (rank 1: the batch axis) broadcast to `full` along its leading axis: a
 * batched per-example scalar meeting per-example arrays. */
const jx_prim jx_prim_select_n = {.name = "select_n",
                                  .id = JX_PRIM_select_n,
                                  .nin = JX_VARIADIC,
                                  .nout = 1,
                                  .params = "",
                                  .infer = infer_select_n,
                                  .eval = eval_select_n,
                                  .jvp = jvp_select_n,
                                  .transpose = transpose_select_n,
                                  .batch = jx_batch_broadcasting};

/* ---- clamp ---- */

jx_status jx_clamp_rule(const char *name, const jx_aval *in, jx_aval *out) {
  char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  const jx_aval *x = &in[1];
  for (int i = 0; i < 3; i += 2) {
    const char *what = i == 0 ? "lo" : "hi";
    if (in[i].dtype != x->dtype)
      return jx_error_set(JX_ERR_DTYPE, "%s: %s is %s but x is %s; they must share a dtype", name,
                          what, jx_aval_str(in[i].dtype, in[i].shape, a),
                          jx_aval_str(x->dtype, x->shape, b));
    if (in[i].shape.rank != 0 && !jx_shape_equal(in[i].shape, x->shape))
      return jx_error_set(JX_ERR_SHAPE, "%s: %s %s must be a scalar or have x's shape %s", name,
                          what, jx_aval_str(in[i].dtype, in[i].shape, a),
                          jx_aval_str(x->dtype, x->shape, b));
  }
  out->dtype = x->dtype;
  out->shape = x->shape;
  out->weak = (uint8_t)(in[0].weak && in[1].weak && in[2].weak);
  return JX_OK;
}

static jx_status infer_clamp(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  return jx_clamp_rule(ctx->prim->name, in, out);
}

/* max then min with XLA's float semantics (elementwise.h) */
#define CLAMP_F(x, lo, hi, r)                                                                      \
  do {                                                                                             \
    r = JX_FMAX(x, lo);                                                                            \
    r = JX_FMIN(r, hi);                                                                            \
  } while (0)

#define CLAMP_TYPED(T)                                                                             \
  static void clamp_##T(int64_t n, const T *lo, int64_t ls, const T *x, const T *hi, int64_t hs,   \
                        T *o) {                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                              \
      T r;                                                                                         \
      CLAMP_F(x[i], lo[ls * i], hi[hs * i], r);                                                    \
      o[i] = r;                                                                                    \
    }                                                                                              \
  }
CLAMP_TYPED(float)
CLAMP_TYPED(double)

static void eval_clamp(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  jx_dtype dt = in[1].dtype;
  int64_t n = jx_shape_numel(in[1].shape);
  int64_t ls = in[0].shape.rank ? 1 : 0, hs = in[2].shape.rank ? 1 : 0;
  const void *lo = in[0].data, *x = in[1].data, *hi = in[2].data;
  void *o = out[0].data;
  if (dt == JX_F32) {
    clamp_float(n, lo, ls, x, hi, hs, o);
  } else if (jx_is_float(dt)) { /* f64 exactly; f16/bf16 are exact in double and stay so */
    if (dt == JX_F64) {
      clamp_double(n, lo, ls, x, hi, hs, o);
      return;
    }
    for (int64_t i = 0; i < n; i++) {
      double r, a = jx_load_f64(x, dt, i), l = jx_load_f64(lo, dt, ls * i),
                h = jx_load_f64(hi, dt, hs * i);
      CLAMP_F(a, l, h, r);
      jx_store_f64(o, dt, i, r);
    }
  } else if (jx_is_unsigned_int(dt)) {
    for (int64_t i = 0; i < n; i++) {
      uint64_t a = jx_load_u64(x, dt, i), l = jx_load_u64(lo, dt, ls * i),
               h = jx_load_u64(hi, dt, hs * i);
      uint64_t r = a > l ? a : l;
      jx_store_i64(o, dt, i, (int64_t)(r < h ? r : h));
    }
  } else { /* signed ints and bool */
    for (int64_t i = 0; i < n; i++) {
      int64_t a = jx_load_i64(x, dt, i), l = jx_load_i64(lo, dt, ls * i),
              h = jx_load_i64(hi, dt, hs * i);
      int64_t r = a > l ? a : l;
      jx_store_i64(o, dt, i, r < h ? r : h);
    }
  }
}

/* a scalar bound broadcast to x's shape (bounds may be scalars, x not) */
static jx_array *like_x(jx_array *a, jx_array *x) {
  if (!a || a->shape.rank == x->shape.rank) return a;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = x->shape.rank;
  for (int i = 0; i < x->shape.rank; i++) p.l[0].v[i] = x->shape.dims[i];
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &a, &p);
}
static jx_array *cmp(const jx_prim *p, jx_array *a, jx_array *b) {
  return jx_bind1(p, 2, (jx_array *[]){a, b}, NULL);
}
/* t where mask, else 0 (NULL stays NULL) */
static jx_array *masked(jx_array *mask, jx_array *t, jx_array *zeros) {
  if (!t) return NULL;
  return jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){mask, zeros, t}, NULL);
}

/* JVP (lax.py): x's tangent passes where lo < x < hi, lo's where lo > x and
 * lo < hi, hi's where hi < x; a scalar bound's tangent is broadcast first. */
static jx_status jvp_clamp(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                           jx_array **y, jx_array **ty) {
  y[0] = jx_bind1(&jx_prim_clamp, ctx->nin, x, ctx->params);
  jx_array *v = x[1], *lo = like_x(x[0], v), *hi = like_x(x[2], v);
  jx_array *z = jx_rule_zeros_like(v), *tx = NULL, *tlo = NULL, *thi = NULL;
  if (t[1])
    tx = masked(cmp(&jx_prim_and, cmp(&jx_prim_gt, v, lo), cmp(&jx_prim_lt, v, hi)), t[1], z);
  if (t[0])
    tlo = masked(cmp(&jx_prim_and, cmp(&jx_prim_gt, lo, v), cmp(&jx_prim_lt, lo, hi)),
                 like_x(t[0], v), z);
  if (t[2]) thi = masked(cmp(&jx_prim_lt, hi, v), like_x(t[2], v), z);
  ty[0] = jx_rule_add(jx_rule_add(tlo, tx), thi);
  return jx_last_status();
}

const jx_prim jx_prim_clamp = {.name = "clamp",
                               .id = JX_PRIM_clamp,
                               .nin = 3,
                               .nout = 1,
                               .params = "",
                               .infer = infer_clamp,
                               .eval = eval_clamp,
                               .jvp = jvp_clamp,
                               .batch = jx_batch_broadcasting};

const jx_prim *const jx_prims_select[] = {&jx_prim_select_n, &jx_prim_clamp, NULL};
