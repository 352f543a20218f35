/* f32 products with a narrow side: C = A x B where K <= JX_SKINNY_MAX (a
 * rank-k update: an MLP's dlogits x W3^T, K = 10 classes) or N <=
 * JX_SKINNY_MAX (a few output columns: the logits h x W3 and the weight
 * gradient h^T x dlogits). OpenBLAS packs both operands into panels for
 * 16 x 6 micro-tiles: a narrow side fills a fraction of each tile and the
 * packing is paid for few flops, so these ran at 26-36 GFLOP/s where square
 * products reach 85 on the same core. The loops here keep the narrow
 * operand in L1 (packed once per call, a few KiB) and stream the wide one
 * through FMA registers.
 *
 * Each element of C is summed the same way wherever its row falls in a
 * block (whole vectors, then the same scalar FMA chain for the rest), so a
 * row's bits do not depend on how the caller splits the rows. */
#ifndef JX_SRC_PRIMS_DOT_SKINNY_H
#define JX_SRC_PRIMS_DOT_SKINNY_H

#include <stdint.h>

enum { JX_SKINNY_MAX = 16 };

/* Rows [0, m) of C = A x B, C row-major with row stride ldc, where
 *   A(i, kk) = lt ? a[kk * lda + i] : a[i * lda + kk],
 *   B(kk, j) = rt ? b[j * ldb + kk] : b[kk * ldb + j].
 * Returns 1 when it computed them; 0, writing nothing, when the product is
 * not narrow on one side (k <= JX_SKINNY_MAX with n >= 64, or n in [2,
 * JX_SKINNY_MAX] with k >= 64), the CPU lacks AVX2
 * and FMA, JX_DOT_SKINNY=0 is set (for comparisons; read at the first
 * product), or out of memory:
 * the caller then runs its GEMM. */
int jx_sgemm_skinny(int lt, int rt, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *c, int64_t ldc);

/* Calls of jx_sgemm_skinny that computed (for tests). */
int64_t jx_sgemm_skinny_calls(void);

#endif
