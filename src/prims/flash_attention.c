/* Flash attention on the CPU (flash_attention.h).
 *
 * Every tile product is one shape, C (+)= A B with B and C row-major and A
 * read through two strides (so A may be a tile stored transposed: P^T and
 * dS^T in the backward need no copy); k^T and v^T, the right operands of
 * the scores and of dP = do v^T, are packed once per key tile into panels
 * whose width is rounded up to whole vectors (the padding columns are
 * masked like the causal ones). The score tile of 64 x 64 floats (16 KiB)
 * and its panels stay in L1 and L2 while a tile is worked on. */
#include "flash_attention.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../base/cpu_features.h"
#include "../base/error.h"
#include "../base/spin.h"
#include "../base/threadpool.h"

enum {
  TILE = 64, /* queries and keys per tile */
  LANES = 8  /* floats per AVX2 vector: panels are padded to a multiple */
};

/* ---- plain C loops (any CPU) ---- */

/* Rows [0, m) of C (+)= A B: A(i, kk) = a[i * ars + kk * acs], B(kk, j) =
 * b[kk * ldb + j], C(i, j) = c[i * ldc + j]; add = 0 overwrites C. */
static void gemm_c(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, int64_t acs,
                   const float *b, int64_t ldb, float *c, int64_t ldc, int add) {
  for (int64_t i = 0; i < m; i++) {
    float *ci = c + i * ldc;
    if (!add) memset(ci, 0, sizeof *ci * (size_t)n);
    for (int64_t kk = 0; kk < k; kk++) {
      const float x = a[i * ars + kk * acs], *bk = b + kk * ldb;
      for (int64_t j = 0; j < n; j++) ci[j] += x * bk[j];
    }
  }
}

/* The forward's softmax step for one row of raw scores s[0, np) of which
 * the first lim are kept (the rest are above the diagonal, or padding):
 * s becomes exp(scale * s - new max), 0 where not kept; the running max *m
 * and sum *l are updated. Returns the factor the row's output accumulated
 * so far is to be multiplied by, exp(old max - new max). */
static float online_row_c(float *s, int64_t np, int64_t lim, float scale, float *m, float *l) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < lim; j++) {
    s[j] *= scale;
    mx = s[j] > mx ? s[j] : mx;
  }
  const float mnew = mx > *m ? mx : *m, alpha = expf(*m - mnew);
  float sum = 0;
  for (int64_t j = 0; j < np; j++) {
    s[j] = j < lim ? expf(s[j] - mnew) : 0;
    sum += s[j];
  }
  *l = *l * alpha + sum;
  *m = mnew;
  return alpha;
}

/* The backward's probabilities for one row: s[j] = exp(scale * s[j] - lse)
 * for j < lim, 0 for the rest of [0, np). */
static void probs_row_c(float *s, int64_t np, int64_t lim, float scale, float lse) {
  for (int64_t j = 0; j < np; j++) s[j] = j < lim ? expf(scale * s[j] - lse) : 0;
}

/* dp[j] = p[j] * (dp[j] - delta) * scale: the scores' gradient, scaled for q and k. */
static void dscores_row_c(const float *p, float *dp, int64_t np, float delta, float scale) {
  for (int64_t j = 0; j < np; j++) dp[j] = p[j] * (dp[j] - delta) * scale;
}

/* dst[d] = src[d] * a for d in [0, n): an output row rescaled by the
 * softmax's correction, or normalized by its sum at the end. */
static void scale_row_c(float *dst, const float *src, int64_t n, float a) {
  for (int64_t d = 0; d < n; d++) dst[d] = src[d] * a;
}

/* rows x n floats into dst (rows ldd apart) from src (lds apart), or zeros
 * where src is NULL: a tile's dk and dv written out, dq's rows cleared. */
static void copy_rows_c(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                        int64_t n) {
  for (int64_t i = 0; i < rows; i++)
    if (src)
      memcpy(dst + i * ldd, src + i * lds, sizeof *dst * (size_t)n);
    else
      memset(dst + i * ldd, 0, sizeof *dst * (size_t)n);
}

/* dst[d * np + j] = src[j * ld + d] for the nk rows of src (dh wide), 0 for
 * the padding columns j in [nk, np): a key tile's k^T or v^T. */
