/* dot_general's two kernels, for dot.c's eval and for tests/unit/test_dot_blas.c.
 *
 * jx_dot_reference is the spec: plain loops for every dtype and
 * preferred_element_type the shape rule accepts. jx_dot_blas is the fast
 * path: float operands with a float result through cblas_sgemm/dgemm (and
 * gemv for matrix-vector shapes); it returns 0 without touching out when it
 * does not apply (integer or bool operands, sizes past BLAS's int, no BLAS
 * in the build, out of memory), and the caller runs the reference. Both take
 * in[2] and out[1] already checked by the shape rule; out is the result's
 * contiguous row-major storage. */
#ifndef JX_SRC_PRIMS_DOT_KERNELS_H
#define JX_SRC_PRIMS_DOT_KERNELS_H

#include "gemm_f32.h"
#include "prim.h"

/* The parameter list slots of dot_general (see its row's params string). */
enum { JX_DOT_LC, JX_DOT_RC, JX_DOT_LB, JX_DOT_RB };

/* 1 when the library was built with BLAS (jx_dot_blas can apply), else 0. */
extern const int jx_dot_have_blas;

void jx_dot_reference(const jx_params *p, const jx_tensor *in, jx_tensor *out);
int jx_dot_blas(const jx_params *p, const jx_tensor *in, jx_tensor *out);

/* n independent products (in[i]: the two operands of product i) at once:
 * the row blocks each GEMM would be split into alone (the same blocks, so
 * the same bits) are shared out over the pool together. Two products that
 * each need both threads split run side by side instead, one hand-off
 * rather than two and each thread's packed operand used for longer. Returns
 * 0 without writing any out when one of them is not a GEMM through BLAS
 * (a matrix-vector product, an empty one, integers, n > 8): the caller then
 * runs them one by one. */
int jx_dot_blas_side_by_side(int n, const jx_params *const *p, const jx_tensor *const *in,
                             jx_tensor *const *out);

/* 1 when dot_general's evaluation hands this float product to jx_dot_blas
 * rather than to dot_small.c's loops or the reference (shapes and dtypes
 * only: in's data is not read). */
int jx_dot_goes_to_blas(const jx_params *p, const jx_tensor *in, jx_dtype odt, jx_shape out);

/* An f32 x f32 -> f32 GEMM (M, N > 1, K > 0) with jx's GEMM's epilogue e
 * (gemm_f32.h) on out: the bias over the columns of each [M, N] product
 * (the last dim of out, which must be the rhs's one free dim), and with
 * e->accumulate the product added to out's values. Returns 0, writing
 * nothing, when it does not apply (other dtypes or shapes, jx's GEMM not
 * usable on this CPU, out of memory): the caller then runs the product and
 * its epilogue apart. */
int jx_dot_blas_epilogue(const jx_params *p, const jx_tensor *in, jx_tensor *out,
                         const jx_gemm_epilogue *e);

/* dot_general's eager evaluation of n independent products side by side
 * (dot.c): out[i] are new arrays of avals[i]. *ran = 0, and nothing is
 * made, when the products are not all GEMMs that eager evaluation would
 * hand to BLAS, or when the calling thread's parallel loops run on it
 * alone (a device thread of a mesh with a device per core or more, a pool
 * worker, a pool of one thread); the caller then binds them one by one. */
jx_status jx_dot_side_by_side(int n, const jx_params *const *p, jx_array *const *in,
                              const jx_aval *avals, jx_array **out, int *ran);

#endif
