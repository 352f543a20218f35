/* Plans kept for the process: a program planned again (another jit of the
 * same function, a new input signature that traces to the same program)
 * on the same mesh, figures, fixed inputs, aliases and limit gets the plan made
 * before instead of solving again. */
#ifndef JX_SRC_PARALLEL_AUTO_PLAN_CACHE_H
#define JX_SRC_PARALLEL_AUTO_PLAN_CACHE_H

#include "plan.h"

/* jx_auto_plan_solve_aliased's plan, from the cache when it has it (out is
 * the caller's copy either way). */
jx_status jx_auto_plan_cached(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                              const jx_pspec *const *fixed, const int *alias, double memory_limit,
                              jx_auto_plan *out);

/* How many plans the solver has made in this process (cache hits do not
 * count): the tests check the cache is used. */
int64_t jx_auto_plan_solves(void);

#endif
