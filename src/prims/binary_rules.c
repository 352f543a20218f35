/* Differentiation rules of the binary elementwise primitives (the rows are in
 * binary.c; batching is jx_batch_vectorized). Formulas follow JAX's lax
 * rules, including its conventions at ties and zeros: most have ad.defjvp's
 * shape (a derivative per operand), mul is bilinear. */
#include "binary_rules.h"
#include "../base/error.h"
#include "prims.h"
#include "rules.h"

static jx_array *b2(const jx_prim *p, jx_array *a, jx_array *b) {
  return jx_bind1(p, 2, (jx_array *[]){a, b}, NULL);
}
static jx_array *b1(const jx_prim *p, jx_array *a) { return jx_bind1(p, 1, &a, NULL); }
static jx_array *select(jx_array *pred, jx_array *if_false, jx_array *if_true) {
  return jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){pred, if_false, if_true}, NULL);
}

/* ---- JVPs ---- */

JX_DEFJVP(jx_jvp_add, jx_deriv_identity, jx_deriv_identity)

/* the tangents' difference (JAX's _sub_jvp): -t1 alone when t0 is zero */
JX_JVP_RULE(jx_jvp_sub) {
  y[0] = jx_rule_apply1(ctx, x);
  ty[0] = jx_rule_sub(t[0], t[1]);
  return jx_last_status();
}

/* d(a/b) = (da - db * y) / b */
JX_JVP_RULE(jx_jvp_div) {
  y[0] = jx_rule_apply1(ctx, x);
  jx_array *num = jx_rule_sub(t[0], jx_rule_scale(t[1], y[0]));
  ty[0] = num ? b2(&jx_prim_div, num, x[1]) : NULL;
  return jx_last_status();
}

/* d rem / d b = -trunc(a / b) */
static jx_array *rem_rhs(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x, jx_array *y) {
  (void)ctx, (void)y;
  jx_array *q = b2(&jx_prim_div, x[0], x[1]);
  jx_array *tq = b2(&jx_prim_mul, b1(&jx_prim_sign, q), b1(&jx_prim_floor, b1(&jx_prim_abs, q)));
  return jx_rule_neg(jx_rule_scale(g, tq));
}
JX_DEFJVP(jx_jvp_rem, jx_deriv_identity, rem_rhs)

/* d/da a^b = b * a^(b-1) */
static jx_array *pow_lhs(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x, jx_array *y) {
  (void)ctx, (void)y;
  jx_array *bm1 = b2(&jx_prim_sub, x[1], jx_rule_full_like(x[1], 1));
  return jx_rule_scale(g, b2(&jx_prim_mul, x[1], b2(&jx_prim_pow, x[0], bm1)));
}
/* d/db a^b = log(a) * y, with log(0) replaced by log(1) as JAX does */
static jx_array *pow_rhs(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x, jx_array *y) {
  (void)ctx;
  jx_array *safe =
      select(b2(&jx_prim_eq, x[0], jx_rule_zeros_like(x[0])), x[0], jx_rule_full_like(x[0], 1));
  return jx_rule_scale(g, b2(&jx_prim_mul, b1(&jx_prim_log, safe), y));
}
JX_DEFJVP(jx_jvp_pow, pow_lhs, pow_rhs)

/* max and min: JAX's balanced tie rule, the coefficient of a is
 * [a == y] / (1 + [b == y]). */
static jx_array *balanced(jx_array *a, jx_array *y, jx_array *b) {
  jx_array *one = jx_rule_full_like(y, 1), *zero = jx_rule_zeros_like(y);
  jx_array *num = select(b2(&jx_prim_eq, a, y), zero, one);
  jx_array *den = select(b2(&jx_prim_eq, b, y), one, jx_rule_full_like(y, 2));
  return b2(&jx_prim_div, num, den);
}
static jx_array *extremum_lhs(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x,
                              jx_array *y) {
  (void)ctx;
  return jx_rule_scale(g, balanced(x[0], y, x[1]));
}
static jx_array *extremum_rhs(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x,
                              jx_array *y) {
  (void)ctx;
  return jx_rule_scale(g, balanced(x[1], y, x[0]));
}
JX_DEFJVP(jx_jvp_max, extremum_lhs, extremum_rhs)
JX_DEFJVP(jx_jvp_min, extremum_lhs, extremum_rhs)

/* atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2), over one
 * shared denominator */
JX_JVP_RULE(jx_jvp_atan2) {
  y[0] = jx_rule_apply1(ctx, x);
  jx_array *den = b2(&jx_prim_add, b2(&jx_prim_mul, x[0], x[0]), b2(&jx_prim_mul, x[1], x[1]));
  jx_array *num = jx_rule_sub(jx_rule_scale(t[0], x[1]), jx_rule_scale(t[1], x[0]));
  ty[0] = num ? b2(&jx_prim_div, num, den) : NULL;
  return jx_last_status();
}

/* ---- transposes ---- */

JX_TRANSPOSE_RULE(jx_transpose_add) {
  (void)in, (void)avals;
  for (int i = 0; i < ctx->nin; i++) ct_in[i] = linear[i] ? ct[0] : NULL;
  return JX_OK;
}

JX_TRANSPOSE_RULE(jx_transpose_sub) {
  (void)ctx, (void)in, (void)avals;
  ct_in[0] = linear[0] ? ct[0] : NULL;
  ct_in[1] = linear[1] ? jx_rule_neg(ct[0]) : NULL;
  return jx_last_status();
}

/* mul is bilinear: the cotangent of either operand is ct times the other */
static jx_array *mul_by_other(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval,
                              jx_array *other) {
  (void)ctx, (void)aval;
  return jx_rule_scale(ct, other);
}
JX_DEFBILINEAR_TRANSPOSE(jx_transpose_mul, mul_by_other, mul_by_other)

JX_TRANSPOSE_RULE(jx_transpose_div) {
  (void)avals;
  if (linear[1])
    return jx_error_set(JX_ERR_INTERNAL, "transpose of %s: the divisor is linear", ctx->prim->name);
  ct_in[0] = ct[0] ? b2(&jx_prim_div, ct[0], in[1]) : NULL;
  ct_in[1] = NULL;
  return jx_last_status();
}
