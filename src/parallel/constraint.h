/* sharding_constraint: inside a traced function, says how a value should be
 * laid out (jx_with_sharding_constraint / jx_device_put on a tracer). The
 * value is unchanged; the sharded jit's propagation treats it as fixed. */
#ifndef JX_SRC_PARALLEL_CONSTRAINT_H
#define JX_SRC_PARALLEL_CONSTRAINT_H

#include "../prims/prim.h"
#include "sharding.h"

extern const jx_prim jx_prim_sharding_constraint; /* sharding=i0 (registry number) */
jx_array *jx_sharding_constraint(jx_array *x, jx_sharding *s);

#endif