static void pack_transposed_c(const float *src, int64_t ld, int64_t nk, int64_t dh, float *dst,
                              int64_t np) {
  for (int64_t d = 0; d < dh; d++) {
    float *row = dst + d * np;
    for (int64_t j = 0; j < nk; j++) row[j] = src[j * ld + d];
    for (int64_t j = nk; j < np; j++) row[j] = 0;
  }
}

/* ---- AVX2 + FMA loops ---- */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define FA_TARGET __attribute__((target("avx2,fma")))
#define FA_INLINE static inline __attribute__((always_inline)) FA_TARGET

#include "avx2_math.h"

/* R rows (R <= 6) of C (+)= A B, 16 columns (twelve accumulators: enough
 * independent FMA chains to hide their latency, two B loads shared by six
 * rows) at a time, then 8, then the rest one by one. Every element is one
 * FMA chain over k in order, whatever R is. */
FA_INLINE void gemm_rows(const int R, int64_t n, int64_t k, const float *a, int64_t ars,
                         int64_t acs, const float *b, int64_t ldb, float *c, int64_t ldc, int add) {
  int64_t j = 0;
  for (; j + 2 * LANES <= n; j += 2 * LANES) {
    __m256 s[6][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) s[r][0] = s[r][1] = _mm256_setzero_ps();
    for (int64_t kk = 0; kk < k; kk++) {
      const float *bk = b + kk * ldb + j;
      const __m256 y0 = _mm256_loadu_ps(bk), y1 = _mm256_loadu_ps(bk + LANES);
#pragma GCC unroll 6
      for (int r = 0; r < R; r++) {
        const __m256 x = _mm256_broadcast_ss(a + r * ars + kk * acs);
        s[r][0] = _mm256_fmadd_ps(x, y0, s[r][0]);
        s[r][1] = _mm256_fmadd_ps(x, y1, s[r][1]);
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      float *cr = c + r * ldc + j;
      if (add) {
        s[r][0] = _mm256_add_ps(s[r][0], _mm256_loadu_ps(cr));
        s[r][1] = _mm256_add_ps(s[r][1], _mm256_loadu_ps(cr + LANES));
      }
      _mm256_storeu_ps(cr, s[r][0]);
      _mm256_storeu_ps(cr + LANES, s[r][1]);
    }
  }
  for (; j + LANES <= n; j += LANES) {
    __m256 s[6];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) s[r] = _mm256_setzero_ps();
    for (int64_t kk = 0; kk < k; kk++) {
      const __m256 y = _mm256_loadu_ps(b + kk * ldb + j);
#pragma GCC unroll 6
      for (int r = 0; r < R; r++)
        s[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r * ars + kk * acs), y, s[r]);
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      float *cr = c + r * ldc + j;
      _mm256_storeu_ps(cr, add ? _mm256_add_ps(s[r], _mm256_loadu_ps(cr)) : s[r]);
    }
  }
  for (; j < n; j++)
    for (int r = 0; r < R; r++) {
      float t = 0;
      for (int64_t kk = 0; kk < k; kk++) t = fmaf(a[r * ars + kk * acs], b[kk * ldb + j], t);
      c[r * ldc + j] = add ? c[r * ldc + j] + t : t;
    }
}

FA_TARGET static void gemm_avx2(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars,
                                int64_t acs, const float *b, int64_t ldb, float *c, int64_t ldc,
                                int add) {
  int64_t i = 0;
  for (; i + 6 <= m; i += 6)
    gemm_rows(6, n, k, a + i * ars, ars, acs, b, ldb, c + i * ldc, ldc, add);
  switch (m - i) {
  case 5: gemm_rows(5, n, k, a + i * ars, ars, acs, b, ldb, c + i * ldc, ldc, add); break;
  case 4: gemm_rows(4, n, k, a + i * ars, ars, acs, b, ldb, c + i * ldc, ldc, add); break;
  case 3: gemm_rows(3, n, k, a + i * ars, ars, acs, b, ldb, c + i * ldc, ldc, add); break;
  case 2: gemm_rows(2, n, k, a + i * ars, ars, acs, b, ldb, c + i * ldc, ldc, add); break;
  case 1: gemm_rows(1, n, k, a + i * ars, ars, acs, b, ldb, c + i * ldc, ldc, add); break;
  default: break;
  }
}

