/* Causal (or full) multi-head attention, forward, in the style of
 * FlashAttention, for the CUDA backend: o = softmax(scale * q k^T + mask) v
 * for q, k, v, o of shape [batch, heads, T, head_dim] (contiguous), without
 * materializing the T x T scores. A block takes 16 query rows of one (batch,
 * head); it walks the key/value tiles of 32 rows (only those at or before
 * its last query when causal), each loaded once into shared memory, and
 * keeps an online softmax per query: a running max m and sum l of
 * exp(score - m), the output accumulated in f32 and rescaled by exp(m_old -
 * m_new) whenever the max grows; o = acc / l at the end. Each of the 4 warps
 * owns 4 query rows: a lane scores one key of the tile (its dot product with
 * the query), the warp finds the tile's max and sum with shuffles, and each
 * lane accumulates head_dim / 32 of the output's columns.
 *
 * f32 or bf16 inputs and outputs (bf16 as uint16_t bits, rounded to nearest
 * even as the CPU rounds), f32 arithmetic; head_dim 32, 64 or 128; any T
 * (the last tiles are partial). Optionally the logsumexp of each query's
 * scaled, masked scores, which the backward pass (kernels_attention_bwd.h)
 * needs. Simple CUDA C++ without tensor cores: correctness first, speed not
 * measured yet. */
#ifndef JX_SRC_CUDA_KERNELS_ATTENTION_H
#define JX_SRC_CUDA_KERNELS_ATTENTION_H

#include <jx/array.h> /* jx_dtype */
#include <jx/base.h>
#include <stdint.h>

#include "kernels_launch.h"

/* The source: kernels "jx_attention_fwd_<f32|bf16>_d<32|64|128>". */
extern const char jx_cuda_attention_src[];

/* The kernel's argument (the source declares the same layout), by value. */
typedef struct {
  const void *q, *k, *v; /* [batch, heads, t, head_dim], the kernel's dtype */
  void *o;               /* [batch, heads, t, head_dim], the same dtype */
  float *lse;            /* [batch, heads, t] f32, or NULL: m + log(l) per query */
  int64_t batch, heads, t;
  float scale; /* applied to q . k before the mask and softmax (1/sqrt(head_dim) usually) */
  int causal;  /* 1: query i sees keys j <= i */
} jx_cuda_attention_args;

/* The same layout in the kernels' sources (this one's and
 * kernels_attention_tc.h's), declared once in a translation unit that holds
 * both. */
#define JX_CUDA_ATTENTION_ARGS_SRC                                                                 \
  "#ifndef JX_CUDA_ATTENTION_ARGS\n"                                                               \
  "#define JX_CUDA_ATTENTION_ARGS\n"                                                               \
  "typedef struct {\n"                                                                             \
  "  const void *q, *k, *v;\n"                                                                     \
  "  void *o;\n"                                                                                   \
  "  float *lse;\n"                                                                                \
  "  long long batch, heads, t;\n"                                                                 \
  "  float scale;\n"                                                                               \
  "  int causal;\n"                                                                                \
  "} jx_cuda_attention_args;\n"                                                                    \
  "#endif\n"

/* The kernel's name for dtype dt (JX_F32, JX_BF16) and head_dim (32, 64,
 * 128), else NULL. */
const char *jx_cuda_attention_kernel(jx_dtype dt, int64_t head_dim);

/* The launch: grid (ceil(t / 16), heads, batch), 128 threads a block, static
 * shared memory only (under 48 KB). JX_ERR_INVALID_ARGUMENT (recorded) for
 * negative sizes, an unsupported head_dim, or heads or batch over 65535;
 * an empty problem needs no launch (*out's grid is then 0). */
jx_status jx_cuda_attention_geometry(int64_t batch, int64_t heads, int64_t t, int64_t head_dim,
                                     jx_cuda_launch_dims *out);

/* The launch the forward kernels share (this one's and
 * kernels_attention_tc.h's): ceil(t / rows) blocks of 128 threads for each
 * (batch, head); the errors above, `who` naming the caller and head_dims
 * saying which head_dim the kernel takes when head_dim_ok is 0. */
jx_status jx_cuda_attention_grid(const char *who, int head_dim_ok, const char *head_dims,
                                 int64_t rows, int64_t batch, int64_t heads, int64_t t,
                                 int64_t head_dim, jx_cuda_launch_dims *out);
#endif
