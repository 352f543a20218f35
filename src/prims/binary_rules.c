/* Differentiation rules of the binary elementwise primitives (the rows are in
 * binary.c; batching is the generic elementwise rule). Formulas follow JAX's
 * lax rules, including its conventions at ties and zeros. */
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

jx_status jx_jvp_add(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,
                     jx_array **y, jx_array **ty, int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)nout;
  (void)nsub;
  (void)s;
  y[0] = jx_bind1(&jx_prim_add, 2, x, NULL);
  ty[0] = jx_rule_add(t[0], t[1]);
  return jx_last_status();
}

jx_status jx_jvp_sub(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,
                     jx_array **y, jx_array **ty, int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)nout;
  (void)nsub;
  (void)s;
  y[0] = jx_bind1(&jx_prim_sub, 2, x, NULL);
  ty[0] = jx_rule_sub(t[0], t[1]);
  return jx_last_status();
}

jx_status jx_jvp_mul(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,
                     jx_array **y, jx_array **ty, int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)nout;
  (void)nsub;
  (void)s;
  y[0] = jx_bind1(&jx_prim_mul, 2, x, NULL);
  ty[0] = jx_rule_add(jx_rule_scale(t[0], x[1]), jx_rule_scale(t[1], x[0]));
  return jx_last_status();
}

jx_status jx_jvp_div(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,
                     jx_array **y, jx_array **ty, int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)nout;
  (void)nsub;
  (void)s;
  y[0] = jx_bind1(&jx_prim_div, 2, x, NULL);
  /* d(a/b) = (da - db * y) / b */
  jx_array *num = jx_rule_sub(t[0], jx_rule_scale(t[1], y[0]));
  ty[0] = num ? b2(&jx_prim_div, num, x[1]) : NULL;
  return jx_last_status();
}

jx_status jx_jvp_rem(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,
                     jx_array **y, jx_array **ty, int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)nout;
  (void)nsub;
  (void)s;
  y[0] = jx_bind1(&jx_prim_rem, 2, x, NULL);
  jx_array *tq = NULL;
  if (t[1]) { /* d rem / d b = -trunc(a / b) */
    jx_array *q = b2(&jx_prim_div, x[0], x[1]);
    tq = b2(&jx_prim_mul, b1(&jx_prim_sign, q), b1(&jx_prim_floor, b1(&jx_prim_abs, q)));
  }
  ty[0] = jx_rule_sub(t[0], jx_rule_scale(t[1], tq));
  return jx_last_status();
}

jx_status jx_jvp_pow(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,
                     jx_array **y, jx_array **ty, int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)nout;
  (void)nsub;
  (void)s;
  y[0] = jx_bind1(&jx_prim_pow, 2, x, NULL);
  jx_array *ta = NULL, *tb = NULL;
  if (t[0]) { /* b * a^(b-1) */
    jx_array *bm1 = b2(&jx_prim_sub, x[1], jx_rule_full_like(x[1], 1));
    ta = jx_rule_scale(t[0], b2(&jx_prim_mul, x[1], b2(&jx_prim_pow, x[0], bm1)));
  }
  if (t[1]) { /* log(a) * y, with log(0) replaced by log(1) as JAX does */
    jx_array *safe =
        select(b2(&jx_prim_eq, x[0], jx_rule_zeros_like(x[0])), x[0], jx_rule_full_like(x[0], 1));
    tb = jx_rule_scale(t[1], b2(&jx_prim_mul, b1(&jx_prim_log, safe), y[0]));
  }
  ty[0] = jx_rule_add(ta, tb);
  return jx_last_status();
}

/* JAX's balanced tie rule: the coefficient of a is [a == y] / (1 + [b == y]). */
static jx_array *balanced(jx_array *a, jx_array *y, jx_array *b) {
  jx_array *one = jx_rule_full_like(y, 1), *zero = jx_rule_zeros_like(y);
  jx_array *num = select(b2(&jx_prim_eq, a, y), zero, one);
  jx_array *den = select(b2(&jx_prim_eq, b, y), one, jx_rule_full_like(y, 2));
  return b2(&jx_prim_div, num, den);
}