/* Lanes j .. j + 7 that are below lim. */
FA_INLINE __m256 kept_lanes(int64_t j, int64_t lim) {
  const __m256 idx =
      _mm256_add_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_ps((float)j));
  return _mm256_cmp_ps(idx, _mm256_set1_ps((float)lim), _CMP_LT_OQ);
}

/* pack_transposed_c's panel, 8 x 8 blocks transposed in registers (the
 * scalar copy's strided reads cost as much as the scores' product). */
FA_TARGET static void pack_transposed_avx2(const float *src, int64_t ld, int64_t nk, int64_t dh,
                                           float *dst, int64_t np) {
  const int64_t nk8 = nk / LANES * LANES, dh8 = dh / LANES * LANES;
  for (int64_t j = 0; j < nk8; j += LANES)
    for (int64_t d = 0; d < dh8; d += LANES) {
      __m256 r[8], t[8], u[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (j + i) * ld + d);
#pragma GCC unroll 4
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      }
#pragma GCC unroll 2
      for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
      }
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + (d + i) * np + j, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(dst + (d + i + 4) * np + j, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
      }
    }
  for (int64_t d = 0; d < dh; d++) { /* the rest: columns past nk8, rows past dh8 */
    float *row = dst + d * np;
    for (int64_t j = d < dh8 ? nk8 : 0; j < nk; j++) row[j] = src[j * ld + d];
    for (int64_t j = nk; j < np; j++) row[j] = 0;
  }
}

/* online_row_c's step, np a multiple of LANES. */
FA_TARGET static float online_row_avx2(float *s, int64_t np, int64_t lim, float scale, float *m,
                                       float *l) {
  /* the scaled scores are computed twice rather than stored between the
   * passes (the same products: the same bits) */
  const __m256 vs = _mm256_set1_ps(scale), neg = _mm256_set1_ps(-INFINITY);
  __m256 vmax = neg;
  int64_t j = 0;
  for (; j + LANES <= lim; j += LANES) /* whole vectors of kept keys: no mask */
    vmax = _mm256_max_ps(vmax, _mm256_mul_ps(_mm256_loadu_ps(s + j), vs));
  for (; j < np; j += LANES) /* a diagonal tile's, or the padding */
    vmax = _mm256_max_ps(
        vmax, _mm256_blendv_ps(neg, _mm256_mul_ps(_mm256_loadu_ps(s + j), vs), kept_lanes(j, lim)));
  const float mx = hmax(vmax), mnew = mx > *m ? mx : *m, alpha = expf(*m - mnew);
  const __m256 vm = _mm256_set1_ps(mnew);
  __m256 sum = _mm256_setzero_ps();
  for (j = 0; j < np; j += LANES) {
    __m256 p = exp256(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(s + j), vs), vm));
    if (j + LANES > lim) p = _mm256_and_ps(p, kept_lanes(j, lim));
    _mm256_storeu_ps(s + j, p);
    sum = _mm256_add_ps(sum, p);
  }
  *l = *l * alpha + hsum(sum);
  *m = mnew;
  return alpha;
}

/* probs_row_c's, np a multiple of LANES. */
FA_TARGET static void probs_row_avx2(float *s, int64_t np, int64_t lim, float scale, float lse) {
  const __m256 vs = _mm256_set1_ps(scale), vl = _mm256_set1_ps(lse);
  int64_t j = 0;
  for (; j + LANES <= lim; j += LANES) /* whole vectors of kept keys: no mask */
    _mm256_storeu_ps(s + j, exp256(_mm256_fmsub_ps(_mm256_loadu_ps(s + j), vs, vl)));
  for (; j < np; j += LANES) {
    const __m256 p = exp256(_mm256_fmsub_ps(_mm256_loadu_ps(s + j), vs, vl));
    _mm256_storeu_ps(s + j, _mm256_and_ps(p, kept_lanes(j, lim)));
  }
}

/* dscores_row_c's, np a multiple of LANES. */
FA_TARGET static void dscores_row_avx2(const float *p, float *dp, int64_t np, float delta,
                                       float scale) {
  const __m256 vd = _mm256_set1_ps(delta), vs = _mm256_set1_ps(scale);
  for (int64_t j = 0; j < np; j += LANES) {
    const __m256 g = _mm256_sub_ps(_mm256_loadu_ps(dp + j), vd);
    _mm256_storeu_ps(dp + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + j), g), vs));
  }
}

