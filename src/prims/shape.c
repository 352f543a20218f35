/* Placeholder rows: replaced by the family's implementation. */
#include "../base/error.h"
#include "prims.h"

static jx_status unimplemented(const jx_params *p, int nin, const jx_aval *in, int nout, jx_aval *out) {
  (void)p; (void)nin; (void)in; (void)nout; (void)out;
  return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: not implemented yet", "shape");
}
static void none(const jx_params *p, int nin, const jx_tensor *in, int nout, jx_tensor *out) {
  (void)p; (void)nin; (void)in; (void)nout; (void)out;
}

const jx_prim jx_prim_broadcast_in_dim = {.name = "broadcast_in_dim", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_reshape = {.name = "reshape", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_squeeze = {.name = "squeeze", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_expand_dims = {.name = "expand_dims", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_transpose = {.name = "transpose", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_rev = {.name = "rev", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_iota = {.name = "iota", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim *const jx_prims_shape[] = {&jx_prim_broadcast_in_dim, &jx_prim_reshape, &jx_prim_squeeze, &jx_prim_expand_dims, &jx_prim_transpose, &jx_prim_rev, &jx_prim_iota, NULL};
