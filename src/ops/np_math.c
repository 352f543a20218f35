/* jax.numpy's elementwise functions beyond the primitives: isnan, isinf,
 * nan_to_num, isclose, allclose, log2, log10, logaddexp (with its custom
 * JVP), hypot, and clip with array bounds, written as jax.numpy writes them
 * so that values at NaN, infinities and zero and the derivatives there
 * are JAX's. */
#include <float.h>

#include "ops_util.h"

/* a bool array of a's shape, all v (the answer for integers) */
static jx_array *all_bool(jx_array *a, int v) { return jx_full(JX_BOOL, a->shape, v); }

jx_array *jx_isnan(jx_array *a) {
  if (jx_check_inputs("jx_isnan", 1, &a)) return jx_poison();
  return jx_is_float(a->dtype) ? jx_ne(a, a) : all_bool(a, 0);
}

jx_array *jx_isinf(jx_array *a) {
  if (jx_check_inputs("jx_isinf", 1, &a)) return jx_poison();
  if (!jx_is_float(a->dtype)) return all_bool(a, 0);
  return jx_eq(jx_abs(a), jx_ops_const_like(a, INFINITY));
}

/* numpy.finfo(dt).max */
static double finite_max(jx_dtype dt) {
  switch (dt) {
  case JX_F16: return 65504.0;
  case JX_BF16: return 3.3895313892515355e38;
  case JX_F32: return FLT_MAX;
  default: return DBL_MAX;
  }
}

jx_array *jx_nan_to_num(jx_array *a, double nan, double posinf, double neginf) {
  if (jx_check_inputs("jx_nan_to_num", 1, &a)) return jx_poison();
  if (!jx_is_float(a->dtype)) return jx_ops_convert(a, a->dtype, a->weak);
  if (posinf == INFINITY) posinf = finite_max(a->dtype);
  if (neginf == -INFINITY) neginf = -finite_max(a->dtype);
  jx_array *out = jx_where(jx_isnan(a), jx_full(a->dtype, JX_SHAPE(), nan), a);
  jx_array *inf = jx_ops_const_like(a, INFINITY);
  out = jx_where(jx_eq(out, inf), jx_full(a->dtype, JX_SHAPE(), posinf), out);
  return jx_where(jx_eq(out, jx_neg(inf)), jx_full(a->dtype, JX_SHAPE(), neginf), out);
}

jx_array *jx_isclose(jx_array *a, jx_array *b, double rtol, double atol, int equal_nan) {
  const char *op = "jx_isclose";
  if (jx_ops_promote_broadcast(op, &a, &b)) return jx_poison();
  a = jx_ops_inexact(a);
  b = jx_ops_inexact(b);
  jx_dtype dt = a->dtype;
  jx_array *tol =
      jx_add(jx_full(dt, JX_SHAPE(), atol), jx_mul(jx_full(dt, JX_SHAPE(), rtol), jx_abs(b)));
  jx_array *out = jx_le(jx_abs(jx_sub(a, b)), tol);
  jx_array *ainf = jx_isinf(a), *binf = jx_isinf(b);
  out = jx_logical_and(out, jx_logical_not(jx_logical_or(ainf, binf)));
  out = jx_logical_or(out, jx_logical_and(jx_logical_and(ainf, binf), jx_eq(a, b)));
  jx_array *anan = jx_isnan(a), *bnan = jx_isnan(b);
  out = jx_logical_and(out, jx_logical_not(jx_logical_or(anan, bnan)));
  return equal_nan ? jx_logical_or(out, jx_logical_and(anan, bnan)) : out;
}

jx_array *jx_allclose(jx_array *a, jx_array *b, double rtol, double atol, int equal_nan) {
  return jx_all(jx_isclose(a, b, rtol, atol, equal_nan), JX_AXES(), 0);
}

