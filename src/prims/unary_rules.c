/* Differentiation rules of the unary elementwise primitives (the rows are in
 * unary.c; batching is the generic elementwise rule). Each derivative is
 * JAX's (lax.py, special.py) for real inputs, written as the tangent times a
 * coefficient computed from the primal input x and output y, so the tangent
 * only meets mul, div, neg and select_n, which all have transpose rules. The
 * forms JAX picks for its default accuracy are kept: tanh' = (1 + y)(1 - y),
 * logistic' = y(1 - y), expm1' = y + 1. */
#include "unary_rules.h"
#include "../base/error.h"
#include "prims.h"
#include "rules.h"

static jx_array *u1(const jx_prim *p, jx_array *a) { return jx_bind1(p, 1, &a, NULL); }
static jx_array *u2(const jx_prim *p, jx_array *a, jx_array *b) {
  return jx_bind1(p, 2, (jx_array *[]){a, b}, NULL);
}
static jx_array *K(jx_array *like, double v) { return jx_rule_full_like(like, v); }
static jx_array *sq(jx_array *a) { return u2(&jx_prim_mul, a, a); }
static jx_array *mul(jx_array *a, jx_array *b) { return u2(&jx_prim_mul, a, b); }
static jx_array *ipow(jx_array *a, int64_t n) {
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = n;
  return jx_bind1(&jx_prim_integer_pow, 1, &a, &p);
}
static jx_array *polygamma(int64_t m, jx_array *a) {
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = m;
  return jx_bind1(&jx_prim_polygamma, 1, &a, &p);
}
static jx_array *add(jx_array *a, jx_array *b) { return u2(&jx_prim_add, a, b); }
static jx_array *sub(jx_array *a, jx_array *b) { return u2(&jx_prim_sub, a, b); }

/* ad.defjvp's shape: ty = t * EXPR (or t / EXPR when DIVIDE is set), EXPR
 * written with the primal input x, the output y and the parameters p. */
#define JVP_OF(NAME, DIVIDE, EXPR)                                                                 \
  static jx_array *deriv_##NAME(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *xs,          \
                                jx_array *y) {                                                     \
    jx_array *x = xs[0];                                                                           \
    const jx_params *p = ctx->params;                                                              \
    (void)x, (void)y, (void)p;                                                                     \
    return u2(DIVIDE ? &jx_prim_div : &jx_prim_mul, g, EXPR);                                      \
  }                                                                                                \
  JX_DEFJVP(jx_jvp_##NAME, deriv_##NAME)

#define SQRT_PI 1.7724538509055160273
JVP_OF(exp, 0, y)
JVP_OF(exp2, 0, mul(y, K(y, 0.69314718055994530942)))
JVP_OF(expm1, 0, add(y, K(y, 1)))
JVP_OF(log, 1, x)
JVP_OF(log1p, 1, add(x, K(x, 1)))
JVP_OF(sqrt, 0, u2(&jx_prim_div, K(x, 0.5), y))
JVP_OF(rsqrt, 0, mul(K(x, -0.5), u2(&jx_prim_div, y, x)))
JVP_OF(cbrt, 0, mul(K(x, 1.0 / 3), ipow(y, -2)))
JVP_OF(tanh, 0, mul(add(K(y, 1), y), sub(K(y, 1), y)))
JVP_OF(logistic, 0, mul(y, sub(K(y, 1), y)))
JVP_OF(sin, 0, u1(&jx_prim_cos, x))
JVP_OF(cos, 0, u1(&jx_prim_neg, u1(&jx_prim_sin, x)))
JVP_OF(tan, 0, add(K(y, 1), sq(y)))
JVP_OF(asin, 0, u1(&jx_prim_rsqrt, sub(K(x, 1), sq(x))))
JVP_OF(acos, 0, u1(&jx_prim_neg, u1(&jx_prim_rsqrt, sub(K(x, 1), sq(x)))))
JVP_OF(atan, 1, add(K(x, 1), sq(x)))
JVP_OF(sinh, 0, u1(&jx_prim_cosh, x))
JVP_OF(cosh, 0, u1(&jx_prim_sinh, x))
JVP_OF(asinh, 0, u1(&jx_prim_rsqrt, add(sq(x), K(x, 1))))
JVP_OF(acosh, 0, u1(&jx_prim_rsqrt, sub(sq(x), K(x, 1))))
JVP_OF(atanh, 1, mul(add(K(x, 1), x), sub(K(x, 1), x)))
JVP_OF(erf, 0, mul(K(x, 2 / SQRT_PI), u1(&jx_prim_exp, u1(&jx_prim_neg, sq(x)))))
JVP_OF(erf_inv, 0, mul(K(x, SQRT_PI / 2), u1(&jx_prim_exp, sq(y))))
JVP_OF(lgamma, 0, u1(&jx_prim_digamma, x))
/* digamma' = polygamma(1, x) (special.py); polygamma(m)' = polygamma(m + 1) */
JVP_OF(digamma, 0, polygamma(1, x))
JVP_OF(polygamma, 0, polygamma(p->i[0] + 1, x))

/* integer_pow: 0 for y = 0, t for y = 1, t * (y x^(y-1)) otherwise (lax.py) */
static jx_array *deriv_integer_pow(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x,
                                   jx_array *y) {
  (void)y;
  int64_t n = ctx->params->i[0];
  if (n == 0) return NULL;
  if (n == 1) return g;
  return mul(g, n == 2 ? mul(K(x[0], 2), x[0]) : mul(K(x[0], (double)n), ipow(x[0], n - 1)));
}
JX_DEFJVP(jx_jvp_integer_pow, deriv_integer_pow)

/* abs: select(x >= 0, t, -t), as JAX for reals (so +t at 0); for complex
 * x, real(t * conj(x) / |x|) with |x| = 0 replaced by 1 (lax's
 * _abs_jvp_rule) */
static jx_array *deriv_abs(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x, jx_array *y) {
  (void)ctx;
  if (jx_is_complex(x[0]->dtype)) {
    jx_params to = JX_PARAMS_INIT;
    to.dtype = x[0]->dtype;
    jx_array *r = jx_bind1(&jx_prim_convert_element_type, 1, &y, &to);
    jx_array *zero = jx_rule_zeros_like(r);
    jx_array *safe =
        jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){u2(&jx_prim_eq, r, zero), r, K(r, 1)}, NULL);
    jx_array *c = u2(&jx_prim_div, u1(&jx_prim_conj, x[0]), safe);
    return u1(&jx_prim_real, mul(g, c));
  }
  jx_array *nonneg = u2(&jx_prim_ge, x[0], jx_rule_zeros_like(x[0]));
  return jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){nonneg, u1(&jx_prim_neg, g), g}, NULL);
}
JX_DEFJVP(jx_jvp_abs, deriv_abs)

/* neg is linear: jx_jvp_linear_first, and its own transpose */
static jx_array *negate(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)ctx, (void)aval;
  return jx_rule_neg(ct);
}
JX_DEFLINEAR_TRANSPOSE(jx_transpose_neg, negate)
