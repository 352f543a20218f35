/* Strided copies: the kernel behind every primitive that only moves
 * elements by an affine map (broadcast_in_dim, transpose, rev).
 *
 * out (contiguous, row-major, shape `shape`) receives
 *   out[i_0, .., i_{r-1}] = src[sum_d i_d * strides[d]]
 * with strides in elements, any sign, 0 for a broadcast dimension. The copy
 * merges dimensions that are contiguous in both, moves whole runs with
 * memcpy when the innermost source stride is 1, fills when it is 0, walks a
 * transpose in square tiles so that both sides stay in cache, and splits
 * large copies over the thread pool. */
#ifndef JX_SRC_PRIMS_STRIDED_COPY_H
#define JX_SRC_PRIMS_STRIDED_COPY_H

#include <stddef.h>
#include <stdint.h>

#include <jx/array.h>

void jx_strided_copy(void *out, jx_shape shape, const void *src, const int64_t *strides,
                     size_t elem_size);

#endif
