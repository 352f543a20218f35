/* The SPMD partitioner of the sharded jit: from a global program and the
 * layout of each of its variables (propagate.h), the per-device program on
 * local blocks, with the communication the layouts call for. */
#ifndef JX_SRC_PARALLEL_PARTITION_H
#define JX_SRC_PARALLEL_PARTITION_H

#include "propagate.h"

/* The per-device program of p (not simplified or compiled): inputs are the
 * blocks of p's inputs laid out by spec[p->in[i]]; outputs are the blocks of
 * p's outputs laid out by out_spec[o]. Traced with m's axes bound. */
jx_program *jx_partition(jx_mesh *m, const jx_program *p, const jx_pspec *spec,
                         const jx_pspec *out_spec);

/* x (a local block laid out by from, of global shape g) laid out by to:
 * all_gather for dims whose split goes away, a local dynamic slice at
 * axis_index * block for dims that become split. Inside a trace with m's
 * axes bound. */
jx_array *jx_reshard(jx_mesh *m, jx_array *x, const jx_pspec *from, const jx_pspec *to);

/* ---- for tests (sharded_jit.c) ---- */
/* The per-device program f (a jx_jit with shardings) runs for these
 * arguments, printed (the caller frees it); NULL with an error. */
char *jx_sharded_jit_device_text(jx_fn *f, jx_array *const *in);
/* How many times f was partitioned (one per input-sharding tuple). */
int64_t jx_sharded_jit_partitions(jx_fn *f);

#endif
