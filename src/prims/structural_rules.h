/* Transformation rules of the shape (shape.c), slicing (slicing.c) and
 * gather/scatter (gather.c) primitives, written in shape_rules.c,
 * slicing_rules.c and gather_rules.c after JAX's lax rules. */
#ifndef JX_SRC_PRIMS_STRUCTURAL_RULES_H
#define JX_SRC_PRIMS_STRUCTURAL_RULES_H

#include "prim.h"

/* shape.c */
JX_TRANSPOSE_RULE(jx_transpose_broadcast_in_dim);
JX_TRANSPOSE_RULE(jx_transpose_reshape);
JX_TRANSPOSE_RULE(jx_transpose_squeeze);
JX_TRANSPOSE_RULE(jx_transpose_expand_dims);
JX_TRANSPOSE_RULE(jx_transpose_transpose);
JX_TRANSPOSE_RULE(jx_transpose_rev);
JX_BATCH_RULE(jx_batch_broadcast_in_dim);
JX_BATCH_RULE(jx_batch_reshape);
JX_BATCH_RULE(jx_batch_squeeze);
JX_BATCH_RULE(jx_batch_expand_dims);
JX_BATCH_RULE(jx_batch_transpose);
JX_BATCH_RULE(jx_batch_rev);

/* slicing.c */
JX_JVP_RULE(jx_jvp_pad);
JX_JVP_RULE(jx_jvp_concatenate);
JX_JVP_RULE(jx_jvp_dynamic_update_slice);
JX_TRANSPOSE_RULE(jx_transpose_pad);
JX_TRANSPOSE_RULE(jx_transpose_concatenate);
JX_TRANSPOSE_RULE(jx_transpose_slice);
JX_TRANSPOSE_RULE(jx_transpose_dynamic_slice);
JX_TRANSPOSE_RULE(jx_transpose_dynamic_update_slice);
JX_BATCH_RULE(jx_batch_pad);
JX_BATCH_RULE(jx_batch_concatenate);
JX_BATCH_RULE(jx_batch_slice);
JX_BATCH_RULE(jx_batch_dynamic_slice);
JX_BATCH_RULE(jx_batch_dynamic_update_slice);

/* gather.c */
JX_JVP_RULE(jx_jvp_gather);
JX_JVP_RULE(jx_jvp_scatter);
JX_JVP_RULE(jx_jvp_scatter_add);
JX_JVP_RULE(jx_jvp_scatter_mul);
JX_JVP_RULE(jx_jvp_scatter_extremum);
JX_TRANSPOSE_RULE(jx_transpose_gather);
JX_TRANSPOSE_RULE(jx_transpose_scatter_add);
JX_TRANSPOSE_RULE(jx_transpose_scatter_mul);
JX_BATCH_RULE(jx_batch_gather);
JX_BATCH_RULE(jx_batch_scatter);

/* An integer index dtype that holds dt's values and the counts 0..n-1 of a
 * batch of size n: dt itself when it can, else i64. */
jx_dtype jx_sr_index_dtype(jx_dtype dt, int64_t n);
/* x converted to dtype dt (x itself when it already has it). */
jx_array *jx_sr_convert(jx_array *x, jx_dtype dt);
/* A strong array of dtype dt and the given shape filled with v. */
jx_array *jx_sr_full(jx_dtype dt, jx_shape shape, double v);
/* An iota of dtype dt and the given shape counting along dim. */
jx_array *jx_sr_iota(jx_dtype dt, jx_shape shape, int dim);

#endif
