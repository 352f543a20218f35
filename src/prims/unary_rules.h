/* The transformation rules of unary.c's rows (unary_rules.c), and the
 * polygamma row that digamma's derivative needs. */
#ifndef JX_SRC_PRIMS_UNARY_RULES_H
#define JX_SRC_PRIMS_UNARY_RULES_H

#include "binary_rules.h"

/* polygamma(x) of order m = i0 >= 1, the m-th derivative of digamma. JAX's
 * polygamma_p takes m as an operand; here it is a parameter, since jx only
 * binds it from digamma's JVP (m = 1) and its own (m + 1). */
extern const jx_prim jx_prim_polygamma;
/* psi^(m)(x) in double, for the kernel */
double jx_polygamma_d(int m, double x);

JX_JVP_RULE(jx_jvp_abs);
JX_JVP_RULE(jx_jvp_exp);
JX_JVP_RULE(jx_jvp_exp2);
JX_JVP_RULE(jx_jvp_expm1);
JX_JVP_RULE(jx_jvp_log);
JX_JVP_RULE(jx_jvp_log1p);
JX_JVP_RULE(jx_jvp_sqrt);
JX_JVP_RULE(jx_jvp_rsqrt);
JX_JVP_RULE(jx_jvp_cbrt);
JX_JVP_RULE(jx_jvp_tanh);
JX_JVP_RULE(jx_jvp_logistic);
JX_JVP_RULE(jx_jvp_sin);
JX_JVP_RULE(jx_jvp_cos);
JX_JVP_RULE(jx_jvp_tan);
JX_JVP_RULE(jx_jvp_asin);
JX_JVP_RULE(jx_jvp_acos);
JX_JVP_RULE(jx_jvp_atan);
JX_JVP_RULE(jx_jvp_sinh);
JX_JVP_RULE(jx_jvp_cosh);
JX_JVP_RULE(jx_jvp_asinh);
JX_JVP_RULE(jx_jvp_acosh);
JX_JVP_RULE(jx_jvp_atanh);
JX_JVP_RULE(jx_jvp_erf);
JX_JVP_RULE(jx_jvp_erf_inv);
JX_JVP_RULE(jx_jvp_lgamma);
JX_JVP_RULE(jx_jvp_digamma);
JX_JVP_RULE(jx_jvp_polygamma);
JX_JVP_RULE(jx_jvp_integer_pow);
JX_TRANSPOSE_RULE(jx_transpose_neg);

#endif
