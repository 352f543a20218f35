/* Placeholder rows: replaced by the family's implementation. */
#include "../base/error.h"
#include "prims.h"

static jx_status unimplemented(const jx_params *p, int nin, const jx_aval *in, int nout, jx_aval *out) {
  (void)p; (void)nin; (void)in; (void)nout; (void)out;
  return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: not implemented yet", "dot");
}
static void none(const jx_params *p, int nin, const jx_tensor *in, int nout, jx_tensor *out) {
  (void)p; (void)nin; (void)in; (void)nout; (void)out;
}

const jx_prim jx_prim_dot_general = {.name = "dot_general", .nin = JX_VARIADIC, .nout = 1, .params = "", .infer = unimplemented, .eval = none};
const jx_prim *const jx_prims_dot[] = {&jx_prim_dot_general, NULL};
