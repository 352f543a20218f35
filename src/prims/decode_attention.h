/* One query per sequence attending over a key/value cache (the decode step
 * of a GPT): for each (sequence b, head h), the scores of q against the
 * cache's keys in slots lo[b] <= j < hi[b] only (the filled ones), their
 * softmax, and the probabilities' sum of the values in those slots. The
 * slots past hi[b] are never read, so the work follows the sequence's
 * length, not the cache's.
 *
 * Layout (src/nn/attention_core.h's decode call): q and o [n, H, dh]; k
 * and v [n, S, H, dh] (the cache as the projections fill it); lo and hi
 * [n] i32; all f32 but lo and hi, dense, row-major. The scores are (q . k)
 * * scale. lo and hi are clamped to [0, S]; a sequence whose range is then
 * empty weighs every slot equally, as the masked softmax does when all its
 * scores are masked (every score the lowest f32).
 *
 * The dot products and the value sums run as AVX2 + FMA loops where the
 * CPU has them (base/cpu_features.h), otherwise as plain C loops; the
 * softmax's exp is fastmath.h's jx_expf, the one jitted softmaxes use.
 * Work is split over jx's thread pool by (sequence, head). */
#ifndef JX_SRC_PRIMS_DECODE_ATTENTION_H
#define JX_SRC_PRIMS_DECODE_ATTENTION_H

#include <stdint.h>

#include <jx/base.h>

typedef struct {
  int64_t n, slots, heads, dh; /* sequences, cache slots, heads, head width */
  float scale;                 /* the scores' factor, 1 / sqrt(dh) as the caller rounds it */
} jx_decode_shape;

/* o from q, the cache k and v, and each sequence's slots [lo, hi). */
void jx_decode_attention(const jx_decode_shape *s, const float *q, const float *k, const float *v,
                         const int32_t *lo, const int32_t *hi, float *o);

/* 1: the plain C loops run even where the CPU has AVX2 and FMA (for tests
 * of the loops other CPUs run); 0: chosen by the CPU again. */
void jx_decode_attention_set_portable(int on);

/* Calls of jx_decode_attention so far (for tests). */
int64_t jx_decode_attention_runs(void);

#endif
