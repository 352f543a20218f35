/* f32 row vector times a row-major matrix, c[N] = x[K] W[K, N]: a decode
 * step's projections at batch 1 (x @ w for every weight), which read each
 * weight once and so run at the speed W streams from memory.
 *
 * The loops stream W's rows in order, eight at a time, into sums kept in L1
 * (N floats), so the reads are sequential whatever N is; and each output
 * is summed in k order as one FMA chain, so its bits do not depend on how
 * the caller splits the columns (dot_blas.c shares the columns of a large
 * one out over jx's pool, each thread streaming its part of every row). */
#ifndef JX_SRC_PRIMS_DOT_GEMV_H
#define JX_SRC_PRIMS_DOT_GEMV_H

#include <stdint.h>

/* Columns [j0, j1) of c = x W, x[kk] = x[kk * incx], W(kk, j) = w[kk * ldw
 * + j]. Returns 1 when it computed them; 0, writing nothing, when the CPU
 * lacks AVX2 and FMA (the caller then runs BLAS's gemv). */
int jx_sgemv_rows(int64_t j0, int64_t j1, int64_t k, const float *x, int64_t incx, const float *w,
                  int64_t ldw, float *c);

#endif
