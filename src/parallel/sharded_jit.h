/* jx_jit with in_shardings/out_shardings: the global program is partitioned
 * into one per-device program (sharding propagation + SPMD partitioner) and
 * run on the mesh's devices. */
#ifndef JX_SRC_PARALLEL_SHARDED_JIT_H
#define JX_SRC_PARALLEL_SHARDED_JIT_H

#include <jx/parallel.h>

/* Called by jx_jit when opts names shardings. */
jx_fn *jx_jit_sharded(jx_fn *f, const jx_jit_options *opts);

/* For tests: the compiled per-device program f (a jx_jit with shardings)
 * runs for these arguments (a new reference); NULL with an error. */
struct jx_program;
struct jx_program *jx_sharded_jit_device_program(jx_fn *f, jx_array *const *in);

#endif