jx_array *jx_log2(jx_array *a) {
  if (jx_check_inputs("jx_log2", 1, &a)) return jx_poison();
  a = jx_ops_inexact(a);
  return jx_div(jx_log(a), jx_log(jx_ops_const_like(a, 2)));
}

jx_array *jx_log10(jx_array *a) {
  if (jx_check_inputs("jx_log10", 1, &a)) return jx_poison();
  a = jx_ops_inexact(a);
  return jx_mul(jx_log(a), jx_ops_const_like(a, 0.4342944819032518)); /* 1 / log(10) */
}

/* max(a, b) + log1p(exp(-|a - b|)), and a + b where a - b is NaN (a NaN, or infinities of one
 * sign) */
static jx_array *logaddexp_formula(jx_array *a, jx_array *b) {
  jx_array *delta = jx_sub(a, b);
  jx_array *tail = jx_log1p(jx_exp(jx_neg(jx_abs(delta))));
  return jx_where(jx_isnan(delta), jx_add(a, b), jx_add(jx_maximum(a, b), tail));
}

static void logaddexp_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = logaddexp_formula(in[0], in[1]);
}

/* +inf replaced by 0 (JAX's _replace_inf), so that exp(x - out) stays finite */
static jx_array *replace_inf(jx_array *x) {
  return jx_where(jx_eq(x, jx_ops_const_like(x, INFINITY)), jx_zeros_like(x), x);
}

/* jnp.logaddexp's custom JVP: t1 exp(x1 - out) + t2 exp(x2 - out) */
static void logaddexp_jvp_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *a = in[0], *b = in[1], *ta = in[2], *tb = in[3];
  jx_array *y = logaddexp_formula(a, b), *ry = replace_inf(y);
  out[0] = y;
  out[1] = jx_add(jx_mul(ta, jx_exp(jx_sub(replace_inf(a), ry))),
                  jx_mul(tb, jx_exp(jx_sub(replace_inf(b), ry))));
}

jx_array *jx_logaddexp(jx_array *a, jx_array *b) {
  if (jx_ops_promote_broadcast("jx_logaddexp", &a, &b)) return jx_poison();
  a = jx_ops_inexact(a);
  b = jx_ops_inexact(b);
  static _Atomic(jx_fn *) made;
  jx_fn *f =
      jx_ops_custom_jvp_once(&made, "logaddexp", 2, 1, logaddexp_body, logaddexp_jvp_body, NULL);
  jx_array *y = NULL;
  if (!f || jx_call(f, (jx_array *[]){a, b}, &y)) return jx_poison();
  return y;
}

/* jnp.hypot: big * sqrt(1 + (small / big)^2), 0 where big is 0, inf where either is inf */
jx_array *jx_hypot(jx_array *a, jx_array *b) {
  if (jx_ops_promote_broadcast("jx_hypot", &a, &b)) return jx_poison();
  a = jx_abs(jx_ops_inexact(a));
  b = jx_abs(jx_ops_inexact(b));
  jx_array *inf = jx_ops_const_like(a, INFINITY);
  jx_array *any_inf = jx_logical_or(jx_eq(a, inf), jx_eq(b, inf));
  jx_array *big = jx_maximum(a, b), *small = jx_minimum(a, b);
  jx_array *zero = jx_eq(big, jx_ops_const_like(big, 0));
  jx_array *ratio = jx_div(small, jx_where(zero, jx_ones_like(big), big));
  jx_array *r = jx_where(zero, big,
                         jx_mul(big, jx_sqrt(jx_add(jx_ops_const_like(big, 1), jx_square(ratio)))));
  return jx_where(any_inf, inf, r);
}

jx_array *jx_clip_arrays(jx_array *a, jx_array *lo, jx_array *hi) {
  if (jx_check_inputs("jx_clip_arrays", 1, &a)) return jx_poison();
  jx_array *r = a;
  if (lo) r = jx_maximum(lo, r);
  if (hi) r = jx_minimum(hi, r);
  return r == a ? jx_stop_gradient(a) : r;
}
