/* jx's packed f32 GEMM (gemm_f32.h), BLIS-style.
 *
 * Loops, outer first: columns of C in blocks of NC; K in panels of KC,
 * packing B's kc x nc block into NR-column micro-panels (kk-major, NR
 * floats per kk, zero-padded past n); rows in blocks of MC, packing A's
 * mc x kc block into MR-row micro-panels (MR floats per kk, zero-padded
 * past m); then for each A micro-panel (kept in L1) every B micro-panel
 * (streamed from L2 or L3): one MR x NR tile of C summed over the panel in
 * registers from zero, then added to C (unless it is the first panel of a
 * product that does not accumulate), stored, and given the epilogue after
 * the last K panel while it is still in L1. The last rows of a product run
 * a 4- or 8-row kernel where they are whole, other edge tiles the kernel
 * on a local tile. Packing a transposed side goes through 8 x 8 register
 * transposes; a K-major side is copied one kk row at a time across its
 * micro-panels, rows ahead prefetched (they lie a whole row of the
 * operand apart).
 *
 * AVX-512: MR 12, NR 32 (24 zmm accumulators, two B vectors and one
 * broadcast per row and kk); AVX2: MR 6, NR 16 (12 ymm accumulators). Both
 * sum each panel as one FMA chain in k order, so they give the same bits. */
#include "gemm_f32.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../base/cpu_features.h"
#include "../base/env.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

enum {
  KC = 512,           /* K panel: a 12 x 512 A micro-panel is 24 KiB of L1 */
  MC = 96,            /* rows of A per packed block (a multiple of both MRs) */
  NC = 2048,          /* columns of B per packed block, up to 4 MiB: A is packed once per block, and
                       * each micro-kernel streams its 64 KiB B micro-panel from L2 or L3 */
  PREFETCH_ROWS = 16, /* kk rows ahead that a K-major pack prefetches */
  MR512 = 12,
  NR512 = 32,
  MR256 = 6,
  NR256 = 16,
  TILE_MAX = MR512 * NR512
};

typedef void (*kernel_fn)(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc,
                          int load);

/* The first ROWS rows (a multiple of 4, at most MR512) of the MR512 x NR512
 * tile at c (row stride ldc) = (load ? c : 0) + Ap Bp over kc: ap holds
 * MR512 floats per kk, bp NR512. The panel's sums start from zero and are
 * added to C at the end (C's lines prefetched at the start), so that C's
 * loads do not wait on memory. Fewer rows serve the last rows of a product
 * whose row count is not a multiple of MR512 (a block of 16 rows is 12 + 4,
 * not 12 + 12). */
static inline __attribute__((always_inline, target("avx512f"))) void
tile_avx512(const int rows, int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc,
            int load) {
  __m512 acc[MR512][2];
#pragma GCC unroll 12
  for (int i = 0; i < rows; i++) {
    if (load) {
      _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
    }
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  }
  for (int64_t kk = 0; kk < kc; kk++) {
    __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < rows; i++) {
      __m512 a = _mm512_set1_ps(ap[i]);
      acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
    }
    ap += MR512;
    bp += NR512;
  }
#pragma GCC unroll 12
  for (int i = 0; i < rows; i++) {
    if (load) {
      acc[i][0] = _mm512_add_ps(_mm512_loadu_ps(c + i * ldc), acc[i][0]);
      acc[i][1] = _mm512_add_ps(_mm512_loadu_ps(c + i * ldc + 16), acc[i][1]);
    }
    _mm512_storeu_ps(c + i * ldc, acc[i][0]);
    _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
  }
}

#define TILE_AVX512(ROWS)                                                                          \
  __attribute__((target("avx512f"))) static void kernel_avx512_##ROWS(                             \
      int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc, int load) {             \
    tile_avx512(ROWS, kc, ap, bp, c, ldc, load);                                                   \
  }
