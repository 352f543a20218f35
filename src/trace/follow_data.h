/* Computation follows data: an eager op, or a program compiled for one
 * device, applied to sharded arrays runs on their mesh. The parallel layer
 * knows how, and installs these functions at load (parallel/install.c);
 * until then nothing is sharded and nothing follows data. */
#ifndef JX_SRC_TRACE_FOLLOW_DATA_H
#define JX_SRC_TRACE_FOLLOW_DATA_H

#include "../ir/program.h"

typedef struct {
  /* 1 when the eager application of p to these concrete operands runs on
   * their mesh (parallel/sharded_eager.h: jx_eager_follows_data). */
  int (*eager_follows)(const jx_prim *p, int nin, jx_array *const *in, int nsub,
                       jx_program *const *subs);
  /* Applies p to sharded operands on their mesh (jx_sharded_bind). */
  jx_status (*eager_run)(const jx_prim *p, int nin, jx_array *const *in, const jx_params *params,
                         int nsub, jx_program *const *subs, int nout, jx_array **out);
  /* 1 when p's run with these concrete arguments runs on their mesh, and
   * that run (parallel/sharded_jit.h: jx_follows_data, jx_follow_data_run). */
  int (*program_follows)(const jx_program *p, jx_array *const *in);
  jx_status (*program_run)(const jx_program *p, jx_array *const *in, jx_array **out);
  /* a sharded array's layout for messages, as jx_sharding_spec shows it */
  const char *(*spec)(const jx_array *a);
} jx_follow_data_hooks;

/* Never NULL: nothing follows data until the parallel layer installs its own. */
extern const jx_follow_data_hooks *jx_follow_data;
void jx_follow_data_install(const jx_follow_data_hooks *hooks);

#endif
