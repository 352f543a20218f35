/* Transformation rules of the reduction family: reductions and argmax/argmin
 * (reduce.c, rules in reduce_rules.c), cumulative ops (cumulative.c, rules in
 * cumulative_rules.c), sort and top_k (sort.c, sort_rules.c) and windowed
 * reductions (window.c, window_rules.c). They follow JAX's lax rules; each
 * rules file says where it departs from them. */
#ifndef JX_SRC_PRIMS_REDUCE_RULES_H
#define JX_SRC_PRIMS_REDUCE_RULES_H

#include "prim.h"

#define JX_RR_JVP(name)                                                                            \
  jx_status name(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,    \
                 jx_array **y, jx_array **ty, int nsub, struct jx_program *const *s)
#define JX_RR_TRANSPOSE(name)                                                                      \
  jx_status name(const jx_params *p, int nin, jx_array *const *in, const jx_aval *avals,           \
                 const uint8_t *linear, int nout, jx_array *const *ct, jx_array **ct_in, int nsub, \
                 struct jx_program *const *s)
#define JX_RR_BATCH(name)                                                                          \
  jx_status name(const jx_params *p, int nin, jx_array *const *in, const int *bdim, int64_t n,     \
                 int nout, jx_array **out, int *out_bdim, int nsub, struct jx_program *const *s)

/* reduce.c: reduce_sum is linear (its JVP is jx_jvp_linear_first) */
JX_RR_TRANSPOSE(jx_transpose_reduce_sum);
JX_RR_JVP(jx_jvp_reduce_prod);
JX_RR_JVP(jx_jvp_reduce_chooser); /* reduce_max, reduce_min */
JX_RR_BATCH(jx_batch_reduce);     /* every reduce_* row (axes = l0) */
JX_RR_BATCH(jx_batch_arg);        /* argmax, argmin (axis = i0) */

/* cumulative.c: cumsum is linear */
JX_RR_TRANSPOSE(jx_transpose_cumsum);
JX_RR_JVP(jx_jvp_cumprod);
JX_RR_JVP(jx_jvp_cummax);
JX_RR_JVP(jx_jvp_cummin);
JX_RR_BATCH(jx_batch_cumulative);

/* sort.c */
JX_RR_JVP(jx_jvp_sort);
JX_RR_BATCH(jx_batch_sort);
JX_RR_JVP(jx_jvp_top_k);
JX_RR_BATCH(jx_batch_top_k);

/* window.c: reduce_window_sum is linear */
JX_RR_TRANSPOSE(jx_transpose_reduce_window_sum);
JX_RR_JVP(jx_jvp_reduce_window_chooser); /* reduce_window_max, reduce_window_min */
JX_RR_BATCH(jx_batch_reduce_window);

#endif
