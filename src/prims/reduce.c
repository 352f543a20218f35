/* Placeholder rows: replaced by the family's implementation. */
#include "../base/error.h"
#include "prims.h"

static jx_status unimplemented(const jx_params *p, int nin, const jx_aval *in, int nout, jx_aval *out) {
  (void)p; (void)nin; (void)in; (void)nout; (void)out;
  return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: not implemented yet", "reduce");
}
static void none(const jx_params *p, int nin, const jx_tensor *in, int nout, jx_tensor *out) {
  (void)p; (void)nin; (void)in; (void)nout; (void)out;
}

const jx_prim jx_prim_reduce_sum = {.name = "reduce_sum", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_reduce_prod = {.name = "reduce_prod", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_reduce_max = {.name = "reduce_max", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_reduce_min = {.name = "reduce_min", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_reduce_and = {.name = "reduce_and", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_reduce_or = {.name = "reduce_or", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_argmax = {.name = "argmax", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_argmin = {.name = "argmin", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim *const jx_prims_reduce[] = {&jx_prim_reduce_sum, &jx_prim_reduce_prod, &jx_prim_reduce_max, &jx_prim_reduce_min, &jx_prim_reduce_and, &jx_prim_reduce_or, &jx_prim_argmax, &jx_prim_argmin, NULL};
