/* Computation follows data (follow_data.h): nothing is sharded until the
 * parallel layer installs its functions. */
#include "follow_data.h"

#include "../base/error.h"

static int eager_follows_none(const jx_prim *p, int nin, jx_array *const *in, int nsub,
                              jx_program *const *subs) {
  (void)p, (void)nin, (void)in, (void)nsub, (void)subs;
  return 0;
}
static jx_status eager_run_none(const jx_prim *p, int nin, jx_array *const *in,
                                const jx_params *params, int nsub, jx_program *const *subs,
                                int nout, jx_array **out) {
  (void)nin, (void)in, (void)params, (void)nsub, (void)subs;
  for (int o = 0; o < nout; o++) out[o] = jx_poison();
  return jx_error_set(JX_ERR_INTERNAL, "%s: sharded operands without the parallel layer", p->name);
}
static int program_follows_none(const jx_program *p, jx_array *const *in) {
  (void)p, (void)in;
  return 0;
}
static jx_status program_run_none(const jx_program *p, jx_array *const *in, jx_array **out) {
  (void)in, (void)out;
  return jx_error_set(JX_ERR_INTERNAL, "'%s': sharded arguments without the parallel layer",
                      p->name);
}
static const char *spec_none(const jx_array *a) {
  (void)a;
  return "";
}

static const jx_follow_data_hooks none = {eager_follows_none, eager_run_none, program_follows_none,
                                          program_run_none, spec_none};

const jx_follow_data_hooks *jx_follow_data = &none;

void jx_follow_data_install(const jx_follow_data_hooks *hooks) {
  jx_follow_data = hooks ? hooks : &none;
}
