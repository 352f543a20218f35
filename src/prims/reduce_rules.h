/* Transformation rules of the reduction family: reductions and argmax/argmin
 * (reduce.c, rules in reduce_rules.c), cumulative ops (cumulative.c, rules in
 * cumulative_rules.c), sort and top_k (sort.c, sort_rules.c) and windowed
 * reductions (window.c, window_rules.c). They follow JAX's lax rules; each
 * rules file says where it departs from them. */
#ifndef JX_SRC_PRIMS_REDUCE_RULES_H
#define JX_SRC_PRIMS_REDUCE_RULES_H

#include "prim.h"

/* reduce.c: reduce_sum is linear (its JVP is jx_jvp_linear_first) */
JX_TRANSPOSE_RULE(jx_transpose_reduce_sum);
JX_JVP_RULE(jx_jvp_reduce_prod);
JX_JVP_RULE(jx_jvp_reduce_chooser); /* reduce_max, reduce_min */
JX_BATCH_RULE(jx_batch_reduce);     /* every reduce_* row (axes = l0) */
JX_BATCH_RULE(jx_batch_arg);        /* argmax, argmin (axis = i0) */

/* cumulative.c: cumsum is linear */
JX_TRANSPOSE_RULE(jx_transpose_cumsum);
JX_JVP_RULE(jx_jvp_cumprod);
JX_JVP_RULE(jx_jvp_cummax);
JX_JVP_RULE(jx_jvp_cummin);
JX_BATCH_RULE(jx_batch_cumulative);

/* sort.c */
JX_JVP_RULE(jx_jvp_sort);
JX_BATCH_RULE(jx_batch_sort);
JX_JVP_RULE(jx_jvp_top_k);
JX_BATCH_RULE(jx_batch_top_k);

/* window.c: reduce_window_sum is linear */
JX_TRANSPOSE_RULE(jx_transpose_reduce_window_sum);
JX_JVP_RULE(jx_jvp_reduce_window_chooser); /* reduce_window_max, reduce_window_min */
JX_BATCH_RULE(jx_batch_reduce_window);

#endif
