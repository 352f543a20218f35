/* Decode attention on the CPU (decode_attention.h).
 *
 * One unit is one (sequence, head): its query row against the filled slots
 * of its keys, CHUNK slots at a time, with the online softmax's running
 * maximum and sum (a chunk's scores are kept; the whole row never is, so
 * any cache length runs in a fixed scratch). Each slot's key and value
 * rows are read once, in order: the unit streams its share of the cache. */
#include "decode_attention.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "../base/cpu_features.h"
#include "../base/threadpool.h"
#include "fastmath.h"

enum {
  CHUNK = 256,        /* slots whose scores are held at once */
  LANES = 8,          /* floats per AVX2 vector */
  UNIT_WORK = 1 << 15 /* floats of keys and values a pool chunk reads at least */
};

/* What one chunk of a unit works on: the query row, the chunk's first key
 * and value rows (ld apart), and the unit's running state. */
typedef struct {
  const float *q, *k, *v;
  int64_t ld, n, dh; /* row stride, slots in the chunk, head width */
  float scale;
  int uniform; /* every score 0 (nothing was kept) */
  float *sc;   /* CHUNK scores, padded to whole vectors */
  float *acc;  /* dh sums of weighted values */
  float mx, sum;
} chunk;

/* The online softmax's step: the chunk's scores (in c->sc) become exp(score
 * - new max); acc and sum are rescaled to the new max. */
static void rescale(chunk *c, float cmax) {
  const float mnew = cmax > c->mx ? cmax : c->mx, alpha = jx_expf(c->mx - mnew);
  if (alpha != 1) {
    for (int64_t d = 0; d < c->dh; d++) c->acc[d] *= alpha;
    c->sum *= alpha;
  }
  c->mx = mnew;
}

/* ---- plain C loops (any CPU) ---- */

static void chunk_c(chunk *c) {
  float cmax = -INFINITY;
  for (int64_t j = 0; j < c->n; j++) {
    const float *kj = c->k + j * c->ld;
    float t = 0;
    for (int64_t d = 0; d < c->dh && !c->uniform; d++) t += c->q[d] * kj[d];
    c->sc[j] = t * c->scale;
    cmax = c->sc[j] > cmax ? c->sc[j] : cmax;
  }
  rescale(c, cmax);
  for (int64_t j = 0; j < c->n; j++) {
    const float p = jx_expf(c->sc[j] - c->mx), *vj = c->v + j * c->ld;
    c->sum += p;
    for (int64_t d = 0; d < c->dh; d++) c->acc[d] += p * vj[d];
  }
}

/* ---- AVX2 + FMA loops (head width a multiple of LANES) ---- */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "avx2_math.h"

/* scores of keys j .. j + R - 1 (R <= 4), unscaled */
AVX2_INLINE void scores_avx2(const int R, const chunk *c, int64_t j, float *out) {
  __m256 s[4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) s[r] = _mm256_setzero_ps();
  for (int64_t d = 0; d < c->dh; d += LANES) {
    const __m256 x = _mm256_loadu_ps(c->q + d);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
      s[r] = _mm256_fmadd_ps(x, _mm256_loadu_ps(c->k + (j + r) * c->ld + d), s[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) out[r] = hsum(s[r]);
}

/* acc[0, R * LANES) += sum over the chunk's slots j of p[j] v_j (R <= 4
 * vectors of the head width from offset d0) */
AVX2_INLINE void weigh_avx2(const int R, const chunk *c, int64_t d0) {
  __m256 a[4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) a[r] = _mm256_loadu_ps(c->acc + d0 + r * LANES);
  for (int64_t j = 0; j < c->n; j++) {
    const __m256 p = _mm256_broadcast_ss(c->sc + j);
    const float *vj = c->v + j * c->ld + d0;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) a[r] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vj + r * LANES), a[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) _mm256_storeu_ps(c->acc + d0 + r * LANES, a[r]);
}

__attribute__((target("avx2,fma"))) static void chunk_avx2(chunk *c) {
  const int64_t n = c->n, np = (n + LANES - 1) / LANES * LANES;
  int64_t j = 0;
  if (c->uniform) {
    memset(c->sc, 0, sizeof *c->sc * (size_t)n);
    j = n;
  }
  for (; j + 4 <= n; j += 4) scores_avx2(4, c, j, c->sc + j);
  for (; j < n; j++) scores_avx2(1, c, j, c->sc + j);
  for (j = n; j < np; j++) c->sc[j] = -INFINITY; /* exp gives 0 */
  const __m256 scale = _mm256_set1_ps(c->uniform ? 1.0f : c->scale);
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  for (j = 0; j < np; j += LANES) {
    const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(c->sc + j), scale);
    _mm256_storeu_ps(c->sc + j, x);
    vmax = _mm256_max_ps(vmax, x);
  }
  rescale(c, hmax(vmax));
  const __m256 m = _mm256_set1_ps(c->mx);
  __m256 sum = _mm256_setzero_ps();
  for (j = 0; j < np; j += LANES) {
    const __m256 p = exp256(_mm256_sub_ps(_mm256_loadu_ps(c->sc + j), m));
    _mm256_storeu_ps(c->sc + j, p);
    sum = _mm256_add_ps(sum, p);
  }
  c->sum += hsum(sum);
  int64_t d = 0;
  for (; d + 4 * LANES <= c->dh; d += 4 * LANES) weigh_avx2(4, c, d);
  for (; d < c->dh; d += LANES) weigh_avx2(1, c, d);
}
#else
#define chunk_avx2 chunk_c
#endif