/* scale_row_c's, a vector at a time (gcc -O2 leaves that loop scalar: it
 * was a tenth of the forward's time); the same products, the same bits. */
FA_TARGET static void scale_row_avx2(float *dst, const float *src, int64_t n, float a) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t d = 0;
  for (; d + LANES <= n; d += LANES)
    _mm256_storeu_ps(dst + d, _mm256_mul_ps(_mm256_loadu_ps(src + d), va));
  for (; d < n; d++) dst[d] = src[d] * a;
}

/* copy_rows_c's, a vector at a time: a row is a head's dh floats, and a
 * library call per row was a tenth of the backward's time. */
FA_TARGET static void copy_rows_avx2(float *dst, int64_t ldd, const float *src, int64_t lds,
                                     int64_t rows, int64_t n) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t i = 0; i < rows; i++) {
    float *di = dst + i * ldd;
    const float *si = src ? src + i * lds : NULL;
    int64_t d = 0;
    for (; d + LANES <= n; d += LANES)
      _mm256_storeu_ps(di + d, si ? _mm256_loadu_ps(si + d) : zero);
    for (; d < n; d++) di[d] = si ? si[d] : 0;
  }
}
#else
#define copy_rows_avx2       copy_rows_c
#define scale_row_avx2       scale_row_c
#define gemm_avx2            gemm_c
#define online_row_avx2      online_row_c
#define probs_row_avx2       probs_row_c
#define dscores_row_avx2     dscores_row_c
#define pack_transposed_avx2 pack_transposed_c
#endif

/* ---- the tiles ---- */

static atomic_int portable; /* jx_flash_attention_set_portable */

void jx_flash_attention_set_portable(int on) { atomic_store(&portable, on != 0); }

/* 1: the AVX2 loops run. */
static int use_avx2(void) { return !atomic_load(&portable) && jx_cpu_has_avx2_fma(); }

