/* Cumulative reductions along one axis, as lax.cumsum/cumprod/cummax/cummin:
 * axis = i0 (in range), reverse = i1 (accumulate from the end). The result
 * has the operand's shape, dtype and weak type. Numbers only (lax rejects
 * bool). Integers wrap; float max/min propagate NaN from where it appears.
 * Floats accumulate in f64 and round each output once: XLA's f16/f32 scans
 * round every partial sum, so results agree within a few ulps (more accurate
 * here, never less). Transformation rules: cumulative_rules.c. */
#include "../base/error.h"
#include "prims.h"
#include "rules.h"
#include "reduce_rules.h"
#include "structural_rules.h"

typedef enum { C_SUM, C_PROD, C_MAX, C_MIN } cop;

static jx_status infer_cum(const char *name, const jx_params *p, const jx_aval *in, jx_aval *out) {
  char s[JX_AVAL_STR_CAP];
  if (in->dtype == JX_BOOL)
    return jx_error_set(JX_ERR_DTYPE, "%s: operand %s needs a numeric (non-bool) dtype", name,
                        jx_aval_str(in->dtype, in->shape, s));
  if (p->i[0] < 0 || p->i[0] >= in->shape.rank)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: axis %lld is out of range for operand %s",
                        name, (long long)p->i[0], jx_aval_str(in->dtype, in->shape, s));
  *out = *in;
  return JX_OK;
}

static double step_f(cop op, double acc, double v) {
  switch (op) {
  case C_SUM: return acc + v;
  case C_PROD: return acc * v;
  case C_MAX: return acc != acc || acc >= v ? acc : v; /* a NaN stays; v may bring one */
  case C_MIN: return acc != acc || acc <= v ? acc : v;
  }
  return v;
}

static uint64_t step_i(cop op, int sgn, uint64_t acc, uint64_t v) {
  switch (op) {
  case C_SUM: return acc + v;
  case C_PROD: return acc * v;
  case C_MAX: return (sgn ? (int64_t)acc >= (int64_t)v : acc >= v) ? acc : v;
  case C_MIN: return (sgn ? (int64_t)acc <= (int64_t)v : acc <= v) ? acc : v;
  }
  return v;
}

static void eval_cum(cop op, const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  int ax = (int)p->i[0], rev = p->i[1] != 0;
  int64_t outer = 1, inner = 1, n = in->shape.dims[ax];
  for (int i = 0; i < ax; i++) outer *= in->shape.dims[i];
  for (int i = ax + 1; i < in->shape.rank; i++) inner *= in->shape.dims[i];
  jx_dtype dt = in->dtype;
  int sgn = jx_is_signed_int(dt), is_float = jx_is_float(dt);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < inner; k++) {
      double facc = 0;
      uint64_t iacc = 0;
      for (int64_t s = 0; s < n; s++) {
        int64_t i = o * n * inner + (rev ? n - 1 - s : s) * inner + k;
        if (is_float) {
          double v = jx_load_f64(in->data, dt, i);
          facc = s == 0 ? v : step_f(op, facc, v);
          jx_store_f64(out->data, dt, i, facc);
        } else {
          uint64_t v = (uint64_t)jx_load_i64(in->data, dt, i);
          iacc = s == 0 ? v : step_i(op, sgn, iacc, v);
          jx_store_i64(out->data, dt, i, (int64_t)iacc);
        }
      }
    }
}

#define CUM_ROW(NAME, OP, JVP, T)                                                                  \
  static jx_status infer_##NAME(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {         \
    return infer_cum(#NAME, ctx->params, in, out);                                                 \
  }                                                                                                \
  static void eval_##NAME(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {           \
    eval_cum(OP, ctx->params, in, out);                                                            \
  }                                                                                                \
  const jx_prim jx_prim_##NAME = {.name = #NAME,                                                   \
                                  .id = JX_PRIM_##NAME,                                            \
                                  .nin = 1,                                                        \
                                  .nout = 1,                                                       \
                                  .params = "axis=i0 reverse=i1",                                  \
                                  .infer = infer_##NAME,                                           \
                                  .eval = eval_##NAME,                                             \
                                  .jvp = JVP,                                                      \
                                  .transpose = T,                                                  \
                                  .batch = jx_batch_cumulative};

CUM_ROW(cumsum, C_SUM, jx_jvp_linear_first, jx_transpose_cumsum)
CUM_ROW(cumprod, C_PROD, jx_jvp_cumprod, NULL)
CUM_ROW(cummax, C_MAX, jx_jvp_cummax, NULL)
CUM_ROW(cummin, C_MIN, jx_jvp_cummin, NULL)

const jx_prim *const jx_prims_cumulative[] = {&jx_prim_cumsum, &jx_prim_cumprod, &jx_prim_cummax,
                                              &jx_prim_cummin, NULL};
