/* Collectives as primitives, and the per-device context they run in.
 *
 * Parameters (every collective): axes = l0, the axis ids (jx_axis_id) of the
 * named axes in the order the user named them ("a,b": a major). Then:
 *   psum, pmax, pmin:      (no more)        x -> x reduced over the group
 *   all_gather:            dim=i0 tiled=i1 size=i2  x -> blocks of all ranks along dim
 *                                           (tiled: concatenated; else a new axis dim)
 *   psum_scatter:          dim=i0 tiled=i1 size=i2  x -> this rank's block of the sum along
 *                                           dim (tiled: dim / n; else dim must be n, removed)
 *   all_to_all:            split=i0 concat=i1 size=i2
 *   ppermute:              perm=i0 size=i1 (perm: jx_intern_ints number of the flat list
 *                          src0, dst0, src1, dst1, ...)
 * size is the group size, which the shape rules need (programs are verified
 * where no axis is bound); 0 means "look it up" (the bound axes while
 * tracing, the mesh on a device), and a size that disagrees with the
 * communicator's is an error.
 * axis_index (transform/axis.c) runs in the same context.
 *
 * Evaluated concretely, a collective finds its communicator through the
 * calling device thread's context (set by jx_spmd_run); under jx_vmap_axis
 * its batching rule computes it over the batch axis instead. */
#ifndef JX_SRC_PARALLEL_COLLECTIVE_H
#define JX_SRC_PARALLEL_COLLECTIVE_H

#include "../compile/async_collective.h"
#include "../prims/prim.h"
#include "mesh.h"

extern const jx_prim jx_prim_psum, jx_prim_pmax, jx_prim_pmin, jx_prim_all_gather,
    jx_prim_psum_scatter, jx_prim_all_to_all, jx_prim_ppermute;
/* 1 when p is one of the collectives above (not pvary, not axis_index). */
int jx_prim_is_collective(const jx_prim *p);
/* The cast of an invariant value to a varying one (pvary.c, trace/vma.h):
 * axes = l0. */
extern const jx_prim jx_prim_pvary;

/* What a device thread running a per-device program knows: its mesh and
 * its position in it (NULL outside jx_spmd_run). */
typedef struct {
  jx_mesh *mesh;
  int position;
  double timeout_s; /* collective deadline */
} jx_spmd_ctx;
const jx_spmd_ctx *jx_spmd_current(void);

/* The communicator for the axes named by ids[0..n) (jx_axis_id numbers) in
 * the calling device's context, and the caller's rank in it; NULL with an
 * error naming op when there is no context or an axis is not the mesh's. */
struct jx_comm *jx_spmd_comm(const int64_t *ids, int n, const char *op, int *rank);

/* A collective started on a device and finished later (collective.c),
 * installed at load as the executable's (compile/async_collective.h says
 * what each does; JX_ASYNC_COLLECTIVES=0 makes every one synchronous). */
int jx_collective_start(const jx_prim *prim, const jx_params *p, struct jx_array *in,
                        struct jx_array **out, jx_collective_pending **pending);
jx_status jx_collective_finish(jx_collective_pending *h);
long jx_collective_async_started(void); /* how many have started, for tests */

/* Small integer lists interned by value (ppermute's pairs): equal lists get
 * equal numbers, which fit in a primitive parameter. */
int jx_intern_ints(const int64_t *v, int n);
/* The list with number id (borrowed, lives forever) and its length. */
const int64_t *jx_interned_ints(int id, int *n);

#endif
