/* NumPy-level unary elementwise ops on top of the unary primitives.
 *
 * Floating functions given integers or bool compute in jx_to_inexact(dtype),
 * keeping a weak input weak (jnp.sin(2) is a weak float). floor, ceil and the
 * roundings return integer and bool inputs unchanged, and abs returns bool and
 * unsigned inputs unchanged, as jnp does. jx_gelu_exact uses 1 + erf(x/sqrt2)
 * where jax.nn.gelu uses erfc(-x/sqrt2): they differ only in the tiny results
 * for x below about -4, and only in absolute terms. */
#include "../prims/elementwise.h"
#include "ops_util.h"

static jx_array *bind1(const jx_prim *p, jx_array *a) { return jx_bind1(p, 1, &a, NULL); }
static jx_array *bind2(const jx_prim *p, jx_array *a, jx_array *b) {
  return jx_bind1(p, 2, (jx_array *[]){a, b}, NULL);
}
static jx_array *bind_i0(const jx_prim *p, jx_array *a, int64_t i0) {
  jx_params pp = JX_PARAMS_INIT;
  pp.i[0] = i0;
  return jx_bind1(p, 1, &a, &pp);
}

/* v as an array like a: a's dtype (rounded once), weakness and shape */
static jx_array *konst(jx_array *a, double v) {
  return jx_ops_broadcast(jx_ops_convert(jx_scalar(JX_F64, v), a->dtype, a->weak), a->shape);
}

/* a fresh array equal to a (an op never hands back its argument itself) */
static jx_array *identity(jx_array *a) { return bind1(&jx_prim_stop_gradient, a); }

/* a after the dtype check of op, or NULL with the error recorded */
static jx_array *checked(const char *op, jx_accept acc, jx_array *a) {
  if (jx_check_inputs(op, 1, &a)) return NULL;
  if (jx_accept_check(op, acc, 0, a->dtype, a->shape)) return NULL;
  return a;
}

/* a converted to the float dtype a floating function computes in */
static jx_array *inexact(const char *op, jx_array *a) {
  if (jx_check_inputs(op, 1, &a)) return NULL;
  return jx_ops_convert(a, jx_to_inexact(a->dtype), a->weak);
}

static jx_array *numeric(const char *op, const jx_prim *p, jx_array *a) {
  if (!(a = checked(op, JX_ACCEPT_NUMERIC, a))) return jx_poison();
  return bind1(p, a);
}

jx_array *jx_neg(jx_array *a) { return numeric("jx_neg", &jx_prim_neg, a); }
jx_array *jx_sign(jx_array *a) { return numeric("jx_sign", &jx_prim_sign, a); }
jx_array *jx_abs(jx_array *a) {
  if (jx_check_inputs("jx_abs", 1, &a)) return jx_poison();
  if (a->dtype == JX_BOOL || jx_is_unsigned_int(a->dtype)) return identity(a);
  return bind1(&jx_prim_abs, a);
}

/* floor, ceil, round: integers and bool are already integral */
static jx_array *rounding(const char *op, const jx_prim *p, int64_t i0, jx_array *a) {
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  if (!jx_is_inexact(a->dtype)) return identity(a); /* complex: the row's error */
  return bind_i0(p, a, i0);
}
jx_array *jx_floor(jx_array *a) { return rounding("jx_floor", &jx_prim_floor, 0, a); }
jx_array *jx_ceil(jx_array *a) { return rounding("jx_ceil", &jx_prim_ceil, 0, a); }
jx_array *jx_round(jx_array *a) { return rounding("jx_round", &jx_prim_round, 1, a); }
jx_array *jx_round_away(jx_array *a) { return rounding("jx_round_away", &jx_prim_round, 0, a); }

