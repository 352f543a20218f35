/* The launch geometry of a hand-written CUDA kernel (kernels_softmax.h,
 * kernels_attention.h): what cuLaunchKernel takes besides the function and
 * its arguments. Nothing here needs CUDA's headers. */
#ifndef JX_SRC_CUDA_KERNELS_LAUNCH_H
#define JX_SRC_CUDA_KERNELS_LAUNCH_H

typedef struct {
  unsigned grid[3];      /* gridDim x, y, z */
  unsigned block[3];     /* blockDim x, y, z */
  unsigned shared_bytes; /* dynamic shared memory (the kernels here use static) */
} jx_cuda_launch_dims;

#endif
