/* Small f32 products (dot_small.h): AVX2 + FMA loops, or AVX-512 ones where
 * the CPU has them, chosen at run time, so the library stays built for any
 * x86-64. Two rows of C are built 32 columns at a time in eight vector
 * accumulators, A's elements broadcast and B's row streamed from L1 (a
 * small product's B fits there); the last n % 8 columns are scalar FMA
 * chains in the same order. */
#include "dot_small.h"

#include <stdatomic.h>

#include "../base/cpu_features.h"

static atomic_llong small_calls;

int64_t jx_sgemm_small_calls(void) { return (int64_t)atomic_load(&small_calls); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <math.h>

#define SMALL_TARGET __attribute__((target("avx2,fma")))

/* BLOCK(NAME, TARGET, BITS): NAME(R, V, n, k, a, b, c, j) computes columns
 * [j, j + V L) of R rows of C (L = BITS / 32 lanes, c row-major with row
 * stride n) from their K values a (row stride k): each B vector loaded
 * serves all R rows, and R rows of V vectors are R V independent chains
 * (AVX2: two rows of four, enough to keep both FMA ports busy). */
#define BLOCK(NAME, TARGET, BITS)                                                                  \
  static inline __attribute__((always_inline)) TARGET void NAME(                                   \
      const int R, const int V, int64_t n, int64_t k, const float *a, const float *b, float *c,    \
      int64_t j) {                                                                                 \
    enum { L = BITS / 32 };                                                                        \
    __m##BITS s[4][4];                                                                             \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) s[r][v] = _mm##BITS##_setzero_ps();    \
    for (int64_t kk = 0; kk < k; kk++) {                                                           \
      const float *br = b + kk * n + j;                                                            \
      __m##BITS y[4];                                                                              \
      _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) y[v] = _mm##BITS##_loadu_ps(br + L * v); \
      _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                        \
        __m##BITS x = _mm##BITS##_set1_ps(a[r * k + kk]);                                          \
        _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) s[r][v] =                              \
            _mm##BITS##_fmadd_ps(x, y[v], s[r][v]);                                                \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < V; v++)                                        \
            _mm##BITS##_storeu_ps(c + r * n + j + L * v, s[r][v]);                                 \
  }

BLOCK(row_block, SMALL_TARGET, 256)

/* R rows of C, columns [j, n). */
static inline __attribute__((always_inline)) SMALL_TARGET void
row_group(const int R, int64_t j, int64_t n, int64_t k, const float *a, const float *b, float *c) {
  for (; j + 32 <= n; j += 32) row_block(R, 4, n, k, a, b, c, j);
  for (; j + 8 <= n; j += 8) row_block(R, 1, n, k, a, b, c, j);
  for (; j < n; j++)
    for (int r = 0; r < R; r++) {
      float s = 0;
      for (int64_t kk = 0; kk < k; kk++) s = fmaf(a[r * k + kk], b[kk * n + j], s);
      c[r * n + j] = s;
    }
}

SMALL_TARGET static void rows(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                              float *c) {
  int64_t i = 0;
  for (; i + 2 <= m; i += 2) row_group(2, 0, n, k, a + i * k, b, c + i * n);
  if (i < m) row_group(1, 0, n, k, a + i * k, b, c + i * n);
}

/* The same products on AVX-512 CPUs: four rows of C share each B vector,
 * 64 columns at a time in sixteen 16-lane accumulators (half the loads and
 * broadcasts per multiply-add of the AVX2 blocks; an RNN step's [8, 64]
 * products ran 1.5x faster). Columns past the last 16-wide block take the
 * AVX2 loops. Each lane is the same FMA chain as above, so the bits match. */
#define WIDE_TARGET __attribute__((target("avx512f,avx2,fma")))

BLOCK(wide_block, WIDE_TARGET, 512)

static inline __attribute__((always_inline)) WIDE_TARGET void
wide_group(const int R, int64_t n, int64_t k, const float *a, const float *b, float *c) {
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) wide_block(R, 4, n, k, a, b, c, j);
  for (; j + 16 <= n; j += 16) wide_block(R, 1, n, k, a, b, c, j);
  if (j == n) return;
  int r = 0;
  for (; r + 2 <= R; r += 2) row_group(2, j, n, k, a + r * k, b, c + r * n);
  if (r < R) row_group(1, j, n, k, a + r * k, b, c + r * n);
}

WIDE_TARGET static void wide_rows(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                                  float *c) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) wide_group(4, n, k, a + i * k, b, c + i * n);
  if (i + 2 <= m) {
    wide_group(2, n, k, a + i * k, b, c + i * n);
    i += 2;
  }
  if (i < m) wide_group(1, n, k, a + i * k, b, c + i * n);
}

int jx_sgemm_small(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c) {
  if (!jx_cpu_has_avx2_fma()) return 0;
  if (jx_cpu_has_avx512f())
    wide_rows(m, n, k, a, b, c);
  else
    rows(m, n, k, a, b, c);
  atomic_fetch_add(&small_calls, 1);
  return 1;
}
#else
int jx_sgemm_small(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c) {
  (void)m;
  (void)n;
  (void)k;
  (void)a;
  (void)b;
  (void)c;
  return 0;
}
#endif
