/* Eager ops on sharded arrays run where their operands are (computation
 * follows data): an eager op is a one-equation program run as a jit without
 * shardings is (sharded_jit.h). */
#ifndef JX_SRC_PARALLEL_SHARDED_EAGER_H
#define JX_SRC_PARALLEL_SHARDED_EAGER_H

#include "../prims/prim.h"

/* 1 when the eager application of p to these concrete operands runs on
 * their mesh: some operand is sharded, p computes (not a collective, an
 * effect, a shard_map or a sharding constraint, which handle sharded
 * operands themselves), its nested programs hold no shard_map and the
 * caller is not a device's thread. JX_LOG_COMPILES=1 names the arguments
 * an op that does not follow its data gathers. */
int jx_eager_follows_data(const jx_prim *p, int nin, jx_array *const *in, int nsub,
                          struct jx_program *const *subs);

/* Applies p to sharded operands on their mesh: out[o] are sharded arrays
 * laid out as propagation chose. */
jx_status jx_sharded_bind(const jx_prim *p, int nin, jx_array *const *in, const jx_params *params,
                          int nsub, struct jx_program *const *subs, int nout, jx_array **out);

#endif
