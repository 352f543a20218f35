/* jx's own f32 GEMM: C = A x B in packed blocks (B in kc x NR panels, A in
 * mc x kc blocks of MR-row panels) through an AVX-512 or AVX2 + FMA
 * micro-kernel chosen at run time, with an epilogue applied to each C tile
 * while it is in cache, after its last K panel: what a BLAS call cannot do.
 *
 *  - beta = 0 needs no zeroing pass: the first K panel starts from zero;
 *  - accumulate: C += A x B into C's existing values (a residual x + h W
 *    written into x's buffer), the first panel starting from C;
 *  - bias: C(i, j) += bias[j] on each tile after its sums.
 *
 * Each element of C is one FMA chain over k in order, started from 0 (or
 * from C's value when accumulating), wherever its tile falls: a row's (and
 * a column's) bits do not depend on how the caller splits C into blocks. */
#ifndef JX_SRC_PRIMS_GEMM_F32_H
#define JX_SRC_PRIMS_GEMM_F32_H

#include <stdint.h>

/* What is done to C's tiles: C = A B (accumulate 0) or C += A B
 * (accumulate 1), then C(i, j) += bias[j] when bias is not NULL. */
typedef struct {
  int accumulate;
  const float *bias; /* n floats, or NULL */
} jx_gemm_epilogue;

/* 1 when jx_sgemm_packed runs here: the CPU has AVX2 and FMA (or
 * AVX-512F). JX_GEMM=0 turns it off (read once). */
int jx_sgemm_packed_usable(void);

/* Rows [0, m) of C = A x B with the epilogue e (NULL: C = A B), C row-major
 * with row stride ldc, where
 *   A(i, kk) = lt ? a[kk * lda + i] : a[i * lda + kk],
 *   B(kk, j) = rt ? b[j * ldb + kk] : b[kk * ldb + j].
 * Returns 1 when it computed them; 0, writing nothing, when it is not
 * usable here or out of memory: the caller then runs BLAS. */
int jx_sgemm_packed(int lt, int rt, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *c, int64_t ldc, const jx_gemm_epilogue *e);

/* The micro-kernel jx_sgemm_packed runs: "avx512", "avx2" or "none". */
const char *jx_sgemm_packed_kernel(void);

/* For tests and benchmarks: runs the micro-kernel named ("avx512" or
 * "avx2") from now on; 0, changing nothing, when this CPU cannot (or
 * JX_GEMM=0). Both kernels give the same bits: each sums a K panel as one
 * FMA chain in k order from zero and adds it to C. */
int jx_sgemm_packed_use(const char *name);

#endif