static jx_status jvp_extremum(const jx_prim *prim, jx_array *const *x, jx_array *const *t,
                              jx_array **y, jx_array **ty) {
  y[0] = jx_bind1(prim, 2, x, NULL);
  if (jx_rule_no_tangent(x[0]->dtype)) {
    ty[0] = NULL;
    return jx_last_status();
  }
  ty[0] = jx_rule_add(jx_rule_scale(t[0], balanced(x[0], y[0], x[1])),
                      jx_rule_scale(t[1], balanced(x[1], y[0], x[0])));
  return jx_last_status();
}

jx_status jx_jvp_max(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,
                     jx_array **y, jx_array **ty, int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)nout;
  (void)nsub;
  (void)s;
  return jvp_extremum(&jx_prim_max, x, t, y, ty);
}

jx_status jx_jvp_min(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,
                     jx_array **y, jx_array **ty, int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)nout;
  (void)nsub;
  (void)s;
  return jvp_extremum(&jx_prim_min, x, t, y, ty);
}

jx_status jx_jvp_atan2(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t,
                       int nout, jx_array **y, jx_array **ty, int nsub,
                       struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)nout;
  (void)nsub;
  (void)s;
  y[0] = jx_bind1(&jx_prim_atan2, 2, x, NULL);
  /* atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2) */
  jx_array *den = b2(&jx_prim_add, b2(&jx_prim_mul, x[0], x[0]), b2(&jx_prim_mul, x[1], x[1]));
  jx_array *num = jx_rule_sub(jx_rule_scale(t[0], x[1]), jx_rule_scale(t[1], x[0]));
  ty[0] = num ? b2(&jx_prim_div, num, den) : NULL;
  return jx_last_status();
}

/* ---- transposes ---- */
jx_status jx_transpose_add(const jx_params *p, int nin, jx_array *const *in, const jx_aval *avals,
                           const uint8_t *linear, int nout, jx_array *const *ct, jx_array **ct_in,
                           int nsub, struct jx_program *const *s) {
  (void)p;
  (void)in;
  (void)avals;
  (void)nout;
  (void)nsub;
  (void)s;
  for (int i = 0; i < nin; i++) ct_in[i] = linear[i] ? ct[0] : NULL;
  return JX_OK;
}

jx_status jx_transpose_sub(const jx_params *p, int nin, jx_array *const *in, const jx_aval *avals,
                           const uint8_t *linear, int nout, jx_array *const *ct, jx_array **ct_in,
                           int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)in;
  (void)avals;
  (void)nout;
  (void)nsub;
  (void)s;
  ct_in[0] = linear[0] ? ct[0] : NULL;
  ct_in[1] = linear[1] ? jx_rule_neg(ct[0]) : NULL;
  return jx_last_status();
}

jx_status jx_transpose_mul(const jx_params *p, int nin, jx_array *const *in, const jx_aval *avals,
                           const uint8_t *linear, int nout, jx_array *const *ct, jx_array **ct_in,
                           int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)avals;
  (void)nout;
  (void)nsub;
  (void)s;
  if (linear[0] && linear[1])
    return jx_error_set(JX_ERR_INTERNAL, "transpose of mul: both operands are linear");
  ct_in[0] = linear[0] ? jx_rule_scale(ct[0], in[1]) : NULL;
  ct_in[1] = linear[1] ? jx_rule_scale(ct[0], in[0]) : NULL;
  return jx_last_status();
}

jx_status jx_transpose_div(const jx_params *p, int nin, jx_array *const *in, const jx_aval *avals,
                           const uint8_t *linear, int nout, jx_array *const *ct, jx_array **ct_in,
                           int nsub, struct jx_program *const *s) {
  (void)p;
  (void)nin;
  (void)avals;
  (void)nout;
  (void)nsub;
  (void)s;
  if (linear[1]) return jx_error_set(JX_ERR_INTERNAL, "transpose of div: the divisor is linear");
  ct_in[0] = ct[0] ? b2(&jx_prim_div, ct[0], in[1]) : NULL;
  ct_in[1] = NULL;
  return jx_last_status();
}
