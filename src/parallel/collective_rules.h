/* Shared between the collective rows (collective.c), their rules
 * (collective_rules.c) and the public functions (collective_ops.c). */
#ifndef JX_SRC_PARALLEL_COLLECTIVE_RULES_H
#define JX_SRC_PARALLEL_COLLECTIVE_RULES_H

#include "collective.h"

/* "jx_psum" for "psum": errors name the public function. */
const char *jx_collective_public_name(const char *prim);
/* The group size: given when > 0, else the product of the sizes of the axes
 * in p->l[0] (bound by a transformation being traced, else the mesh's on a
 * device thread); an error naming op if an axis is unknown. */
jx_status jx_collective_group_size(const jx_params *p, const char *op, int64_t given, int64_t *n);
/* ppermute's pairs (src, dst flattened), checked against the group size n. */
jx_status jx_ppermute_pairs(const jx_params *p, int64_t n, const char *op, const int64_t **pairs,
                            int *npairs);

jx_status jx_jvp_collective_linear(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                                   jx_array **y, jx_array **ty);
jx_status jx_jvp_pmax_pmin(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                           jx_array **y, jx_array **ty);
jx_status jx_transpose_collective(const jx_rule_ctx *ctx, jx_array *const *in,
                                  const jx_aval *in_avals, const uint8_t *linear,
                                  jx_array *const *ct, jx_array **ct_in);
jx_status jx_batch_collective(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                              int64_t n, jx_array **out, int *out_bdim);

#endif