TILE_AVX512(4)
TILE_AVX512(8)
TILE_AVX512(12)

/* The same with MR256 x NR256 tiles in ymm registers. */
__attribute__((target("avx2,fma"))) static void
kernel_avx2(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc, int load) {
  __m256 acc[MR256][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR256; i++) {
    if (load) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  }
  for (int64_t kk = 0; kk < kc; kk++) {
    __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR256; i++) {
      __m256 a = _mm256_broadcast_ss(ap + i);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
    ap += MR256;
    bp += NR256;
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR256; i++) {
    if (load) {
      acc[i][0] = _mm256_add_ps(_mm256_loadu_ps(c + i * ldc), acc[i][0]);
      acc[i][1] = _mm256_add_ps(_mm256_loadu_ps(c + i * ldc + 8), acc[i][1]);
    }
    _mm256_storeu_ps(c + i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
  }
}

/* dst[kk * w + r] = src[r * ld + kk] for r < rows, kk < kc, and zeros for
 * rows <= r < w: a packing transpose, eight (then four) rows at a time
 * through register transposes of 8 x 8 (4 x 4) blocks. */
__attribute__((target("avx2,fma"))) static void
transpose_pack(const float *src, int64_t ld, int64_t rows, int64_t kc, int w, float *dst) {
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    const float *s = src + r * ld;
    int64_t kk = 0;
    for (; kk + 8 <= kc; kk += 8) {
      __m256 x[8], t[8];
      for (int i = 0; i < 8; i++) x[i] = _mm256_loadu_ps(s + i * ld + kk);
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(x[i], x[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(x[i], x[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        x[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        x[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        x[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        x[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
      }
      for (int i = 0; i < 4; i++) {
        t[i] = _mm256_permute2f128_ps(x[i], x[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(x[i], x[i + 4], 0x31);
      }
      for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (kk + i) * w + r, t[i]);
    }
    for (; kk < kc; kk++)
      for (int i = 0; i < 8; i++) dst[kk * w + r + i] = s[i * ld + kk];
  }
  for (; r + 4 <= rows; r += 4) {
    const float *s = src + r * ld;
    int64_t kk = 0;
    for (; kk + 4 <= kc; kk += 4) {
      __m128 x0 = _mm_loadu_ps(s + kk), x1 = _mm_loadu_ps(s + ld + kk);
      __m128 x2 = _mm_loadu_ps(s + 2 * ld + kk), x3 = _mm_loadu_ps(s + 3 * ld + kk);
      _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
      _mm_storeu_ps(dst + kk * w + r, x0);
      _mm_storeu_ps(dst + (kk + 1) * w + r, x1);
      _mm_storeu_ps(dst + (kk + 2) * w + r, x2);
      _mm_storeu_ps(dst + (kk + 3) * w + r, x3);
    }
    for (; kk < kc; kk++)
      for (int i = 0; i < 4; i++) dst[kk * w + r + i] = s[i * ld + kk];
  }
  for (; r < rows; r++)
    for (int64_t kk = 0; kk < kc; kk++) dst[kk * w + r] = src[r * ld + kk];
  for (; r < w; r++)
    for (int64_t kk = 0; kk < kc; kk++) dst[kk * w + r] = 0.0f;
}

typedef struct {
  kernel_fn fn;      /* whole tiles */
  kernel_fn part[3]; /* the first 4, 8, 12 rows of a tile (MR512's kernel), else fn */
  int mr, nr;
  const char *name;
} kernel;

static const kernel kernels[3] = {
    {NULL, {NULL, NULL, NULL}, 0, 0, "none"},
    {kernel_avx2, {kernel_avx2, kernel_avx2, kernel_avx2}, MR256, NR256, "avx2"},
    {kernel_avx512_12,
     {kernel_avx512_4, kernel_avx512_8, kernel_avx512_12},
     MR512,
     NR512,
     "avx512"},
};

/* The widest kernel this CPU runs (an index of kernels); 0 with JX_GEMM=0. */
static int widest(void) {
  return !jx_env_flag("JX_GEMM") ? 0 : jx_cpu_has_avx512f() ? 2 : jx_cpu_has_avx2_fma() ? 1 : 0;
}

static atomic_int known = -1; /* the kernel in use, chosen at the first product */

static const kernel *chosen(void) {
  int v = atomic_load(&known);
  if (v < 0) {
    v = widest();
    atomic_store(&known, v);
  }
  return &kernels[v];
}

int jx_sgemm_packed_use(const char *name) {
  for (int v = 1; v <= 2; v++)
    if (!strcmp(name, kernels[v].name) && v <= widest()) {
      atomic_store(&known, v);
      return 1;
    }
  return 0;
}

/* d[0, n) = s[0, n), d[n, w) = 0: one kk of a micro-panel whose rows (or
 * columns) are a run, in whole vectors (a call of memcpy per kk costs more
 * than the copy). */
static inline __attribute__((always_inline, target("avx2,fma"))) void
copy_pad(float *d, const float *s, int64_t n, int w) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_loadu_ps(s + i));
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(d + i, _mm_loadu_ps(s + i));
  for (; i < n; i++) d[i] = s[i];
  for (; i < w; i++) d[i] = 0.0f;
}

/* Entries [x0, x0 + count) of one side (A's rows or B's columns, of total)
 * over the K panel [p0, p0 + kc) into micro-panels w entries wide, each kk's
 * w floats together, zeros past total. Entry x at kk lies at
 * s[kk * ld + x] when kmajor (A stored transposed, B as it is: each kk's
 * entries are a run, copied one kk at a time across the micro-panels so that
 * each source line is read once), else at s[x * ld + kk] (transposed). */
__attribute__((target("avx2,fma"))) static void pack(int kmajor, const float *s, int64_t ld,
                                                     int64_t total, int64_t x0, int64_t count,
                                                     int64_t p0, int64_t kc, int w, float *dst) {
  if (kmajor) {
    for (int64_t kk = 0; kk < kc; kk++) {
      const float *row = s + (p0 + kk) * ld;
      if (kk + PREFETCH_ROWS < kc) /* rows a long stride apart: ahead of the hardware's prefetch */
        for (int64_t x = 0; x < count && x0 + x < total; x += 16)
          _mm_prefetch((const char *)(row + PREFETCH_ROWS * ld + x0 + x), _MM_HINT_T0);
      for (int64_t x = 0; x < count; x += w) {
        int64_t n = total - (x0 + x) < w ? total - (x0 + x) : w;
        copy_pad(dst + x * kc + kk * w, row + x0 + x, n, w);
      }
    }
    return;
  }
  for (int64_t x = 0; x < count; x += w) {
    int64_t n = total - (x0 + x) < w ? total - (x0 + x) : w;
    transpose_pack(s + (x0 + x) * ld + p0, ld, n, kc, w, dst + x * kc);
  }
}

/* The epilogue's bias on rows x cols of a tile, after its last K panel. */
__attribute__((target("avx2,fma"))) static void finish_tile(const jx_gemm_epilogue *e, float *c,
                                                            int64_t ldc, int64_t rows, int64_t cols,
                                                            int64_t j0) {
  if (!e || !e->bias) return;
  const float *bias = e->bias + j0;
  for (int64_t i = 0; i < rows; i++) {
    float *r = c + i * ldc;
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8)
      _mm256_storeu_ps(r + j, _mm256_add_ps(_mm256_loadu_ps(r + j), _mm256_loadu_ps(bias + j)));
    for (; j < cols; j++) r[j] += bias[j];
  }
}

static int64_t round_up(int64_t v, int64_t q) { return (v + q - 1) / q * q; }

int jx_sgemm_packed(int lt, int rt, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *c, int64_t ldc, const jx_gemm_epilogue *e) {
  const kernel *kn = chosen();
  if (!kn->fn) return 0;
  if (m <= 0 || n <= 0) return 1;
  int acc = e && e->accumulate;
  if (k <= 0) {
    for (int64_t i = 0; i < m; i++) {
      if (!acc) memset(c + i * ldc, 0, sizeof(float) * (size_t)n);
      finish_tile(e, c + i * ldc, ldc, 1, n, 0);
    }
    return 1;
  }
  const int mr = kn->mr, nr = kn->nr;
  int64_t kcmax = k < KC ? k : KC;
  int64_t ncmax = round_up(n < NC ? n : NC, nr), mcmax = round_up(m < MC ? m : MC, mr);
  /* aligned_alloc takes whole multiples of the alignment */
  float *bpack = aligned_alloc(64, sizeof(float) * (size_t)round_up(kcmax * ncmax, 16));
  float *apack = aligned_alloc(64, sizeof(float) * (size_t)round_up(kcmax * mcmax, 16));
  if (!bpack || !apack) {
    free(bpack);
    free(apack);
    return 0;
  }
  float tile[TILE_MAX] __attribute__((aligned(64))) = {0};
  for (int64_t j0 = 0; j0 < n; j0 += NC) {
    int64_t nc = n - j0 < NC ? n - j0 : NC;
    for (int64_t p0 = 0; p0 < k; p0 += KC) {
      int64_t kc = k - p0 < KC ? k - p0 : KC;
      int load = p0 > 0 || acc, last = p0 + kc >= k;
      pack(!rt, b, ldb, n, j0, round_up(nc, nr), p0, kc, nr, bpack);
      for (int64_t i0 = 0; i0 < m; i0 += MC) {
        int64_t mc = m - i0 < MC ? m - i0 : MC;
        pack(lt, a, lda, m, i0, round_up(mc, mr), p0, kc, mr, apack);
        for (int64_t ir = 0; ir < mc; ir += mr) {
          const float *ap = apack + ir * kc;
          int64_t rows = mc - ir < mr ? mc - ir : mr;
          for (int64_t jr = 0; jr < nc; jr += nr) {
            const float *bp = bpack + jr * kc;
            int64_t cols = nc - jr < nr ? nc - jr : nr;
            float *ct = c + (i0 + ir) * ldc + j0 + jr;
            kernel_fn part = kn->part[rows <= 4 ? 0 : rows <= 8 ? 1 : 2];
            if (cols == nr && (rows == mr || (mr == MR512 && rows % 4 == 0))) {
              (rows == mr ? kn->fn : part)(kc, ap, bp, ct, ldc, load);
              if (last) finish_tile(e, ct, ldc, rows, cols, j0 + jr);
              continue;
            }
            if (load)
              for (int64_t i = 0; i < rows; i++)
                memcpy(tile + i * nr, ct + i * ldc, sizeof(float) * (size_t)cols);
            part(kc, ap, bp, tile, nr, load);
            for (int64_t i = 0; i < rows; i++)
              memcpy(ct + i * ldc, tile + i * nr, sizeof(float) * (size_t)cols);
            if (last) finish_tile(e, ct, ldc, rows, cols, j0 + jr);
          }
        }
      }
    }
  }
  free(bpack);
  free(apack);
  return 1;
}

int jx_sgemm_packed_usable(void) { return chosen()->fn != NULL; }

const char *jx_sgemm_packed_kernel(void) { return chosen()->name; }

#else

int jx_sgemm_packed_usable(void) { return 0; }

int jx_sgemm_packed(int lt, int rt, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *c, int64_t ldc, const jx_gemm_epilogue *e) {
  (void)lt, (void)rt, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c,
      (void)ldc, (void)e;
  return 0;
}

const char *jx_sgemm_packed_kernel(void) { return "none"; }

int jx_sgemm_packed_use(const char *name) {
  (void)name;
  return 0;
}

#endif
