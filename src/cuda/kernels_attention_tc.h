/* Causal (or full) multi-head attention, forward, on tensor cores: the same
 * contract as kernels_attention.h (o = softmax(scale * q k^T + mask) v for
 * q, k, v, o of shape [batch, heads, T, head_dim], contiguous; optionally the
 * logsumexp of each query's scores) for bf16 inputs and head_dim 64 or 128,
 * with the products on the tensor cores: PTX `mma.sync.aligned.m16n8k16`
 * (bf16 operands, f32 accumulators), available from sm_80.
 *
 * A block of 4 warps takes 64 query rows of one (batch, head), a warp 16 of
 * them, the A operand of its products. The block walks the key/value tiles
 * of 32 rows (only those at or before its last query when causal), each
 * loaded once into shared memory as bf16 bits. A warp computes its 16 x 32
 * scores as 4 tiles of 16 x 8 (head_dim / 16 products each), keeps an online
 * softmax per query row (running max m and sum l, the accumulators rescaled
 * by exp(m_old - m_new)), and multiplies the probabilities, rounded to bf16
 * in registers (the score tiles' accumulator layout is the next product's A
 * layout), by the value tile: head_dim / 8 output tiles of 16 x 8 in f32.
 *
 * What differs from the f32-arithmetic kernels of kernels_attention.h: the
 * probabilities are rounded to bf16 before they multiply v, so each output
 * moves by at most 2^-8 * sum_j p_j |v_j| / l <= 2^-8 max |v| (the bf16
 * unit roundoff over the reduction of T keys); the sums' f32 order differs.
 * The scores and logsumexp are the f32 kernels' up to that order. */
#ifndef JX_SRC_CUDA_KERNELS_ATTENTION_TC_H
#define JX_SRC_CUDA_KERNELS_ATTENTION_TC_H

#include <jx/array.h> /* jx_dtype */
#include <jx/base.h>
#include <stdint.h>

#include "kernels_attention.h" /* jx_cuda_attention_args */
#include "kernels_launch.h"

/* The source: kernels "jx_attention_tc_fwd_bf16_d<64|128>", which take
 * jx_cuda_attention_args by value. */
extern const char jx_cuda_attention_tc_src[];

/* The kernel's name for dtype dt and head_dim when the tensor-core kernels
 * cover them (JX_BF16; 64 or 128), else NULL (the caller keeps
 * kernels_attention.h's). */
const char *jx_cuda_attention_tc_kernel(jx_dtype dt, int64_t head_dim);

/* The launch: grid (ceil(t / 64), heads, batch), 128 threads a block,
 * static shared memory only (under 48 KB). JX_ERR_INVALID_ARGUMENT
 * (recorded) for negative sizes, a head_dim other than 64 or 128, or heads
 * or batch over 65535; an empty problem needs no launch (*out's grid is
 * then 0). */
jx_status jx_cuda_attention_tc_geometry(int64_t batch, int64_t heads, int64_t t, int64_t head_dim,
                                        jx_cuda_launch_dims *out);

#endif
