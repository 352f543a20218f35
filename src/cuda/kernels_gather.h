/* XLA's gather (src/prims/gather.c), dynamic_slice and dynamic_update_slice
 * (src/prims/slicing.c) as one device kernel: the executor runs such an
 * equation (an embedding lookup, jx_take, a slice at a traced position) on
 * the device instead of copying its operands down, evaluating it on
 * the host and copying the result up. A thread per output element (a
 * grid-stride loop) reads its window's start from the index vector, clamps
 * it as JAX's modes say (clip: into [0, dim - slice size]; fill: a window
 * whose start is out of range is filled with NaN, the signed minimum, the
 * unsigned maximum or true) and copies one element: the host's bits. A
 * dynamic slice's starts (scalars on the device, ka.buf[d]) are clamped
 * into [0, dim - size] as lax clamps them; dynamic_update_slice copies
 * the update inside the window and the operand elsewhere. A slice or a
 * reshape that the executor would otherwise run on the host (no kernel
 * reads through it) is the same copy with fixed positions. An f32
 * scatter_add whose indexed dims are inserted window dims (an embedding's
 * gradient) is a copy of the operand, then a thread per update-window
 * element adding that element of every window in the updates' order (the
 * host's order and rounding); one of whole rows sorts the updates by row
 * first, so that every updated row's elements have a thread (below). */
#ifndef JX_SRC_CUDA_KERNELS_GATHER_H
#define JX_SRC_CUDA_KERNELS_GATHER_H

#include <stdint.h>

#include "../ir/program.h"

/* The kernel's description (the layout the source declares), passed in the
 * bytes of jx_cuda_kargs.strides: the kernel has the executor's step
 * signature, as every function of its module. */
typedef struct {
  const void *operand, *indices; /* indices: dynamic_update_slice's update */
  void *out;
  int64_t n;                        /* output elements */
  int64_t out_dims[JX_MAX_RANK];    /* the output's shape */
  int64_t op_dims[JX_MAX_RANK];     /* the operand's shape */
  int64_t op_strides[JX_MAX_RANK];  /* the operand's strides (elements) */
  int64_t idx_dims[JX_MAX_RANK];    /* the indices' shape */
  int64_t slice_sizes[JX_MAX_RANK]; /* per operand dim */
  int32_t win_of[JX_MAX_RANK];      /* operand dim -> output dim, or -1: collapsed */
  int32_t is_offset[JX_MAX_RANK];   /* per output dim: 1 a window offset, 0 a batch dim */
  int32_t start_map[JX_MAX_RANK];   /* index vector component k -> operand dim */
  int32_t out_rank, op_rank, idx_rank, nstart;
  int32_t index_vector_dim, index_bytes, index_unsigned, elem_bytes;
  int32_t fill, kind; /* 0 gather, 1 dynamic_slice, 2 dynamic_update_slice, 3 slice,
                       * 4 reshape, 5 scatter_add (fill: its clip mode), 6 scatter_add of
                       * whole rows (below) */
  uint64_t fill_bits; /* the fill element's bits (elem_bytes of them) */
  /* kind 6: phase (JX_CUDA_SCATTER_ROWS_*), the updates' count and row size,
   * the operand's rows, and four int32 scratch arrays of the executor's */
  int32_t phase, unused_;
  int64_t updates, row_elems, table_rows;
  int32_t *rows, *ranks, *starts, *perm;
} jx_cuda_gather_args;

/* A scatter_add of whole rows (an embedding's gradient: updates [..., D]
 * into a table [V, D] at one index per update, the 8192 tokens of a step)
 * sorts the updates by row, stably, and then adds each row's updates in
 * their order, a thread per (row, element): the order and rounding of the
 * host's loop, with a thread per element of every updated row instead of
 * one per element of a row walking every update. The phases, one launch
 * each after the operand's copy and the counts zeroed: */
enum {
  JX_CUDA_SCATTER_ROWS_COUNT = 0, /* rows[i]: update i's row (-1: dropped); starts[r] += 1 */
  JX_CUDA_SCATTER_ROWS_RANK = 1,  /* ranks[i]: the earlier updates of the same row */
  JX_CUDA_SCATTER_ROWS_SCAN = 2,  /* starts: the counts' exclusive sums (one block) */
  JX_CUDA_SCATTER_ROWS_PLACE = 3, /* perm[starts[rows[i]] + ranks[i]] = i */
  JX_CUDA_SCATTER_ROWS_ADD = 4,   /* each row's updates added in order */
  JX_CUDA_SCATTER_ROWS_MAX_UPDATES = 1 << 17 /* the rank phase compares pairs: n^2 / 2 */
};

/* The kernel's CUDA C++ source (one function, jx_cuda_step_gather); it goes
 * after the CUDA dialect's prelude (jx_cuda_kargs, and its bf16 conversions). */
extern const char jx_cuda_gather_src[];
#define JX_CUDA_GATHER_KERNEL "jx_cuda_step_gather"

/* Fills a's shapes and dimension numbers for equation e of p (the buffers
 * stay NULL); 0 when the kernel runs it, -1 when it cannot (an element over
 * 8 bytes or complex, or another primitive), with nothing recorded. */
int jx_cuda_gather_plan(const jx_program *p, const jx_eqn *e, jx_cuda_gather_args *a);

#endif
