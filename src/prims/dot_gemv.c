/* x W with W row-major (dot_gemv.h). */
#include "dot_gemv.h"

#include <math.h>

#include "../base/cpu_features.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

enum { LANES = 8, ROWS = 8 };

#define GV_TARGET __attribute__((target("avx2,fma")))

/* c[j0, j1) (+)= rows [k0, k0 + r) of W times x, r <= ROWS, each output's
 * terms added in row order; add = 0 starts the sums. */
GV_TARGET static void rows_into(int64_t j0, int64_t j1, int64_t k0, int r, const float *x,
                                int64_t incx, const float *w, int64_t ldw, float *c, int add) {
  float xs[ROWS];
  const float *wr[ROWS];
  for (int i = 0; i < r; i++) {
    xs[i] = x[(k0 + i) * incx];
    wr[i] = w + (k0 + i) * ldw;
  }
  int64_t j = j0;
  if (r == ROWS) {
    __m256 xv[ROWS];
#pragma GCC unroll 8
    for (int i = 0; i < ROWS; i++) xv[i] = _mm256_set1_ps(xs[i]);
    for (; j + 2 * LANES <= j1; j += 2 * LANES) {
      __m256 a = add ? _mm256_loadu_ps(c + j) : _mm256_setzero_ps();
      __m256 b = add ? _mm256_loadu_ps(c + j + LANES) : _mm256_setzero_ps();
#pragma GCC unroll 8
      for (int i = 0; i < ROWS; i++) {
        a = _mm256_fmadd_ps(xv[i], _mm256_loadu_ps(wr[i] + j), a);
        b = _mm256_fmadd_ps(xv[i], _mm256_loadu_ps(wr[i] + j + LANES), b);
      }
      _mm256_storeu_ps(c + j, a);
      _mm256_storeu_ps(c + j + LANES, b);
    }
  }
  for (; j + LANES <= j1; j += LANES) {
    __m256 a = add ? _mm256_loadu_ps(c + j) : _mm256_setzero_ps();
    for (int i = 0; i < r; i++)
      a = _mm256_fmadd_ps(_mm256_set1_ps(xs[i]), _mm256_loadu_ps(wr[i] + j), a);
    _mm256_storeu_ps(c + j, a);
  }
  for (; j < j1; j++) { /* the same chain, one column: fmaf is the vector FMA's rounding */
    float a = add ? c[j] : 0;
    for (int i = 0; i < r; i++) a = fmaf(xs[i], wr[i][j], a);
    c[j] = a;
  }
}

GV_TARGET static void gemv_avx2(int64_t j0, int64_t j1, int64_t k, const float *x, int64_t incx,
                                const float *w, int64_t ldw, float *c) {
  int64_t k0 = 0;
  for (; k0 + ROWS <= k; k0 += ROWS) rows_into(j0, j1, k0, ROWS, x, incx, w, ldw, c, k0 > 0);
  if (k0 < k || k == 0) rows_into(j0, j1, k0, (int)(k - k0), x, incx, w, ldw, c, k0 > 0);
}

int jx_sgemv_rows(int64_t j0, int64_t j1, int64_t k, const float *x, int64_t incx, const float *w,
                  int64_t ldw, float *c) {
  if (!jx_cpu_has_avx2_fma()) return 0;
  gemv_avx2(j0, j1, k, x, incx, w, ldw, c);
  return 1;
}
#else
int jx_sgemv_rows(int64_t j0, int64_t j1, int64_t k, const float *x, int64_t incx, const float *w,
                  int64_t ldw, float *c) {
  (void)j0;
  (void)j1;
  (void)k;
  (void)x;
  (void)incx;
  (void)w;
  (void)ldw;
  (void)c;
  return 0;
}
#endif
