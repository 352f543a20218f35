/* The second launch of a reduction split across blocks (render_cuda.h):
 * each piece of the reduced terms left its partial results (m of them,
 * piece-major) in a scratch buffer, and this kernel combines them into the
 * reduced store, a thread per result (a grid-stride loop). Sums add the
 * pieces as the pairwise tree adds them (left + right at every node, in
 * the order prims/pairwise_split.h lists), so the bits are the unsplit
 * sum's, the C backend's; max/min combine the strips in order (the first
 * NaN, else the first extreme value by strict comparison), as the eager
 * kernel's scan keeps them. f32, f64 and bf16 results (a bf16 reduction's
 * pieces are f32, as its accumulator, rounded once here as the unsplit
 * kernel rounds its store). */
#ifndef JX_SRC_CUDA_KERNELS_COMBINE_H
#define JX_SRC_CUDA_KERNELS_COMBINE_H

#include <stdint.h>

#include "../compile/render_cuda.h"

/* The partial results' and the results' type. */
typedef enum {
  JX_CUDA_COMBINE_F32 = 0,
  JX_CUDA_COMBINE_F64 = 1,
  JX_CUDA_COMBINE_BF16 = 2 /* f32 partial results (the accumulator's), bf16 results */
} jx_cuda_combine_kind;

/* The kernel's description, passed in the bytes of jx_cuda_kargs.strides
 * (the kernel has the executor's step signature, as the gather kernel). */
typedef struct {
  const void *part; /* pieces x m partial results */
  void *out;        /* the m results */
  int64_t m;
  int32_t pieces, op;   /* op: 1 sum, 2 max, 3 min (jx_fusion_row_reduce's) */
  int32_t kind, npairs; /* kind: jx_cuda_combine_kind; npairs: the sums' additions */
  uint8_t pairs[JX_CUDA_MAX_PIECES][2]; /* pairs[i][0] += pairs[i][1], in order */
} jx_cuda_combine_args;

/* The kernel's CUDA C++ source (one function, jx_cuda_step_combine); it
 * goes after the CUDA dialect's prelude (jx_cuda_kargs, jx_f32_bf16). */
extern const char jx_cuda_combine_src[];
#define JX_CUDA_COMBINE_KERNEL "jx_cuda_step_combine"

#endif
