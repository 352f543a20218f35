/* Shared pieces of the control-flow primitives (cond.c, while.c, scan.c). */
#ifndef JX_SRC_TRANSFORM_CONTROL_H
#define JX_SRC_TRANSFORM_CONTROL_H

#include <jx/transform.h>

#include "../ir/program.h"

/* The programs of branches[k] for inputs like ops; every branch must take n
 * inputs and give outputs of the same avals. Errors name op and the branch. */
jx_status jx_control_trace_branches(const char *op, int nbranches, jx_fn *const *branches, int n,
                                    jx_array *const *ops, jx_program **out);

/* jx_switch whose runs a profiler records (base/hooks.h's branch hook):
 * which branch ran, labeled with the integer scalar ops[label_op] and
 * tagged with tag. */
jx_status jx_switch_labeled(jx_array *index, int label_op, int tag, int nbranches,
                            jx_fn *const *branches, int n, jx_array *const *ops, jx_array **out);

/* The program of f for inputs of these avals, checked to take nin inputs. */
jx_program *jx_control_trace(const char *op, const char *role, jx_fn *f, int nin,
                             const jx_aval *avals);

/* Row pieces shared by primitives that wrap a nested program (remat,
 * custom_vjp_call, custom_jvp_call): no shape rule of their own, the outputs
 * of their first nested program, and eager execution of it. */
jx_status jx_wrapper_infer(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out);
jx_status jx_wrapper_outputs(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out);
jx_status jx_wrapper_impl(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out);

/* 1 when two avals have the same dtype and shape (weakness aside). */
int jx_aval_same_type(jx_aval a, jx_aval b);

#endif
