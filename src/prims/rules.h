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

/* 1 if a tangent of this dtype is always zero (integers and bool: float0);
 * floats and complex have tangents. */
int jx_rule_no_tangent(jx_dtype dt);

/* Applies ctx's primitive, with ctx's parameters and nested programs, to in:
 * what `prim.bind(*args, **params)` is in a JAX rule. */
jx_status jx_rule_apply(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out);
/* The same, for a primitive with one output: that output. */
jx_array *jx_rule_apply1(const jx_rule_ctx *ctx, jx_array *const *in);

/* ---- rules of the common shapes (JAX's ad.defjvp, ad.deflinear,
 * ad.defbilinear, batching.defvectorized and defbroadcasting) ----
 * A row names these directly, or defines its rule with the macro that
 * builds it from the row's own pieces. */

/* The JVP of a primitive whose outputs have zero tangent (comparisons,
 * integer ops, stop_gradient): the primal outputs only. */
JX_JVP_RULE(jx_jvp_zero);

/* The JVP of a primitive linear in its first operand, whose other operands
 * are integer indices or sizes: the primitive applied to the tangent. */
JX_JVP_RULE(jx_jvp_linear_first);

/* The transpose of a primitive linear in its only operand (JAX's
 * ad.deflinear2): the operand's cotangent from the output's cotangent ct
 * (never NULL) and the operand's aval. */
typedef jx_array *(*jx_linear_transpose_fn)(const jx_rule_ctx *ctx, jx_array *ct,
                                            const jx_aval *aval);
jx_status jx_transpose_linear(const jx_rule_ctx *ctx, jx_linear_transpose_fn f,
                              const jx_aval *avals, jx_array *const *ct, jx_array **ct_in);
/* Defines the transpose rule `name` of such a primitive from f. */
#define JX_DEFLINEAR_TRANSPOSE(name, f)                                                            \
  JX_TRANSPOSE_RULE(name) {                                                                        \
    (void)in, (void)linear;                                                                        \
    return jx_transpose_linear(ctx, f, avals, ct, ct_in);                                          \
  }

/* Elementwise with a derivative per operand: the tangent of the output that
 * operand i contributes, from g = t[i] (never NULL), the primal inputs x and
 * the primal output y; NULL for an operand that has none. */
typedef jx_array *(*jx_deriv_fn)(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x,
                                 jx_array *y);
/* The derivative of an operand the output follows one to one: g itself. */
jx_array *jx_deriv_identity(const jx_rule_ctx *ctx, jx_array *g, jx_array *const *x, jx_array *y);
/* y = prim(x) and ty = the sum of d[i](t[i]) over the operands with a
 * tangent (NULL, a zero, when the output's dtype has no tangent). */
jx_status jx_jvp_elementwise(const jx_rule_ctx *ctx, const jx_deriv_fn *d, jx_array *const *x,
                             jx_array *const *t, jx_array **y, jx_array **ty);
/* Defines the JVP rule `name` from one jx_deriv_fn per operand. */
#define JX_DEFJVP(name, ...)                                                                       \
  JX_JVP_RULE(name) {                                                                              \
    static const jx_deriv_fn derivs[] = {__VA_ARGS__};                                             \
    return jx_jvp_elementwise(ctx, derivs, x, t, y, ty);                                           \
  }

/* Bilinear primitives (mul, dot_general, conv_general_dilated): the JVP
 * applies the primitive to one tangent and the other primal at a time,
 * prim(t0, x1) + prim(x0, t1), with the same parameters. */
JX_JVP_RULE(jx_jvp_bilinear);
/* The cotangent of one operand of a bilinear primitive (of aval `aval`) from
 * the output's cotangent ct (never NULL) and the other operand's value. */
typedef jx_array *(*jx_bilinear_transpose_fn)(const jx_rule_ctx *ctx, jx_array *ct,
                                              const jx_aval *aval, jx_array *other);
/* The transpose of a bilinear primitive, linear in exactly one operand:
 * lhs or rhs gives that operand's cotangent. */
jx_status jx_transpose_bilinear(const jx_rule_ctx *ctx, jx_bilinear_transpose_fn lhs,
                                jx_bilinear_transpose_fn rhs, jx_array *const *in,
                                const jx_aval *avals, const uint8_t *linear, jx_array *const *ct,
                                jx_array **ct_in);
/* Defines the transpose rule `name` of a bilinear primitive from its two
 * operand rules. */
#define JX_DEFBILINEAR_TRANSPOSE(name, lhs, rhs)                                                   \
  JX_TRANSPOSE_RULE(name) {                                                                        \
    return jx_transpose_bilinear(ctx, lhs, rhs, in, avals, linear, ct, ct_in);                     \
  }

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
/* Batching of a primitive that treats leading dims as a batch (elementwise
 * primitives of same-shaped operands, the linear algebra on stacks of
 * matrices): every operand's batch axis to the front (broadcast if
 * unbatched), every output batched along axis 0. */
JX_BATCH_RULE(jx_batch_vectorized);
/* Batching of an elementwise primitive whose operands are either full-shaped
 * or scalars (select_n's `which`, clamp's bounds): the full-shaped ones as
 * jx_batch_vectorized; an unbatched scalar stays a scalar, a batched one is
 * broadcast over the full shape (when every operand is a scalar, all are
 * batched along axis 0). */
JX_BATCH_RULE(jx_batch_broadcasting);

#endif