static void gemm(int avx, int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, int64_t acs,
                 const float *b, int64_t ldb, float *c, int64_t ldc, int add) {
  (avx ? gemm_avx2 : gemm_c)(m, n, k, a, ars, acs, b, ldb, c, ldc, add);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Columns padded to whole vectors. */
static int64_t padded(int64_t n) { return (n + LANES - 1) / LANES * LANES; }

/* k^T or v^T for a key tile (pack_transposed, below). */
static void pack(int avx, const float *src, int64_t ld, int64_t nk, int64_t dh, float *dst,
                 int64_t np) {
  (avx ? pack_transposed_avx2 : pack_transposed_c)(src, ld, nk, dh, dst, np);
}

/* A diagonal tile (query tile = key tile) is worked on in strips of
 * STRIP query rows, each with only the keys its rows keep (row i keeps
 * keys 0..i): the products skip the tile's upper triangle but for the
 * strips' own diagonal blocks. Other tiles are one strip of all rows. */
enum { STRIP = 16 };

static int64_t strip_rows(int diagonal, int64_t mq) { return diagonal ? STRIP : mq; }

/* The keys [0, keys) that a strip whose last row is end - 1 reads. */
static int64_t strip_keys(int diagonal, int64_t nk, int64_t end) {
  return diagonal ? min64(nk, end) : nk;
}

typedef struct {
  jx_flash_shape s;
  int avx;
  const float *q, *k, *v, *o, *lse, *dout;
  float *out, *out_lse, *dq, *dk, *dv;
  atomic_int failed; /* a unit could not get its scratch */
} job;

/* Where head h of batch b starts in q, k, v, dq, dk, dv (rows H * dh apart). */
static int64_t head_offset(const jx_flash_shape *s, int64_t b, int64_t h) {
  return (b * s->t * s->heads + h) * s->dh;
}

/* Forward units [begin, end): unit u is query tile u % tiles of (batch,
 * head) u / tiles. A range holds consecutive query tiles of a head: the
 * head's k^T panels are packed as the tiles first need them, once per
 * range rather than once per query tile. */
static void forward_units(void *ctx, int64_t begin, int64_t end) {
  job *jb = ctx;
  const jx_flash_shape *s = &jb->s;
  const int64_t dh = s->dh, ld = s->heads * dh, t = s->t, tiles = (t + TILE - 1) / TILE;
  float *scratch =
      malloc(sizeof *scratch * (size_t)(TILE * TILE + (tiles + 1) * TILE * dh + 2 * TILE));
  if (!scratch) {
    atomic_store(&jb->failed, 1);
    return;
  }
  float *sc = scratch, *acc = sc + TILE * TILE, *mx = acc + TILE * dh, *sum = mx + TILE,
        *panels = sum + TILE;           /* key tile j's k^T at panels + j * TILE * dh */
  int64_t packed_head = -1, packed = 0; /* the head whose first `packed` panels are there */
  for (int64_t u = begin; u < end; u++) {
    const int64_t qt = u % tiles, bh = u / tiles, b = bh / s->heads, h = bh % s->heads;
    const int64_t i0 = qt * TILE, mq = min64(TILE, t - i0), off = head_offset(s, b, h);
    const float *qb = jb->q + off + i0 * ld, *kb = jb->k + off, *vb = jb->v + off;
    if (bh != packed_head) {
      packed_head = bh;
      packed = 0;
    }
    for (int64_t i = 0; i < mq; i++) {
      mx[i] = -INFINITY;
      sum[i] = 0;
    }
    memset(acc, 0, sizeof *acc * (size_t)(mq * dh));
    for (int64_t ktile = 0; ktile <= qt; ktile++) { /* the tiles above the diagonal are skipped */
      const int64_t j0 = ktile * TILE, nk = min64(TILE, t - j0), np = padded(nk);
      float *kt = panels + ktile * TILE * dh;
      if (ktile >= packed) {
        pack(jb->avx, kb + j0 * ld, ld, nk, dh, kt, np);
        packed = ktile + 1;
      }
      for (int64_t r0 = 0; r0 < mq; r0 += strip_rows(ktile == qt, mq)) {
        const int64_t rows = min64(strip_rows(ktile == qt, mq), mq - r0);
        const int64_t keys = strip_keys(ktile == qt, nk, r0 + rows), cols = padded(keys);
        float *sr = sc + r0 * np;
        gemm(jb->avx, rows, cols, dh, qb + r0 * ld, ld, 1, kt, np, sr, np, 0);
        for (int64_t i = r0; i < r0 + rows; i++) {
          const int64_t lim = min64(nk, i0 + i - j0 + 1); /* keys j0 + j <= i0 + i */
          const float alpha = (jb->avx ? online_row_avx2 : online_row_c)(sc + i * np, cols, lim,
                                                                         s->scale, &mx[i], &sum[i]);
          if (alpha != 1)
            (jb->avx ? scale_row_avx2 : scale_row_c)(acc + i * dh, acc + i * dh, dh, alpha);
        }
        gemm(jb->avx, rows, dh, keys, sr, np, 1, vb + j0 * ld, ld, acc + r0 * dh, dh, 1);
      }
    }
    float *ob = jb->out + (bh * t + i0) * dh, *lb = jb->out_lse + bh * t + i0;
    for (int64_t i = 0; i < mq; i++) {
      (jb->avx ? scale_row_avx2 : scale_row_c)(ob + i * dh, acc + i * dh, dh, 1 / sum[i]);
      lb[i] = mx[i] + logf(sum[i]);
    }
  }
  free(scratch);
}

/* One strip of the backward's tile (query tile at i0, key tile at j0 with
 * its k^T and v^T packed in kt and vt): the probabilities into pr and the
 * scores' gradient dS into dpr, rows [r0, r0 + rows) of the tile, np apart. */
static void strip_scores(const job *jb, int64_t i0, int64_t j0, int64_t nk, int64_t np, int64_t r0,
                         int64_t rows, int64_t cols, const float *qr, const float *dor,
                         const float *kt, const float *vt, const float *lse, const float *delta,
                         float *pr, float *dpr) {
  const jx_flash_shape *s = &jb->s;
  const int64_t dh = s->dh;
  gemm(jb->avx, rows, cols, dh, qr, s->heads * dh, 1, kt, np, pr, np, 0); /* raw scores */
  for (int64_t i = 0; i < rows; i++)
    (jb->avx ? probs_row_avx2 : probs_row_c)(pr + i * np, cols, min64(nk, i0 + r0 + i - j0 + 1),
                                             s->scale, lse[i0 + r0 + i]);
  gemm(jb->avx, rows, cols, dh, dor, dh, 1, vt, np, dpr, np, 0); /* dp = do v^T */
  for (int64_t i = 0; i < rows; i++)
    (jb->avx ? dscores_row_avx2 : dscores_row_c)(pr + i * np, dpr + i * np, cols,
                                                 delta[i0 + r0 + i], s->scale);
}

/* delta_i = do_i . o_i for rows [i0, i1) of (batch, head) bh: the softmax
 * backward's row term */
static void row_terms(const job *jb, int64_t bh, int64_t i0, int64_t i1, float *delta) {
  const int64_t dh = jb->s.dh, t = jb->s.t;
  const float *ob = jb->o + bh * t * dh, *dob = jb->dout + bh * t * dh;
  for (int64_t i = i0; i < i1; i++) {
    float acc = 0;
    for (int64_t d = 0; d < dh; d++) acc += dob[i * dh + d] * ob[i * dh + d];
    delta[i] = acc;
  }
}

/* Units of the backward: (batch, head) with every key tile (dq, dk, dv in
 * one pass), or, split for a pool with more threads than heads, a key tile
 * (its dk and dv; `keys`) or a query tile (its dq rows; `queries`). A tile
 * pair's products run in the same order in every mode and a query row's dq
 * sums over the key tiles in order, so the modes give the same bits. */
enum { ALL_TILES, KEYS, QUERIES };

typedef struct {
  job *jb;
  int mode;
} bwd_job;

static void backward_units(void *ctx, int64_t begin, int64_t end) {
  const bwd_job *bj = ctx;
  job *jb = bj->jb;
  const jx_flash_shape *s = &jb->s;
  const int64_t dh = s->dh, ld = s->heads * dh, t = s->t, tiles = (t + TILE - 1) / TILE;
  float *scratch = malloc(sizeof *scratch * (size_t)(2 * TILE * TILE + 4 * TILE * dh + t));
  if (!scratch) {
    atomic_store(&jb->failed, 1);
    return;
  }
  float *p = scratch, *dp = p + TILE * TILE, *kt = dp + TILE * TILE, *vt = kt + TILE * dh,
        *dk = vt + TILE * dh, *dv = dk + TILE * dh, *delta = dv + TILE * dh;
  const int64_t per_head = bj->mode == ALL_TILES ? 1 : tiles;
  for (int64_t u = begin; u < end; u++) {
    const int64_t bh = u / per_head, b = bh / s->heads, h = bh % s->heads;
    const int64_t off = head_offset(s, b, h), lo = bj->mode == ALL_TILES ? 0 : u % per_head;
    const float *qb = jb->q + off, *kb = jb->k + off, *vb = jb->v + off;
    const float *dob = jb->dout + bh * t * dh, *lse = jb->lse + bh * t;
    float *dqb = jb->dq + off, *dkb = jb->dk + off, *dvb = jb->dv + off;
    /* the key tiles this unit walks, and for each the query tiles */
    int64_t k_first = 0, k_last = tiles - 1;
    if (bj->mode == KEYS) k_first = k_last = lo;
    if (bj->mode == QUERIES) k_last = lo;
    const int64_t rows_from = bj->mode == QUERIES ? lo * TILE : k_first * TILE;
    const int64_t rows_to = bj->mode == QUERIES ? min64(t, (lo + 1) * TILE) : t;
    row_terms(jb, bh, rows_from, rows_to, delta);
    if (bj->mode != KEYS)
      (jb->avx ? copy_rows_avx2 : copy_rows_c)(dqb + rows_from * ld, ld, NULL, 0,
                                               rows_to - rows_from, dh);
    for (int64_t ktile = k_first; ktile <= k_last; ktile++) {
      const int64_t j0 = ktile * TILE, nk = min64(TILE, t - j0), np = padded(nk);
      pack(jb->avx, kb + j0 * ld, ld, nk, dh, kt, np);
      pack(jb->avx, vb + j0 * ld, ld, nk, dh, vt, np);
      memset(dk, 0, sizeof *dk * (size_t)(nk * dh));
      memset(dv, 0, sizeof *dv * (size_t)(nk * dh));
      const int64_t q_first = bj->mode == QUERIES ? lo : ktile;
      const int64_t q_last = bj->mode == QUERIES ? lo : tiles - 1;
      for (int64_t qt = q_first; qt <= q_last; qt++) {
        const int64_t i0 = qt * TILE, mq = min64(TILE, t - i0);
        const float *qi = qb + i0 * ld, *doi = dob + i0 * dh;
        for (int64_t r0 = 0; r0 < mq; r0 += strip_rows(qt == ktile, mq)) {
          const int64_t rows = min64(strip_rows(qt == ktile, mq), mq - r0);
          const int64_t keys = strip_keys(qt == ktile, nk, r0 + rows), cols = padded(keys);
          const float *qr = qi + r0 * ld, *dor = doi + r0 * dh;
          float *pr = p + r0 * np, *dpr = dp + r0 * np;
          strip_scores(jb, i0, j0, nk, np, r0, rows, cols, qr, dor, kt, vt, lse, delta, pr, dpr);
          if (bj->mode != QUERIES) {
            gemm(jb->avx, keys, dh, rows, pr, 1, np, dor, dh, dv, dh, 1); /* dv += p^T do */
            gemm(jb->avx, keys, dh, rows, dpr, 1, np, qr, ld, dk, dh, 1); /* dk += ds^T q */
          }
          if (bj->mode != KEYS)
            gemm(jb->avx, rows, dh, keys, dpr, np, 1, kb + j0 * ld, ld, dqb + (i0 + r0) * ld, ld,
                 1); /* dq += ds k */
        }
      }
      if (bj->mode != QUERIES) {
        (jb->avx ? copy_rows_avx2 : copy_rows_c)(dkb + j0 * ld, ld, dk, dh, nk, dh);
        (jb->avx ? copy_rows_avx2 : copy_rows_c)(dvb + j0 * ld, ld, dv, dh, nk, dh);
      }
    }
  }
  free(scratch);
}

static atomic_llong runs[2];
static atomic_int split_backward = -1; /* jx_flash_attention_set_split */

void jx_flash_attention_set_split(int mode) {
  atomic_store(&split_backward, mode < 0 ? -1 : mode != 0);
}

int64_t jx_flash_attention_runs(int backward) { return (int64_t)atomic_load(&runs[backward != 0]); }

static jx_status finish(job *jb, const char *what) {
  if (!atomic_load(&jb->failed)) return JX_OK;
  return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory for a tile's scratch", what);
}

jx_status jx_flash_attention_fwd(const jx_flash_shape *s, const float *q, const float *k,
                                 const float *v, float *o, float *lse) {
  job jb = {.s = *s, .avx = use_avx2(), .q = q, .k = k, .v = v, .out = o, .out_lse = lse};
  atomic_init(&jb.failed, 0);
  atomic_fetch_add(&runs[0], 1);
  const int64_t tiles = (s->t + TILE - 1) / TILE, units = s->n * s->heads * tiles;
  if (units > 0) jx_parallel_for(units, 1, forward_units, &jb);
  return finish(&jb, "attention forward");
}

jx_status jx_flash_attention_bwd(const jx_flash_shape *s, const float *q, const float *k,
                                 const float *v, const float *o, const float *lse,
                                 const float *dout, float *dq, float *dk, float *dv) {
  job jb = {.s = *s,
            .avx = use_avx2(),
            .q = q,
            .k = k,
            .v = v,
            .o = o,
            .lse = lse,
            .dout = dout,
            .dq = dq,
            .dk = dk,
            .dv = dv};
  atomic_init(&jb.failed, 0);
  atomic_fetch_add(&runs[1], 1);
  const int64_t heads = s->n * s->heads, tiles = (s->t + TILE - 1) / TILE;
  if (heads <= 0 || s->t <= 0) return finish(&jb, "attention backward");
  const int threads = jx_pool_threads(), forced = atomic_load(&split_backward);
  if (tiles < 2 || forced == 0 ||
      (forced < 0 && (heads >= threads || !jx_machine_has_room(threads)))) {
    bwd_job bj = {&jb, ALL_TILES};
    jx_parallel_for(heads, 1, backward_units, &bj);
  } else {
    /* fewer heads than threads, and cores free to run them: the key tiles'
     * dk and dv, then the query tiles' dq, each tile pair's scores computed
     * once per pass (about 1.4 times the work, on every thread) */
    bwd_job keys = {&jb, KEYS}, queries = {&jb, QUERIES};
    jx_parallel_for(heads * tiles, 1, backward_units, &keys);
    jx_parallel_for(heads * tiles, 1, backward_units, &queries);
  }
  return finish(&jb, "attention backward");
}
