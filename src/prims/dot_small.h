/* Small f32 products, C = A x B with A [m, k], B [k, n] and C [m, n] all
 * contiguous row-major: the contractions too small for BLAS to pay for its
 * packing and dispatch (dot.c sends f32 ones of fewer than 2^15
 * multiply-adds here). Each element of C is one FMA chain over k in order,
 * in a vector lane or in the scalar tail alike, so its bits do not depend
 * on n or on where its column falls. Returns 1 when it computed C; 0,
 * writing nothing, when the CPU lacks AVX2 and FMA (the caller then runs
 * the reference kernel). */
#ifndef JX_SRC_PRIMS_DOT_SMALL_H
#define JX_SRC_PRIMS_DOT_SMALL_H

#include <stdint.h>

int jx_sgemm_small(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c);

/* Calls of jx_sgemm_small that computed (for tests). */
int64_t jx_sgemm_small_calls(void);

#endif
