/* Helpers for writing transformation rules (see prim.h). Rules apply
 * primitives with jx_bind and the public ops; NULL stands for a symbolic zero
 * tangent or cotangent throughout. */
#ifndef JX_SRC_PRIMS_RULES_H
#define JX_SRC_PRIMS_RULES_H

#include <jx/ops.h>

#include "bind.h"

/* Zeros of an aval, built from a scalar literal (cheap to stage). */
jx_array *jx_rule_zeros(jx_aval a);
jx_array *jx_rule_zeros_like(jx_array *x);
/* A scalar literal of x's dtype (strong), broadcast to x's shape. */
jx_array *jx_rule_full_like(jx_array *x, double v);
/* a + b, a - b, -a with NULL as zero (result NULL when both are). */
jx_array *jx_rule_add(jx_array *a, jx_array *b);
jx_array *jx_rule_sub(jx_array *a, jx_array *b);
jx_array *jx_rule_neg(jx_array *a);
/* t * c with t NULL giving NULL. */
jx_array *jx_rule_scale(jx_array *t, jx_array *c);
/* Applies prim p to x with params (single output). */
jx_array *jx_rule_bind1(const jx_prim *p, int nin, jx_array *const *x, const jx_params *params);

/* 1 if a tangent of this dtype is always zero (integers and bool: float0). */
int jx_rule_no_tangent(jx_dtype dt);

/* The JVP of a primitive whose outputs have zero tangent (comparisons,
 * integer ops, stop_gradient): the primal outputs only. */
jx_status jx_jvp_zero(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,
                      jx_array **y, jx_array **ty, int nsub, struct jx_program *const *subs);
/* Used by jx_jvp_zero: the row currently being applied (set by the JVP
 * interpreter so that shared rules can bind it). */
extern _Thread_local const jx_prim *jx_rule_current_prim;

/* x with axis `from` moved to position `to`. */
jx_array *jx_rule_moveaxis(jx_array *x, int from, int to);
/* x batched along bdim moved to axis 0, or broadcast with a new leading axis
 * of size n when bdim is JX_NOT_MAPPED. */
jx_array *jx_rule_batch_to_front(jx_array *x, int bdim, int64_t n);
/* x gathered along axis (normalized) at idx: out[..., i, ...] =
 * x[..., idx[..., i, ...], ...], idx an i64 array of x's shape but for axis
 * whose entries are all in [0, x's size along axis). jx_take_along_axis
 * after its checks, and the sorts' JVPs. */
jx_array *jx_rule_take_along_axis(jx_array *x, jx_array *idx, int axis);
/* Generic batching for elementwise primitives: every operand to axis 0. */
jx_status jx_batch_elementwise(const jx_params *p, int nin, jx_array *const *in, const int *bdim,
                               int64_t axis_size, int nout, jx_array **out, int *out_bdim, int nsub,
                               struct jx_program *const *subs);

#endif
