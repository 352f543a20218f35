/* Placeholder rows: replaced by the family's implementation. */
#include "../base/error.h"
#include "prims.h"

static jx_status unimplemented(const jx_params *p, int nin, const jx_aval *in, int nout, jx_aval *out) {
  (void)p; (void)nin; (void)in; (void)nout; (void)out;
  return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: not implemented yet", "unary");
}
static void none(const jx_params *p, int nin, const jx_tensor *in, int nout, jx_tensor *out) {
  (void)p; (void)nin; (void)in; (void)nout; (void)out;
}

const jx_prim jx_prim_neg = {.name = "neg", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_abs = {.name = "abs", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_sign = {.name = "sign", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_floor = {.name = "floor", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_ceil = {.name = "ceil", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_round = {.name = "round", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_exp = {.name = "exp", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_exp2 = {.name = "exp2", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_expm1 = {.name = "expm1", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_log = {.name = "log", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_log1p = {.name = "log1p", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_sqrt = {.name = "sqrt", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_rsqrt = {.name = "rsqrt", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_cbrt = {.name = "cbrt", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_tanh = {.name = "tanh", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_logistic = {.name = "logistic", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_sin = {.name = "sin", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_cos = {.name = "cos", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_tan = {.name = "tan", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_asin = {.name = "asin", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_acos = {.name = "acos", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_atan = {.name = "atan", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_sinh = {.name = "sinh", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_cosh = {.name = "cosh", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_asinh = {.name = "asinh", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_acosh = {.name = "acosh", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_atanh = {.name = "atanh", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_erf = {.name = "erf", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_erf_inv = {.name = "erf_inv", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_lgamma = {.name = "lgamma", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_digamma = {.name = "digamma", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_is_finite = {.name = "is_finite", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_not = {.name = "not", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_integer_pow = {.name = "integer_pow", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_population_count = {.name = "population_count", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_stop_gradient = {.name = "stop_gradient", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim *const jx_prims_unary[] = {&jx_prim_neg, &jx_prim_abs, &jx_prim_sign, &jx_prim_floor, &jx_prim_ceil, &jx_prim_round, &jx_prim_exp, &jx_prim_exp2, &jx_prim_expm1, &jx_prim_log, &jx_prim_log1p, &jx_prim_sqrt, &jx_prim_rsqrt, &jx_prim_cbrt, &jx_prim_tanh, &jx_prim_logistic, &jx_prim_sin, &jx_prim_cos, &jx_prim_tan, &jx_prim_asin, &jx_prim_acos, &jx_prim_atan, &jx_prim_sinh, &jx_prim_cosh, &jx_prim_asinh, &jx_prim_acosh, &jx_prim_atanh, &jx_prim_erf, &jx_prim_erf_inv, &jx_prim_lgamma, &jx_prim_digamma, &jx_prim_is_finite, &jx_prim_not, &jx_prim_integer_pow, &jx_prim_population_count, &jx_prim_stop_gradient, NULL};