#define FLOATING(FN, PRIM)                                                                         \
  jx_array *FN(jx_array *a) {                                                                      \
    if (!(a = inexact(#FN, a))) return jx_poison();                                                \
    return bind1(&PRIM, a);                                                                        \
  }
FLOATING(jx_exp, jx_prim_exp)
FLOATING(jx_exp2, jx_prim_exp2)
FLOATING(jx_expm1, jx_prim_expm1)
FLOATING(jx_log, jx_prim_log)
FLOATING(jx_log1p, jx_prim_log1p)
FLOATING(jx_sqrt, jx_prim_sqrt)
FLOATING(jx_rsqrt, jx_prim_rsqrt)
FLOATING(jx_cbrt, jx_prim_cbrt)
FLOATING(jx_tanh, jx_prim_tanh)
FLOATING(jx_logistic, jx_prim_logistic)
FLOATING(jx_sin, jx_prim_sin)
FLOATING(jx_cos, jx_prim_cos)
FLOATING(jx_tan, jx_prim_tan)
FLOATING(jx_asin, jx_prim_asin)
FLOATING(jx_acos, jx_prim_acos)
FLOATING(jx_atan, jx_prim_atan)
FLOATING(jx_sinh, jx_prim_sinh)
FLOATING(jx_cosh, jx_prim_cosh)
FLOATING(jx_asinh, jx_prim_asinh)
FLOATING(jx_acosh, jx_prim_acosh)
FLOATING(jx_atanh, jx_prim_atanh)
FLOATING(jx_erf, jx_prim_erf)
FLOATING(jx_erf_inv, jx_prim_erf_inv)
FLOATING(jx_lgamma, jx_prim_lgamma)
FLOATING(jx_digamma, jx_prim_digamma)

/* jnp.square: bool squares as i32 (promote_dtypes_numeric), then x * x */
jx_array *jx_square(jx_array *a) {
  if (jx_check_inputs("jx_square", 1, &a)) return jx_poison();
  if (a->dtype == JX_BOOL) a = jx_ops_convert(a, JX_I32, 0);
  return bind_i0(&jx_prim_integer_pow, a, 2);
}

jx_array *jx_reciprocal(jx_array *a) {
  if (!(a = inexact("jx_reciprocal", a))) return jx_poison();
  return bind_i0(&jx_prim_integer_pow, a, -1);
}

jx_array *jx_isfinite(jx_array *a) {
  if (jx_check_inputs("jx_isfinite", 1, &a)) return jx_poison();
  if (jx_is_complex(a->dtype)) /* both parts finite, as jnp.isfinite */
    return jx_logical_and(bind1(&jx_prim_is_finite, jx_real(a)),
                          bind1(&jx_prim_is_finite, jx_imag(a)));
  if (!jx_is_float(a->dtype)) return jx_full(JX_BOOL, a->shape, 1);
  return bind1(&jx_prim_is_finite, a);
}

jx_array *jx_bitwise_not(jx_array *a) {
  if (!(a = checked("jx_bitwise_not", JX_ACCEPT_INT_OR_BOOL, a))) return jx_poison();
  return bind1(&jx_prim_not, a);
}

jx_array *jx_population_count(jx_array *a) {
  if (!(a = checked("jx_population_count", JX_ACCEPT_INT, a))) return jx_poison();
  return bind1(&jx_prim_population_count, a);
}

jx_array *jx_integer_pow(jx_array *a, int n) {
  const char *op = "jx_integer_pow";
  if (!(a = checked(op, JX_ACCEPT_NUMERIC, a))) return jx_poison();
  if (n < 0 && !jx_is_inexact(a->dtype)) {
    char s[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: integers cannot be raised to a negative power, "
                 "got %s ** %d",
                 op, jx_aval_str(a->dtype, a->shape, s), n);
    return jx_poison();
  }
  return bind_i0(&jx_prim_integer_pow, a, n);
}

/* ---- activations (jax.nn) ---- */

/* jnp.maximum(x, 0) with a weak integer zero, so integers stay integers */
static jx_array *relu_formula(jx_array *a) { return jx_maximum(a, jx_scalar(JX_I64, 0)); }

static void relu_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = relu_formula(in[0]);
}

/* jax.nn.relu's custom JVP: t where x > 0, else 0 (also at 0, where the
 * derivative of maximum would give t / 2) */
static void relu_jvp_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0], *t = in[1];
  out[0] = relu_formula(x);
  out[1] = jx_where(jx_gt(x, jx_scalar(JX_I64, 0)), t, jx_scalar(JX_I64, 0));
}

jx_array *jx_relu(jx_array *a) {
  if (jx_check_inputs("jx_relu", 1, &a)) return jx_poison();
  if (!jx_is_float(a->dtype)) return relu_formula(a); /* integers have no tangent */
  static _Atomic(jx_fn *) made;
  return jx_ops_call1(jx_ops_custom_jvp_once(&made, "relu", 1, 1, relu_body, relu_jvp_body, NULL),
                      a);
}

/* jax.nn.gelu's cdf, 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), in its order */
static jx_array *gelu_cdf(jx_array *a) {
  jx_array *x3 = bind2(&jx_prim_mul, konst(a, 0.044715), bind_i0(&jx_prim_integer_pow, a, 3));
  jx_array *in = bind2(&jx_prim_mul, konst(a, 0.7978845608028654), bind2(&jx_prim_add, a, x3));
  return bind2(&jx_prim_mul, konst(a, 0.5),
               bind2(&jx_prim_add, konst(a, 1), bind1(&jx_prim_tanh, in)));
}

static void gelu_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = bind2(&jx_prim_mul, in[0], gelu_cdf(in[0]));
}

/* The derivative written out from the cdf h: with c = sqrt(2/pi), 1 - tanh^2
 * = 4 h (1 - h), so d/dx (x h) = h (1 + x (1 - h) (2c + 6 * 0.044715 c x^2)):
 * eight operations besides the forward's, where reverse mode through the
 * formula forms about twice as many. The backward then needs x alone (the
 * recomputation pass makes h and this again from it inside the backward
 * kernel), and the values agree with jax.nn.gelu's derivative to rounding. */
