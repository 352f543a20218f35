/* The CUDA C dialect of the kernel renderer (see render.h): the same
 * fused-kernel bodies as the C dialect, as `extern "C" __global__`
 * functions compiled by NVRTC (cuda/nvrtc.h), with no header at all: the prelude
 * brings its own integer typedefs and the device functions fastmath.h needs.
 *
 * A kernel's signature:
 *   extern "C" __global__ void NAME(const jx_cuda_kargs a, int64_t row_begin,
 *                                   int64_t row_end)
 * The arguments travel by value (3 KB, under CUDA's 4 KB limit for kernel
 * parameters), so a launch uploads nothing and the kernel reads dims and
 * strides from the constant bank at indices fixed when it was rendered.
 * Rows [row_begin, row_end) are spread over blockIdx.y (a grid-stride loop
 * over rows), the columns of a row over blockIdx.x * blockDim.x +
 * threadIdx.x (a grid-stride loop too), so a rank-1 array (one row) fills
 * the whole device and any grid computes every element exactly once. A
 * launch might use blockDim = (256, 1, 1), gridDim.x = min(ceil(inner /
 * 256), ~4 x SMs), gridDim.y = min(rows, 65535). A kernel that ends in a
 * row reduction (jx_fusion_group.reduces, lead 0) shares each row among the
 * threads of block x 0 (the others idle): launch it with gridDim.x = 1,
 * blockDim.x = 256 and rows over gridDim.y. One that ends in a column
 * reduction (lead > 0) works on tiles of 32 output columns, each shared by
 * blockDim.x / 32 row groups (partial results in shared memory, combined in
 * the eager kernel's order), the tiles over blockIdx.x (a grid-stride
 * loop): launch it with blockDim.x = 256 and gridDim.x up to ceil(inner /
 * 32); its rows are
 * jx_fusion_kernel_rows(g), the kept dims before the last. Either kind
 * may split its reduced terms across blocks: gridDim.z = pieces blocks
 * share each row or tile, block z reducing the terms [piece[z],
 * piece[z + 1]) (a subtree of the pairwise tree, or a strip for max/min)
 * into the reduced store at z * part; a second launch combines them. */
#ifndef JX_SRC_COMPILE_RENDER_CUDA_H
#define JX_SRC_COMPILE_RENDER_CUDA_H

#include "render.h"

#define JX_CUDA_MAX_PIECES 64 /* prims/pairwise_split.h's JX_PAIRWISE_MAX_PIECES */

/* The kernel's first argument, laid out as the prelude declares it (the
 * same on the host: 8-byte pointers and int64_t on every CUDA platform).
 * buf: device pointers to the loads, then the stores; dims: the group's
 * shape, innermost last; strides[k * 8 + d]: load k's stride (elements)
 * along d. */
typedef struct {
  char *buf[JX_FUSION_MAX_LOADS + JX_FUSION_MAX_STORES];
  int64_t dims[JX_MAX_RANK];
  int64_t strides[JX_FUSION_MAX_LOADS * JX_MAX_RANK];
  int64_t pieces; /* a reduction split across blocks: pieces over gridDim.z (0: unsplit) */
  int64_t part;   /* elements between the pieces' partial results in the reduced store */
  int64_t piece[JX_CUDA_MAX_PIECES + 1]; /* piece z's terms: [piece[z], piece[z + 1]) */
} jx_cuda_kargs;

/* malloc'ed source of the kernel `name` in the CUDA dialect, or NULL with an
 * error recorded; it needs jx_render_cuda_prelude() before it in its
 * translation unit (one per program, as on the CPU). */
char *jx_render_cuda(const jx_program *p, const jx_fusion_group *g, const char *name);
/* malloc'ed prelude: typedefs, jx_cuda_kargs, the shared helpers and
 * fastmath.h as __device__ functions. */
char *jx_render_cuda_prelude(void);

#endif
