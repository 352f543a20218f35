/* Batching interpreter, shared by jx_vmap and the batching rules of control
 * flow (which batch their nested programs). */
#ifndef JX_SRC_TRANSFORM_VMAP_H
#define JX_SRC_TRANSFORM_VMAP_H

#include "../ir/program.h"

/* Evaluates p on x, where x[i] is batched along bdim[i] (or JX_NOT_MAPPED),
 * through the batching rules; y[o] is batched along ybdim[o]. */
jx_status jx_vmap_eval(const jx_program *p, jx_array *const *x, const int *bdim, int64_t axis_size,
                       jx_array **y, int *ybdim);

#endif
