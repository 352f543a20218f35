/* Running one program on every device of a mesh (SPMD): the runtime of
 * shard_map, pmap and the sharded jit. */
#ifndef JX_SRC_PARALLEL_SPMD_H
#define JX_SRC_PARALLEL_SPMD_H

#include "../ir/program.h"
#include "sharding.h"

/* Runs body on each device of m. Device p's inputs are the blocks of in[i]
 * laid out by in_sh[i] (inputs laid out otherwise are re-laid first); its
 * outputs are the blocks at p of out[o], laid out by out_sh[o] (whose
 * global shape follows from the blocks' shape). An error on any device is
 * reported here, naming `what` and the device. */
jx_status jx_spmd_run(jx_mesh *m, const jx_program *body, int nin, jx_array *const *in,
                      jx_sharding *const *in_sh, int nout, jx_sharding *const *out_sh,
                      jx_array **out, const char *what);

/* The global shape of an array laid out by s whose blocks have shape local. */
jx_shape jx_sharding_global_shape(const jx_sharding *s, jx_shape local);

#endif
