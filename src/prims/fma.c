/* fma(a, b, c) = a * b + c rounded once: three float operands of one dtype
 * and shape.
 *
 * lax has no such primitive, but XLA's CPU kernels contract a multiply that
 * feeds an add into one fused multiply-add on CPUs that have it (XLA allows
 * the contraction); jax.random.uniform's scaling floats * (hi - lo) + lo is
 * one, so the samplers (src/ops/random_ops.c) need it to draw JAX's bits.
 * f16 and bf16 compute fmaf in f32 and round once. */
#include <math.h>

#include "../base/error.h"
#include "../array/dtype.h"
#include "prims.h"
#include "rules.h"

static jx_status infer_fma(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  (void)ctx;
  char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  if (!jx_is_float(in[0].dtype))
    return jx_error_set(JX_ERR_DTYPE, "fma: operands are %s but must be floats",
                        jx_aval_str(in[0].dtype, in[0].shape, a));
  for (int i = 1; i < 3; i++)
    if (in[i].dtype != in[0].dtype || !jx_shape_equal(in[i].shape, in[0].shape))
      return jx_error_set(
          JX_ERR_SHAPE, "fma: operands must share one dtype and shape, got %s and %s",
          jx_aval_str(in[0].dtype, in[0].shape, a), jx_aval_str(in[i].dtype, in[i].shape, b));
  out[0] =
      (jx_aval){in[0].dtype, (uint8_t)(in[0].weak && in[1].weak && in[2].weak), in[0].shape, 0};
  return JX_OK;
}

static void eval_fma(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  int64_t n = jx_shape_numel(in[0].shape);
  jx_dtype dt = in[0].dtype;
  if (dt == JX_F64) {
    const double *a = in[0].data, *b = in[1].data, *c = in[2].data;
    double *y = out[0].data;
    for (int64_t i = 0; i < n; i++) y[i] = fma(a[i], b[i], c[i]);
  } else if (dt == JX_F32) {
    const float *a = in[0].data, *b = in[1].data, *c = in[2].data;
    float *y = out[0].data;
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(a[i], b[i], c[i]);
  } else {
    for (int64_t i = 0; i < n; i++) {
      float a = (float)jx_load_f64(in[0].data, dt, i), b = (float)jx_load_f64(in[1].data, dt, i),
            c = (float)jx_load_f64(in[2].data, dt, i);
      jx_store_f64(out[0].data, dt, i, fmaf(a, b, c));
    }
  }
}

/* d(a b + c) = da b + a db + dc */
static jx_array *times_b(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x, jx_array *y) {
  (void)ctx, (void)y;
  return jx_rule_scale(g, x[1]);
}
static jx_array *times_a(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x, jx_array *y) {
  (void)ctx, (void)y;
  return jx_rule_scale(g, x[0]);
}
static JX_DEFJVP(jvp_fma, times_b, times_a, jx_deriv_identity)

    const jx_prim jx_prim_fma = {.name = "fma",
                                 .id = JX_PRIM_fma,
                                 .nin = 3,
                                 .nout = 1,
                                 .params = "",
                                 .infer = infer_fma,
                                 .eval = eval_fma,
                                 .jvp = jvp_fma,
                                 .elementwise = 1};

const jx_prim *const jx_prims_fma[] = {&jx_prim_fma, NULL};
