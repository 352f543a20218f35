/* Narrow f32 products (dot_skinny.h): AVX2 + FMA loops chosen at run time,
 * so the library stays built for any x86-64 (and any other CPU, where the
 * caller keeps BLAS).
 *
 * Three shapes, by which side is narrow and how A lies:
 *  - small_k (K <= 16): C(i, :) = sum_kk A(i, kk) B(kk, :), an outer-product
 *    update per row: A's K values broadcast, B's rows (packed K x n when B
 *    is transposed) streamed in column blocks that stay in L1;
 *  - small_n_rows (N <= 16, A's rows contiguous): N dot products per row,
 *    vectorised along K, two rows and up to five columns at once (ten
 *    accumulators hide the FMA latency), B packed as N x K;
 *  - small_n_cols (N <= 16, A stored transposed, K x M): vectorised along M,
 *    sixteen rows and up to five columns at once, B's elements broadcast.
 * Every element is one FMA chain over kk in order (small_k, small_n_cols),
 * or eight lanes' chains summed then the remaining kk (small_n_rows): the
 * same for a row in a block of two or alone, in a vector or in the tail. */
#include "dot_skinny.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../base/cpu_features.h"
#include "../base/env.h"

static atomic_llong skinny_calls;

int64_t jx_sgemm_skinny_calls(void) { return (int64_t)atomic_load(&skinny_calls); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <math.h>

#define SKINNY_TARGET __attribute__((target("avx2,fma")))
#define SKINNY_INLINE static inline __attribute__((always_inline)) SKINNY_TARGET

enum {
  COL_BLOCK = 256, /* small_k: columns of B per pass over A's rows (K x 256 floats <= 16 KiB) */
  MAX_GROUP = 5,   /* small_n: columns per register block */
  SMALL_N_ROWS = 2,
  SMALL_N_COLS = 16,   /* rows per register block of small_n_cols (two vectors) */
  SKINNY_MIN_WIDE = 64 /* the other side's least size */
};

/* 1 when the loops may run: the CPU has AVX2 and FMA and JX_DOT_SKINNY=0 is
 * not set. Decided at the first product, not on every call (a GEMM's row
 * blocks each ask). */
static int skinny_usable(void) {
  static atomic_int known = -1;
  int v = atomic_load(&known);
  if (v < 0) {
    v = jx_cpu_has_avx2_fma() && jx_env_flag("JX_DOT_SKINNY");
    atomic_store(&known, v);
  }
  return v;
}

/* ---- small K ---- */

/* Columns [j0, j1) of R rows (R = 1 or 2) of C from their K values
 * ai[r][kk] and B's rows bp (row stride ldp): each B vector loaded serves
 * both rows; 32 columns x 2 rows are eight chains, enough to hide the FMA
 * latency. */
SKINNY_INLINE void small_k_rows(const int R, float ai[][JX_SKINNY_MAX], int64_t k, const float *bp,
                                int64_t ldp, float *c, int64_t ldc, int64_t j0, int64_t j1) {
  int64_t j = j0;
  for (; j + 32 <= j1; j += 32) {
    __m256 s[2][4];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int v = 0; v < 4; v++) s[r][v] = _mm256_setzero_ps();
    for (int64_t kk = 0; kk < k; kk++) {
      const float *br = bp + kk * ldp + j;
      __m256 y[4];
#pragma GCC unroll 8
      for (int v = 0; v < 4; v++) y[v] = _mm256_loadu_ps(br + 8 * v);
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) {
        __m256 x = _mm256_set1_ps(ai[r][kk]);
#pragma GCC unroll 8
        for (int v = 0; v < 4; v++) s[r][v] = _mm256_fmadd_ps(x, y[v], s[r][v]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int v = 0; v < 4; v++) _mm256_storeu_ps(c + r * ldc + j + 8 * v, s[r][v]);
  }
  for (; j + 8 <= j1; j += 8)
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      __m256 s = _mm256_setzero_ps();
      for (int64_t kk = 0; kk < k; kk++)
        s = _mm256_fmadd_ps(_mm256_set1_ps(ai[r][kk]), _mm256_loadu_ps(bp + kk * ldp + j), s);
      _mm256_storeu_ps(c + r * ldc + j, s);
    }
  for (; j < j1; j++)
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      float s = 0;
      for (int64_t kk = 0; kk < k; kk++) s = fmaf(ai[r][kk], bp[kk * ldp + j], s);
      c[r * ldc + j] = s;
    }
}

