/* sharding_constraint: inside a traced function, says how a value should be
 * laid out (jx_with_sharding_constraint / jx_device_put on a tracer). The
 * value is unchanged; the sharded jit's propagation treats it as fixed.
 * JX_AUTO (sharding number 0) leaves the layout to the automatic sharding
 * planner: propagation passes layouts through it as an elementwise op, and a
 * plan fixes it. */
#ifndef JX_SRC_PARALLEL_CONSTRAINT_H
#define JX_SRC_PARALLEL_CONSTRAINT_H

#include "../ir/program.h"
#include "../prims/prim.h"
#include "sharding.h"

extern const jx_prim jx_prim_sharding_constraint; /* sharding=i0 (registry number, 0: JX_AUTO) */
jx_array *jx_sharding_constraint(jx_array *x, jx_sharding *s);

/* The constraint's layout, NULL for JX_AUTO. */
jx_sharding *jx_constraint_sharding(const jx_eqn *e);

#endif
