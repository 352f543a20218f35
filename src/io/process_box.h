/* The part of a sharded array that this process's devices hold, for loaders
 * that build only their own rows of a batch (docs/training.md). */
#ifndef JX_SRC_IO_PROCESS_BOX_H
#define JX_SRC_IO_PROCESS_BOX_H

#include <jx/jx.h>

/* Whether s's mesh has devices of more than one process (0 in a job of one
 * process); -1 and an error when the mesh's layout cannot be read. */
int jx_io_sharding_spans_processes(jx_sharding *s);

/* The box [lo[d], hi[d]) of the global shape g that this process's devices
 * hold under s: the smallest box covering their blocks, which is what
 * jx_array_from_process_local takes. */
jx_status jx_io_process_box(jx_sharding *s, jx_shape g, int64_t *lo, int64_t *hi);

#endif