SKINNY_TARGET static void small_k(int lt, int64_t m, int64_t n, int64_t k, const float *a,
                                  int64_t lda, const float *bp, int64_t ldp, float *c,
                                  int64_t ldc) {
  for (int64_t j0 = 0; j0 < n; j0 += COL_BLOCK) {
    int64_t j1 = j0 + COL_BLOCK < n ? j0 + COL_BLOCK : n;
    for (int64_t i = 0; i < m; i += 2) {
      float ai[2][JX_SKINNY_MAX];
      int rows = i + 1 < m ? 2 : 1;
      for (int r = 0; r < rows; r++)
        for (int64_t kk = 0; kk < k; kk++)
          ai[r][kk] = lt ? a[kk * lda + i + r] : a[(i + r) * lda + kk];
      if (rows == 2)
        small_k_rows(2, ai, k, bp, ldp, c + i * ldc, ldc, j0, j1);
      else
        small_k_rows(1, ai, k, bp, ldp, c + i * ldc, ldc, j0, j1);
    }
  }
}

/* ---- small N, A's rows contiguous ---- */

SKINNY_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* Rows i0 .. i0+R-1, columns j0 .. j0+W-1: dot products of A's rows with
 * bt's rows (B transposed, row stride ldt) over k. */
SKINNY_INLINE void dots(const int R, const int W, const float *a, int64_t lda, int64_t i0,
                        const float *bt, int64_t ldt, int64_t j0, int64_t k, float *c,
                        int64_t ldc) {
  __m256 acc[SMALL_N_ROWS][MAX_GROUP];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int w = 0; w < W; w++) acc[r][w] = _mm256_setzero_ps();
  int64_t k8 = k / 8 * 8;
  for (int64_t kk = 0; kk < k8; kk += 8) {
    __m256 x[SMALL_N_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) x[r] = _mm256_loadu_ps(a + (i0 + r) * lda + kk);
#pragma GCC unroll 8
    for (int w = 0; w < W; w++) {
      __m256 y = _mm256_loadu_ps(bt + (j0 + w) * ldt + kk);
#pragma GCC unroll 8
      for (int r = 0; r < R; r++) acc[r][w] = _mm256_fmadd_ps(x[r], y, acc[r][w]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int w = 0; w < W; w++) {
      const float *ar = a + (i0 + r) * lda, *br = bt + (j0 + w) * ldt;
      float s = hsum(acc[r][w]);
      for (int64_t kk = k8; kk < k; kk++) s = fmaf(ar[kk], br[kk], s);
      c[(i0 + r) * ldc + j0 + w] = s;
    }
}

/* The columns split into groups of at most MAX_GROUP, as even as possible. */
static int64_t groups_of(int64_t n) { return (n + MAX_GROUP - 1) / MAX_GROUP; }
static int64_t group_start(int64_t n, int64_t g, int64_t groups) { return g * n / groups; }

#define DOTS_CASE(R, W)                                                                            \
  case W: dots(R, W, a, lda, i, bt, ldt, j0, k, c, ldc); break;

SKINNY_TARGET static void small_n_rows(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                                       const float *bt, int64_t ldt, float *c, int64_t ldc) {
  int64_t groups = groups_of(n);
  for (int64_t g = 0; g < groups; g++) {
    int64_t j0 = group_start(n, g, groups), w = group_start(n, g + 1, groups) - j0;
    int64_t i = 0;
    for (; i + SMALL_N_ROWS <= m; i += SMALL_N_ROWS) switch (w) {
        DOTS_CASE(2, 1)
        DOTS_CASE(2, 2)
        DOTS_CASE(2, 3)
        DOTS_CASE(2, 4)
        DOTS_CASE(2, 5)
      }
    for (; i < m; i++) switch (w) {
        DOTS_CASE(1, 1)
        DOTS_CASE(1, 2)
        DOTS_CASE(1, 3)
        DOTS_CASE(1, 4)
        DOTS_CASE(1, 5)
      }
  }
}

/* ---- small N, A stored transposed (K x M) ---- */

/* Rows i0 .. i0+8V-1, columns j0 .. j0+W-1, vectorised along the rows:
 * A(i, kk) = a[kk * lda + i] contiguous in i, B(kk, j) = b[kk * bk + j * bj]. */
SKINNY_INLINE void col_dots(const int V, const int W, const float *a, int64_t lda, int64_t i0,
                            const float *b, int64_t bk, int64_t bj, int64_t j0, int64_t k, float *c,
                            int64_t ldc) {
  __m256 acc[SMALL_N_COLS / 8][MAX_GROUP];
#pragma GCC unroll 8
  for (int v = 0; v < V; v++)
#pragma GCC unroll 8
    for (int w = 0; w < W; w++) acc[v][w] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < k; kk++) {
    __m256 x[SMALL_N_COLS / 8];
#pragma GCC unroll 8
    for (int v = 0; v < V; v++) x[v] = _mm256_loadu_ps(a + kk * lda + i0 + 8 * v);
#pragma GCC unroll 8
    for (int w = 0; w < W; w++) {
      __m256 y = _mm256_set1_ps(b[kk * bk + (j0 + w) * bj]);
#pragma GCC unroll 8
      for (int v = 0; v < V; v++) acc[v][w] = _mm256_fmadd_ps(x[v], y, acc[v][w]);
    }
  }
  float t[8];
#pragma GCC unroll 8
  for (int v = 0; v < V; v++)
#pragma GCC unroll 8
    for (int w = 0; w < W; w++) {
      _mm256_storeu_ps(t, acc[v][w]);
      for (int r = 0; r < 8; r++) c[(i0 + 8 * v + r) * ldc + j0 + w] = t[r];
    }
}

