/* Causal self-attention on the CPU as fused loops over tiles (flash
 * attention): the T x T scores are never stored whole. The forward walks,
 * for each (batch, head, tile of queries), the tiles of keys up to the
 * diagonal (the blocks above it are skipped, not masked), keeping a running
 * row maximum and sum (online softmax), and writes o and the logsumexp of
 * each query's scores. The backward recomputes each tile's probabilities
 * from q, k and that logsumexp, and accumulates dq, dk and dv.
 *
 * The layout is that of the attention calls (src/nn/attention_core.h):
 * q, k, v, dq, dk, dv [n, T, H, dh]; o and do [n, H, T, dh]; lse [n, H, T];
 * all f32, dense, row-major. The scores are (q . k) * scale, causal (key
 * j <= query i).
 *
 * The tile products run as AVX2 + FMA loops where the CPU has them (chosen
 * at the first call, as dot_skinny.h's), otherwise as plain C loops. Work
 * is split over jx's thread pool: the forward by (batch, head, query tile),
 * the backward by (batch, head), whose dq rows one unit owns whole, or,
 * with fewer heads than threads (and free cores), in two passes by (batch, head, key
 * tile) for dk and dv and by (batch, head, query tile) for dq, which
 * compute each tile's scores twice and give the same bits. */
#ifndef JX_SRC_PRIMS_FLASH_ATTENTION_H
#define JX_SRC_PRIMS_FLASH_ATTENTION_H

#include <stdint.h>

#include <jx/base.h>

typedef struct {
  int64_t n, t, heads, dh; /* batch, sequence length, heads, head width */
  float scale;             /* the scores' factor, 1 / sqrt(dh) as the caller rounds it */
} jx_flash_shape;

/* o [n, H, T, dh] and lse [n, H, T] from q, k, v. JX_ERR_OUT_OF_MEMORY
 * (recorded) when a tile's scratch cannot be had; o and lse are then
 * undefined. */
jx_status jx_flash_attention_fwd(const jx_flash_shape *s, const float *q, const float *k,
                                 const float *v, float *o, float *lse);

/* dq, dk, dv [n, T, H, dh] from q, k, v, the forward's o and lse, and do
 * (the gradient of o). Errors as jx_flash_attention_fwd's. */
jx_status jx_flash_attention_bwd(const jx_flash_shape *s, const float *q, const float *k,
                                 const float *v, const float *o, const float *lse,
                                 const float *dout, float *dq, float *dk, float *dv);

/* 1: the plain C loops run even where the CPU has AVX2 and FMA (for tests
 * of the loops other CPUs run); 0: chosen by the CPU again. */
void jx_flash_attention_set_portable(int on);

/* For tests: 1 runs every backward of at least two tiles in the two
 * passes, 0 in one, -1 (the default) chooses by heads and free cores. */
void jx_flash_attention_set_split(int mode);

/* Calls of jx_flash_attention_fwd (backward = 0) or _bwd (1) so far (for
 * tests). */
int64_t jx_flash_attention_runs(int backward);

#endif
