/* The backward pass of the flash-style attention (kernels_attention.h), as
 * FlashAttention-2 computes it, without the T x T matrices: given q, k, v,
 * the forward's o and logsumexp (lse) and the output's cotangent do,
 *   delta_i = sum_d do_i[d] o_i[d]
 *   p_ij    = exp(scale q_i . k_j - lse_i)       (0 where masked)
 *   ds_ij   = p_ij (do_i . v_j - delta_i)
 *   dq_i    = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,
 *   dv_j    = sum_i p_ij do_i.
 * Three kernels, launched in order on one stream: "delta" (a warp per
 * query row), "dq" (a block per 8 queries walking the key tiles of 32, like
 * the forward) and "dkdv" (a block per 8 keys walking the query tiles of
 * 32, from the first tile that can see them when causal); no atomics, so
 * the results do not depend on scheduling. f32 or bf16 (bits) in and out,
 * f32 arithmetic, head_dim 32, 64 or 128, any T. */
#ifndef JX_SRC_CUDA_KERNELS_ATTENTION_BWD_H
#define JX_SRC_CUDA_KERNELS_ATTENTION_BWD_H

#include <jx/array.h> /* jx_dtype */
#include <jx/base.h>
#include <stdint.h>

#include "kernels_launch.h"

/* The source: kernels "jx_attention_bwd_<delta|dq|dkdv>_<f32|bf16>_d<32|64|128>". */
extern const char jx_cuda_attention_bwd_src[];

/* The three kernels' argument (the source declares the same layout). */
typedef struct {
  const void *q, *k, *v, *o, *dout; /* [batch, heads, t, head_dim], the kernel's dtype */
  const float *lse;                 /* [batch, heads, t]: the forward's logsumexp */
  float *delta;                     /* [batch, heads, t]: workspace the first kernel fills */
  void *dq, *dk, *dv;               /* [batch, heads, t, head_dim], the kernel's dtype */
  int64_t batch, heads, t;
  float scale; /* as in the forward */
  int causal;
} jx_cuda_attention_bwd_args;

/* The same layout in the kernels' sources (this one's and
 * kernels_attention_tc.h's), declared once in a translation unit that holds
 * both. */
#define JX_CUDA_ATTENTION_BWD_ARGS_SRC                                                             \
  "#ifndef JX_CUDA_ATTENTION_BWD_ARGS\n"                                                           \
  "#define JX_CUDA_ATTENTION_BWD_ARGS\n"                                                           \
  "typedef struct {\n"                                                                             \
  "  const void *q, *k, *v, *o, *dout;\n"                                                          \
  "  const float *lse;\n"                                                                          \
  "  float *delta;\n"                                                                              \
  "  void *dq, *dk, *dv;\n"                                                                        \
  "  long long batch, heads, t;\n"                                                                 \
  "  float scale;\n"                                                                               \
  "  int causal;\n"                                                                                \
  "} jx_cuda_attention_bwd_args;\n"                                                                \
  "#endif\n"

/* The three kernels' names in launch order for dt (JX_F32, JX_BF16) and
 * head_dim (32, 64, 128); 0, or -1 when there are none. */
int jx_cuda_attention_bwd_kernels(jx_dtype dt, int64_t head_dim, char names[3][48]);

/* The three launches, in order (128 threads a block, static shared memory
 * under 48 KB). JX_ERR_INVALID_ARGUMENT (recorded) as for the forward's
 * geometry; an empty problem needs no launch (grids 0). */
jx_status jx_cuda_attention_bwd_geometry(int64_t batch, int64_t heads, int64_t t, int64_t head_dim,
                                         jx_cuda_launch_dims out[3]);

#endif
