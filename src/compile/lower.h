/* Lowering before compilation: what only matters to the transformations
 * goes. A custom_jvp_call or custom_vjp_call equation carries the custom
 * derivative rules of its function (softmax's, relu's, a user's); a jitted
 * program keeps them, since grad of a jitted function differentiates the
 * jitted program itself. Its executable runs a lowered copy instead, with
 * each such call replaced by its function's equations, so that they fuse
 * with their neighbours instead of running as a nested program. The pvary
 * casts of a shard_map body (trace/vma.h), which only type its values for
 * reverse mode, are dropped there too. */
#ifndef JX_SRC_COMPILE_LOWER_H
#define JX_SRC_COMPILE_LOWER_H

#include "../ir/program.h"

/* p with its custom calls inlined and simplified again (a new reference; p
 * itself when it has none), or NULL with an error recorded. */
jx_program *jx_lower_custom_calls(const jx_program *p);

/* The same, but a call for which keep(program it is in, call) says 1 stays
 * whole (a backend that runs it as one step: cuda/cuda_fuse.h's attention
 * calls); calls nested in a kept one are not visited. */
typedef int (*jx_lower_keep_fn)(const jx_program *p, const jx_eqn *e);
jx_program *jx_lower_custom_calls_keeping(const jx_program *p, jx_lower_keep_fn keep);

/* 1 when e is a custom_jvp or custom_vjp call whose first nested program is
 * its function, run on its inputs (what the lowering inlines). */
int jx_lower_is_custom_call(const jx_eqn *e);

#endif
