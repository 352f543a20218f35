/* Shared pieces of the control-flow primitives (cond.c, while.c, scan.c). */
#ifndef JX_SRC_TRANSFORM_CONTROL_H
#define JX_SRC_TRANSFORM_CONTROL_H

#include <jx/transform.h>

#include "../ir/program.h"

/* The programs of branches[k] for inputs like ops; every branch must take n
 * inputs and give outputs of the same avals. Errors name op and the branch. */
jx_status jx_control_trace_branches(const char *op, int nbranches, jx_fn *const *branches, int n,
                                    jx_array *const *ops, jx_program **out);

/* The program of f for inputs of these avals, checked to take nin inputs. */
jx_program *jx_control_trace(const char *op, const char *role, jx_fn *f, int nin,
                             const jx_aval *avals);

/* 1 when two avals have the same dtype and shape (weakness aside). */
int jx_aval_same_type(jx_aval a, jx_aval b);

#endif
