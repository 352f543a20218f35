/* jx_jit with in_shardings/out_shardings: the global program is partitioned
 * into one per-device program (sharding propagation + SPMD partitioner) and
 * run on the mesh's devices. */
#ifndef JX_SRC_PARALLEL_SHARDED_JIT_H
#define JX_SRC_PARALLEL_SHARDED_JIT_H

#include <jx/parallel.h>

/* Called by jx_jit when opts names shardings. */
jx_fn *jx_jit_sharded(jx_fn *f, const jx_jit_options *opts);

#endif