#define COL_DOTS_CASE(V, W)                                                                        \
  case W: col_dots(V, W, a, lda, i, b, bk, bj, j0, k, c, ldc); break;

SKINNY_TARGET static void small_n_cols(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                                       const float *b, int64_t bk, int64_t bj, float *c,
                                       int64_t ldc) {
  int64_t groups = groups_of(n);
  for (int64_t g = 0; g < groups; g++) {
    int64_t j0 = group_start(n, g, groups), w = group_start(n, g + 1, groups) - j0;
    int64_t i = 0;
    for (; i + 16 <= m; i += 16) switch (w) {
        COL_DOTS_CASE(2, 1)
        COL_DOTS_CASE(2, 2)
        COL_DOTS_CASE(2, 3)
        COL_DOTS_CASE(2, 4)
        COL_DOTS_CASE(2, 5)
      }
    for (; i + 8 <= m; i += 8) switch (w) {
        COL_DOTS_CASE(1, 1)
        COL_DOTS_CASE(1, 2)
        COL_DOTS_CASE(1, 3)
        COL_DOTS_CASE(1, 4)
        COL_DOTS_CASE(1, 5)
      }
    for (; i < m; i++) /* the lanes' chain, one row at a time */
      for (int64_t j = j0; j < j0 + w; j++) {
        float s = 0;
        for (int64_t kk = 0; kk < k; kk++) s = fmaf(a[kk * lda + i], b[kk * bk + j * bj], s);
        c[i * ldc + j] = s;
      }
  }
}

/* B(kk, j) packed k x n (small_k) or n x k (small_n_rows), or NULL when out of memory. */
static float *pack_b(int rt, int64_t k, int64_t n, const float *b, int64_t ldb, int k_major) {
  float *p = malloc(sizeof *p * (size_t)(k * n + 1));
  if (!p) return NULL;
  for (int64_t kk = 0; kk < k; kk++)
    for (int64_t j = 0; j < n; j++) {
      float v = rt ? b[j * ldb + kk] : b[kk * ldb + j];
      p[k_major ? kk * n + j : j * k + kk] = v;
    }
  return p;
}

int jx_sgemm_skinny(int lt, int rt, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *c, int64_t ldc) {
  /* narrow on one side only: with both sides narrow there is too little
   * work per row for these loops' set-up, and BLAS is as fast */
  int narrow_k = k <= JX_SKINNY_MAX && n >= SKINNY_MIN_WIDE;
  int narrow_n = n <= JX_SKINNY_MAX && k >= SKINNY_MIN_WIDE;
  if (n < 2 || k < 1 || m < 1 || !(narrow_k || narrow_n)) return 0;
  if (!skinny_usable()) return 0;
  if (narrow_k) {
    float *packed = rt ? pack_b(rt, k, n, b, ldb, 1) : NULL;
    if (rt && !packed) return 0;
    small_k(lt, m, n, k, a, lda, rt ? packed : b, rt ? n : ldb, c, ldc);
    free(packed);
  } else if (lt) {
    small_n_cols(m, n, k, a, lda, b, rt ? 1 : ldb, rt ? ldb : 1, c, ldc);
  } else {
    float *packed = rt ? NULL : pack_b(rt, k, n, b, ldb, 0);
    if (!rt && !packed) return 0;
    small_n_rows(m, n, k, a, lda, rt ? b : packed, rt ? ldb : k, c, ldc);
    free(packed);
  }
  atomic_fetch_add(&skinny_calls, 1);
  return 1;
}
#else
int jx_sgemm_skinny(int lt, int rt, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *c, int64_t ldc) {
  (void)lt, (void)rt, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c,
      (void)ldc;
  return 0;
}
#endif
