/* Placeholder rows: replaced by the family's implementation. */
#include "../base/error.h"
#include "prims.h"

static jx_status unimplemented(const jx_params *p, int nin, const jx_aval *in, int nout, jx_aval *out) {
  (void)p; (void)nin; (void)in; (void)nout; (void)out;
  return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: not implemented yet", "slicing");
}
static void none(const jx_params *p, int nin, const jx_tensor *in, int nout, jx_tensor *out) {
  (void)p; (void)nin; (void)in; (void)nout; (void)out;
}

const jx_prim jx_prim_pad = {.name = "pad", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_concatenate = {.name = "concatenate", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_slice = {.name = "slice", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_dynamic_slice = {.name = "dynamic_slice", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim jx_prim_dynamic_update_slice = {.name = "dynamic_update_slice", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim *const jx_prims_slicing[] = {&jx_prim_pad, &jx_prim_concatenate, &jx_prim_slice, &jx_prim_dynamic_slice, &jx_prim_dynamic_update_slice, NULL};