static void gelu_jvp_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0], *t = in[1], *h = gelu_cdf(x);
  out[0] = bind2(&jx_prim_mul, x, h);
  jx_array *x2 = bind2(&jx_prim_mul, x, x);
  jx_array *slope = bind2(&jx_prim_add, konst(x, 1.5957691216057308),
                          bind2(&jx_prim_mul, konst(x, 0.21406444881780073), x2));
  jx_array *tail =
      bind2(&jx_prim_mul, bind2(&jx_prim_mul, x, bind2(&jx_prim_sub, konst(x, 1), h)), slope);
  jx_array *d = bind2(&jx_prim_mul, h, bind2(&jx_prim_add, konst(x, 1), tail));
  out[1] = bind2(&jx_prim_mul, t, d);
}

/* x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), in jax.nn.gelu's
 * order, with the derivative above as its custom JVP (real floats) */
jx_array *jx_gelu(jx_array *a) {
  if (!(a = inexact("jx_gelu", a))) return jx_poison();
  if (!jx_is_float(a->dtype)) return bind2(&jx_prim_mul, a, gelu_cdf(a));
  static _Atomic(jx_fn *) made;
  return jx_ops_call1(jx_ops_custom_jvp_once(&made, "gelu", 1, 1, gelu_body, gelu_jvp_body, NULL),
                      a);
}

/* 0.5 * x * (1 + erf(x / sqrt 2)) */
jx_array *jx_gelu_exact(jx_array *a) {
  if (!(a = inexact("jx_gelu_exact", a))) return jx_poison();
  jx_array *e = bind1(&jx_prim_erf, bind2(&jx_prim_mul, a, konst(a, 0.7071067811865476)));
  jx_array *half_x = bind2(&jx_prim_mul, konst(a, 0.5), a);
  return bind2(&jx_prim_mul, half_x, bind2(&jx_prim_add, konst(a, 1), e));
}

jx_array *jx_silu(jx_array *a) {
  if (!(a = inexact("jx_silu", a))) return jx_poison();
  return bind2(&jx_prim_mul, a, bind1(&jx_prim_logistic, a));
}

/* logaddexp(x, 0) = max(x, 0) + log1p(exp(-|x|)): no overflow, NaN propagates */
static jx_array *softplus_formula(jx_array *a) {
  jx_array *tail =
      bind1(&jx_prim_log1p, bind1(&jx_prim_exp, bind1(&jx_prim_neg, bind1(&jx_prim_abs, a))));
  return bind2(&jx_prim_add, bind2(&jx_prim_max, a, konst(a, 0)), tail);
}

static void softplus_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = softplus_formula(in[0]);
}

/* jnp.logaddexp's custom JVP with x2 = 0, t * exp(x - y): sigmoid(x) t
 * everywhere, 1/2 at 0, where differentiating the formula piecewise would
 * add the kinks of max and abs and give 0. The slope is the logistic
 * primitive, whose own derivative is sigmoid's, as the derivative of JAX's
 * rule is (softplus'' = 1/4 at 0). */
static void softplus_jvp_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0], *t = in[1];
  out[0] = softplus_formula(x);
  out[1] = bind2(&jx_prim_mul, t, bind1(&jx_prim_logistic, x));
}

jx_array *jx_softplus(jx_array *a) {
  if (!(a = inexact("jx_softplus", a))) return jx_poison();
  static _Atomic(jx_fn *) made;
  return jx_ops_call1(
      jx_ops_custom_jvp_once(&made, "softplus", 1, 1, softplus_body, softplus_jvp_body, NULL), a);
}

/* jax.nn.log_sigmoid: -softplus(-x) */
jx_array *jx_log_sigmoid(jx_array *a) {
  if (!(a = inexact("jx_log_sigmoid", a))) return jx_poison();
  return bind1(&jx_prim_neg, jx_softplus(bind1(&jx_prim_neg, a)));
}

/* min(max(x, 0), 6) with a weak integer 0 and 6, so integers stay integers */
static jx_array *relu6_formula(jx_array *a) {
  return jx_minimum(jx_maximum(a, jx_scalar(JX_I64, 0)), jx_scalar(JX_I64, 6));
}

static void relu6_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = relu6_formula(in[0]);
}

/* jax.nn.relu6's custom JVP: t where 0 < x < 6, else 0 (also at both corners) */
static void relu6_jvp_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0], *t = in[1];
  out[0] = relu6_formula(x);
  jx_array *inside = jx_logical_and(jx_gt(x, jx_scalar(JX_I64, 0)), jx_lt(x, jx_scalar(JX_I64, 6)));
  out[1] = jx_where(inside, t, jx_scalar(JX_I64, 0));
}

jx_array *jx_relu6(jx_array *a) {
  if (jx_check_inputs("jx_relu6", 1, &a)) return jx_poison();
  if (!jx_is_float(a->dtype)) return relu6_formula(a); /* integers have no tangent */
  static _Atomic(jx_fn *) made;
  return jx_ops_call1(
      jx_ops_custom_jvp_once(&made, "relu6", 1, 1, relu6_body, relu6_jvp_body, NULL), a);
}
