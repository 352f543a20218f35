/* A fused row softmax for the CUDA backend: y = softmax(x) over the last
 * dimension of a contiguous [rows, cols] array, in one kernel (max, sum of
 * exponentials and the normalized outputs, without a trip through memory
 * between them). f32 in and out, or bf16 in and out (kept as uint16_t bits);
 * the arithmetic is f32 either way, and numerically stable (the row's max is
 * subtracted before exp). One block per row (a grid-stride loop over rows
 * when there are more than the grid holds); each block reduces with warp
 * shuffles, then across its warps through shared memory.
 *
 * The kernels are CUDA C++ source for NVRTC (src/cuda/nvrtc.h), one
 * translation unit holding both; each takes one argument, a
 * jx_cuda_softmax_args by value. A row of NaNs or of -inf gives NaNs, as
 * jax.nn.softmax does.
 *
 * The same source holds the softmax cross-entropy's row kernels
 * (jx_cuda_xent_kernel; templates on the logits' type, which cuda_fuse.c's
 * adapters also instantiate), each taking a jx_cuda_xent_args, launched
 * as the softmax (jx_cuda_softmax_geometry; the label's logit a thread a
 * row, jx_cuda_xent_pick_geometry). The label's logit: picked = the logit
 * at column label (label a float, as the program compares it with an f32
 * iota; 0 where no column matches). The forward reads a row of logits x
 * once: max = the row's max where it is finite, else 0 (a NaN in the row counts as not
 * finite), sum = the sum of exp(x - max), kept while reading with the
 * running max and rescaled when it grows (a row whose max is not finite is
 * read again and summed with max 0). The backward writes
 * grad = scale * exp(x - max) + (column == label ? at_label : 0) per
 * element, rounded once to grad's type. */
#ifndef JX_SRC_CUDA_KERNELS_SOFTMAX_H
#define JX_SRC_CUDA_KERNELS_SOFTMAX_H

#include <jx/array.h> /* jx_dtype */
#include <jx/base.h>
#include <stdint.h>

#include "kernels_launch.h"

/* The source: kernels "jx_softmax_f32" and "jx_softmax_bf16", and the
 * cross-entropy's (jx_cuda_xent_kernel). */
extern const char jx_cuda_softmax_src[];

/* The kernel's argument (the source declares the same layout): device
 * pointers to x and y, each rows x cols elements, rows contiguous. */
typedef struct {
  const void *x;
  void *y;
  int64_t rows, cols;
} jx_cuda_softmax_args;

/* The kernel's name for dtype dt (JX_F32 or JX_BF16), else NULL. */
const char *jx_cuda_softmax_kernel(jx_dtype dt);

/* The cross-entropy kernels' argument (the source declares the same
 * layout): logits x [rows, cols] (f32 or bf16 bits), label, picked, max,
 * sum, scale and at_label f32 [rows], grad as x. The forward reads x and
 * writes max and sum; the label's logit reads x and label and writes
 * picked; the backward reads x, label, max, scale and at_label and writes
 * grad. */
typedef struct {
  const void *x;
  const float *label;
  float *picked, *max, *sum;
  const float *scale, *at_label;
  void *grad;
  int64_t rows, cols;
} jx_cuda_xent_args;

typedef enum {
  JX_CUDA_XENT_FORWARD = 0,
  JX_CUDA_XENT_PICK = 1,
  JX_CUDA_XENT_BACKWARD = 2
} jx_cuda_xent_part;

/* "jx_xent_forward_f32", "jx_xent_pick_bf16", "jx_xent_backward_bf16", ...
 * for dt (JX_F32 or JX_BF16), else NULL. */
const char *jx_cuda_xent_kernel(jx_dtype dt, jx_cuda_xent_part part);
/* The label's logit's launch: 256 threads a block, a thread a row (a
 * grid-stride loop past 65535 blocks). Errors as jx_cuda_softmax_geometry. */
jx_status jx_cuda_xent_pick_geometry(int64_t rows, jx_cuda_launch_dims *out);

/* The launch: blockDim.x a multiple of 32 (at most 256, fewer for short
 * rows), one block per row up to 65535 blocks. JX_ERR_INVALID_ARGUMENT
 * (recorded) for negative sizes; rows == 0 or cols == 0 need no launch
 * (*out's grid is then 0). */
jx_status jx_cuda_softmax_geometry(int64_t rows, int64_t cols, jx_cuda_launch_dims *out);

#endif
