/* Helpers of src/nn for mixed precision (compute dtype vs f32 master
 * weights); the public part is jx_tree_cast in jx/nn.h. */
#ifndef JX_NN_MIXED_PRECISION_H
#define JX_NN_MIXED_PRECISION_H

#include "nn_util.h"

/* 0 (no compute dtype: compute in the inputs' own dtypes) or a float dtype. */
int nn_valid_compute_dtype(jx_dtype dt);

/* a cast to dt when a is a float array of another dtype; else a itself
 * (integers, and everything when dt is 0, pass through untouched). */
jx_array *nn_cast_float(jx_array *a, jx_dtype dt);

#endif
