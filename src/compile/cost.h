/* The cost model's per-equation figures, shared by jx_fn_cost (cost.c) and
 * the profiler's per-step GFLOP/s and GB/s, so the two always agree. */
#ifndef JX_SRC_COMPILE_COST_H
#define JX_SRC_COMPILE_COST_H

#include <jx/transform.h>

#include "../ir/program.h"

/* Bytes of an array of this aval. */
double jx_aval_bytes(jx_aval a);
/* Floating-point operations of one equation: 2 per multiply-add of a
 * contraction, one per reduced element, one per element of an elementwise
 * op, 0 for data movement. */
double jx_eqn_flops(const jx_program *p, const jx_eqn *e);

/* jx_fn_cost's figures for p as it stands (a program the jit runs), added
 * into *c (its peak: the larger of the two); the profiler's estimate. */
void jx_program_cost(const jx_program *p, jx_cost *c);

#endif