/* ---- the units ---- */

static atomic_int portable; /* jx_decode_attention_set_portable */
static atomic_llong runs;

void jx_decode_attention_set_portable(int on) { atomic_store(&portable, on != 0); }

int64_t jx_decode_attention_runs(void) { return (int64_t)atomic_load(&runs); }

typedef struct {
  jx_decode_shape s;
  int avx;
  const float *q, *k, *v;
  const int32_t *lo, *hi;
  float *o;
} job;

static int64_t clamp(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

/* Units [begin, end): unit u is head u % H of sequence u / H. */
static void units(void *ctx, int64_t begin, int64_t end) {
  const job *jb = ctx;
  const jx_decode_shape *s = &jb->s;
  const int64_t dh = s->dh, ld = s->heads * dh;
  float sc[CHUNK];
  for (int64_t u = begin; u < end; u++) {
    const int64_t b = u / s->heads, h = u % s->heads, base = (b * s->slots * s->heads + h) * dh;
    int64_t lo = clamp(jb->lo[b], 0, s->slots), hi = clamp(jb->hi[b], 0, s->slots);
    chunk c = {.q = jb->q + u * dh,
               .ld = ld,
               .dh = dh,
               .scale = s->scale,
               .uniform = lo >= hi,
               .sc = sc,
               .acc = jb->o + u * dh,
               .mx = -INFINITY,
               .sum = 0};
    if (c.uniform) {
      lo = 0;
      hi = s->slots;
    }
    memset(c.acc, 0, sizeof *c.acc * (size_t)dh);
    for (int64_t j0 = lo; j0 < hi; j0 += CHUNK) {
      c.k = jb->k + base + j0 * ld;
      c.v = jb->v + base + j0 * ld;
      c.n = hi - j0 < CHUNK ? hi - j0 : CHUNK;
      (jb->avx ? chunk_avx2 : chunk_c)(&c);
    }
    const float inv = 1 / c.sum;
    for (int64_t d = 0; d < dh; d++) c.acc[d] *= inv;
  }
}

void jx_decode_attention(const jx_decode_shape *s, const float *q, const float *k, const float *v,
                         const int32_t *lo, const int32_t *hi, float *o) {
  job jb = {.s = *s,
            .avx = !atomic_load(&portable) && jx_cpu_has_avx2_fma() && s->dh % LANES == 0,
            .q = q,
            .k = k,
            .v = v,
            .lo = lo,
            .hi = hi,
            .o = o};
  atomic_fetch_add(&runs, 1);
  const int64_t n = s->n * s->heads;
  if (n < 1 || s->dh < 1 || s->slots < 1) return;
  /* a pool chunk reads at least UNIT_WORK floats, judged by the mean
   * filled length (the pool's own cost dwarfs a short head's) */
  int64_t filled = 0;
  for (int64_t b = 0; b < s->n; b++)
    filled += clamp(hi[b], 0, s->slots) - clamp(lo[b], 0, s->slots);
  const int64_t per_unit = 2 * s->dh * (filled > s->n ? filled / s->n : 1);
  jx_parallel_for(n, per_unit >= UNIT_WORK ? 1 : UNIT_WORK / per_unit, units, &jb);
}
