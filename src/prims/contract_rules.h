/* Transformation rules of the contractions: dot_general (dot_rules.c) and
 * conv_general_dilated (conv_rules.c), plus the small shape helpers they share.
 * Both primitives are bilinear: the JVP applies the primitive to one tangent
 * and the other primal at a time, and each operand has its own transpose. */
#ifndef JX_SRC_PRIMS_CONTRACT_RULES_H
#define JX_SRC_PRIMS_CONTRACT_RULES_H

#include "prim.h"

JX_TRANSPOSE_RULE(jx_transpose_dot_general);
JX_BATCH_RULE(jx_batch_dot_general);
JX_TRANSPOSE_RULE(jx_transpose_conv_general_dilated);
JX_BATCH_RULE(jx_batch_conv_general_dilated);

/* The dtype in which a transpose rule contracts the cotangent g with the
 * other operand: the wider float of the two, as JAX's mixed-dtype
 * dot_general. The preferred type (*has_pref, pref) is kept unless it is
 * narrower than that: JAX would round the cotangent to it and convert it back
 * to the wider operand dtype; here it stays exact. Differs from JAX only when
 * the preferred type is narrower than the operands (f64 x f64 -> f32). */
jx_dtype jx_contract_cotangent_type(jx_dtype g, jx_dtype other, int64_t *has_pref, jx_dtype pref);
/* x converted to dt (strong), or x itself when it has that dtype already. */
jx_array *jx_contract_convert(jx_array *x, jx_dtype dt);
/* x with its axes permuted: result axis i is x's axis perm[i]. */
jx_array *jx_contract_permute(jx_array *x, int n, const int64_t *perm);

#endif
