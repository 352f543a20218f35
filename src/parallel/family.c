/* The primitives of the parallel layer, as one family of the registry. */
#include "../prims/prims.h"
#include "collective.h"
#include "constraint.h"
#include "shard_map.h"

const jx_prim *const jx_prims_parallel[] = {
    &jx_prim_sharding_constraint, &jx_prim_shard_map,
    /* collectives (collective.c) */
    &jx_prim_psum, &jx_prim_pmax, &jx_prim_pmin, &jx_prim_all_gather, &jx_prim_psum_scatter,
    &jx_prim_all_to_all, &jx_prim_ppermute, &jx_prim_pvary, NULL};
