/* Causal (or full) multi-head attention on tensor cores, forward and
 * backward: the contracts of kernels_attention.h (o = softmax(scale q k^T +
 * mask) v for q, k, v, o of shape [batch, heads, T, head_dim], contiguous;
 * optionally the logsumexp of each query's scores) and kernels_attention_bwd.h
 * (dq, dk, dv from do, o and the logsumexp) for bf16 or f16 inputs and
 * head_dim 64 or 128, with the products on the tensor cores: PTX
 * `mma.sync.aligned.m16n8k16` (bf16 or f16 operands, f32 accumulators),
 * available from sm_80. Inputs and outputs are 16-bit patterns; outputs are
 * rounded to nearest even as the CPU rounds them. q, k, v and do are read
 * by 16-byte copies: their buffers must be 16-byte aligned (the
 * allocator's are).
 *
 * Forward (FlashAttention-2's tiling): a block of 4 warps takes 64 query
 * rows of one (batch, head), a warp 16 of them, held in registers as the A
 * operand of its products. The block walks the key/value tiles of 64 rows
 * (only those at or before its last query when causal; a warp skips the
 * tiles past its rows, and masks only the tiles that reach past a row or
 * past T). Tiles go to shared memory by `cp.async` (16 bytes a copy, rows
 * padded by 16 bytes so that ldmatrix's and the copies' 8 rows hit
 * different banks) and K and V alternate: V's tile is in flight while the
 * warps compute the scores on K's, the next K's during the softmax and the
 * product by V's (two tiles of shared memory, 18 KB at head_dim 64, 34 KB
 * at 128). The operands reach the registers by `ldmatrix.x4` (`.trans` for
 * V), two 16 x 8 product tiles a load. A warp keeps an online softmax per query row
 * in log2 units (scores times scale log2(e), one factor; exp2f; running max
 * m and sum l; the accumulators rescaled by exp2(m_old - m_new)) and
 * multiplies the probabilities, rounded to the input's 16-bit type in
 * registers (a score tile's accumulator layout is the next product's A
 * layout), by the value tile: head_dim / 8 output tiles of 16 x 8 in f32.
 *
 * Backward (FlashAttention-2's equations, as kernels_attention_bwd.h):
 * "delta" (do . o, a warp per row), "dq" (a block per 64 queries, q and do
 * in registers, walking the key tiles of 64: dp = do v^T on tensor cores
 * while K's tile loads, then s = q k^T, ds = p (dp - delta) in f32 with p
 * recomputed from the logsumexp, dq += ds k while the next V's tile loads)
 * and "dkdv" (a block per 64 keys, k and v in registers, walking the query
 * tiles of 64 from the first that sees them when causal: the transposed
 * products dp^T = v do^T, s^T = k q^T, dv += p^T do, dk += ds^T q, do's and
 * q's tiles alternating as V's and K's do forward). At head_dim 128, so
 * that the live values fit 255 registers, dq keeps the tile's dp but takes
 * s, ds and dq += ds k 32 keys at a time, and dkdv takes its query tile 16
 * queries at a time once both tiles are in (no overlap inside the block). dq is its own pass (s and
 * dp computed twice) rather than f32 atomics from dkdv: no atomics, so the bits do not depend on
 * scheduling.
 *
 * What differs from the f32-arithmetic kernels: p (and, backward, ds) are
 * rounded to 16 bits (unit roundoff u = 2^-8 for bf16, 2^-11 for f16)
 * before they multiply v (do, q, k), so an output moves by at most u times
 * the sum of its products' magnitudes (sum_j p_j |v_j| / l <= u max |v|
 * forward); the f32 sums' order differs. The scores and logsumexp are the
 * f32 kernels' up to that order and exp2's (exp2f of the score times one
 * f32 factor scale log2(e), where the f32 kernels take expf of the score
 * times scale: a few 2^-24 of the exponent, relative, apart). */
#ifndef JX_SRC_CUDA_KERNELS_ATTENTION_TC_H
#define JX_SRC_CUDA_KERNELS_ATTENTION_TC_H

#include <jx/array.h> /* jx_dtype */
#include <jx/base.h>
#include <stdint.h>

#include "kernels_attention.h"     /* jx_cuda_attention_args */
#include "kernels_attention_bwd.h" /* jx_cuda_attention_bwd_args */
#include "kernels_launch.h"

/* The source: kernels "jx_attention_tc_fwd_<bf16|f16>_d<64|128>", which
 * take jx_cuda_attention_args by value, and
 * "jx_attention_tc_bwd_<delta|dq|dkdv>_<bf16|f16>_d<64|128>", which take
 * jx_cuda_attention_bwd_args. */
extern const char jx_cuda_attention_tc_src[];

/* The forward kernel's name for dtype dt and head_dim when the tensor-core
 * kernels cover them (JX_BF16 or JX_F16; 64 or 128), else NULL (the caller
 * keeps kernels_attention.h's). */
const char *jx_cuda_attention_tc_kernel(jx_dtype dt, int64_t head_dim);

/* The three backward kernels' names in launch order, as
 * jx_cuda_attention_bwd_kernels; 0, or -1 when dt and head_dim are not
 * covered. */
int jx_cuda_attention_tc_bwd_kernels(jx_dtype dt, int64_t head_dim, char names[3][48]);

/* The forward's launch: grid (ceil(t / 64), heads, batch), 128 threads a
 * block, static shared memory only (under 48 KB: no opt-in attribute). JX_ERR_INVALID_ARGUMENT
 * (recorded) for negative sizes, a head_dim other than 64 or 128, or heads
 * or batch over 65535; an empty problem needs no launch (*out's grid is
 * then 0). */
jx_status jx_cuda_attention_tc_geometry(int64_t batch, int64_t heads, int64_t t, int64_t head_dim,
                                        jx_cuda_launch_dims *out);

/* The backward's three launches in order (delta: ceil(t / 16) blocks a
 * (batch, head); dq, dkdv: ceil(t / 64)), 128 threads a block, static
 * shared memory under 48 KB; the errors of the forward's geometry. */
jx_status jx_cuda_attention_tc_bwd_geometry(int64_t batch, int64_t heads, int64_t t,
                                            int64_t head_dim, jx_cuda_launch_dims out[3]);

#endif
