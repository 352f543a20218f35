/* Small f32 products (dot_small.h): AVX2 + FMA loops chosen at run time,
 * so the library stays built for any x86-64. A row of C is built 32
 * columns at a time in four vector accumulators (enough chains to hide the
 * FMA latency at these sizes), A's element broadcast and B's row streamed
 * from L1; the last n % 8 columns are scalar FMA chains in the same order. */
#include "dot_small.h"

#include <stdatomic.h>

static atomic_llong small_calls;

int64_t jx_sgemm_small_calls(void) { return (int64_t)atomic_load(&small_calls); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <math.h>

#define SMALL_TARGET __attribute__((target("avx2,fma")))

static int small_usable(void) {
  static atomic_int known = -1;
  int v = atomic_load(&known);
  if (v < 0) {
    __builtin_cpu_init();
    v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    atomic_store(&known, v);
  }
  return v;
}

/* Columns [j, j + 8V) of a row of C (c) from the row's K values a. */
static inline __attribute__((always_inline)) SMALL_TARGET void
row_block(const int V, int64_t n, int64_t k, const float *a, const float *b, float *c, int64_t j) {
  __m256 s[4];
#pragma GCC unroll 4
  for (int v = 0; v < V; v++) s[v] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < k; kk++) {
    __m256 x = _mm256_set1_ps(a[kk]);
    const float *br = b + kk * n + j;
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) s[v] = _mm256_fmadd_ps(x, _mm256_loadu_ps(br + 8 * v), s[v]);
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; v++) _mm256_storeu_ps(c + j + 8 * v, s[v]);
}

SMALL_TARGET static void rows(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                              float *c) {
  for (int64_t i = 0; i < m; i++, a += k, c += n) {
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) row_block(4, n, k, a, b, c, j);
    for (; j + 8 <= n; j += 8) row_block(1, n, k, a, b, c, j);
    for (; j < n; j++) {
      float s = 0;
      for (int64_t kk = 0; kk < k; kk++) s = fmaf(a[kk], b[kk * n + j], s);
      c[j] = s;
    }
  }
}

int jx_sgemm_small(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c) {
  if (!small_usable()) return 0;
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
