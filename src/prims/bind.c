/* Applying a primitive (bind.h): the trace layer's dispatcher, installed at
 * load. */
#include "bind.h"

#include "../base/error.h"

static jx_bind_fn dispatcher;

void jx_bind_install(jx_bind_fn dispatch) { dispatcher = dispatch; }

jx_status jx_bind_sub(const jx_prim *p, int nin, jx_array *const *in, const jx_params *params,
                      int nsub, struct jx_program *const *subs, jx_array **out) {
  static const jx_params no_params = JX_PARAMS_INIT;
  const jx_params *pp = params ? params : &no_params;
  if (dispatcher) return dispatcher(p, nin, in, pp, nsub, subs, out);
  int nout = jx_prim_nout(p, nin, pp);
  for (int o = 0; o < nout; o++) out[o] = jx_poison();
  return jx_error_set(JX_ERR_INTERNAL, "%s: no dispatcher is installed (trace/dispatch.c)",
                      p->name);
}

jx_status jx_bind(const jx_prim *p, int nin, jx_array *const *in, const jx_params *params,
                  jx_array **out) {
  return jx_bind_sub(p, nin, in, params, 0, NULL, out);
}

jx_array *jx_bind1(const jx_prim *p, int nin, jx_array *const *in, const jx_params *params) {
  jx_array *out[1];
  jx_bind(p, nin, in, params, out);
  return out[0];
}
