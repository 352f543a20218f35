/* The linear algebra primitives (this folder) and helpers their rules share.
 *
 * Each primitive works on the last two axes of its operands; leading axes are
 * batch axes, equal across operands, whose matrices the kernels factor in
 * parallel (below).
 *  - cholesky (cholesky.c): a[..., n, n] (f32, f64, c64, c128) -> lower factor L (upper triangle
 *    zero); a matrix that is not positive definite gives NaNs in its lower
 *    triangle;
 *  - triangular_solve (triangular_solve.c): (a, b) -> x, params
 *    left_side=i0 lower=i1 transpose_a=i2 unit_diagonal=i3 conjugate_a=i4,
 *    as lax.linalg.triangular_solve;
 *  - lu (lu.c): a[..., n, n] -> (lu, pivots i32[..., n], permutation
 *    i32[..., n]), as lax.linalg.lu;
 *  - eigh (eigh.c): a[..., n, n] -> (w [..., n] ascending, v [..., n, n]
 *    with the eigenvectors in its columns), from a's lower triangle;
 *  - qr (qr.c): a[..., m, n] -> (q [..., m, k], r [..., k, n]), k = m when
 *    full_matrices=i0, min(m, n) otherwise;
 *  - svd (svd.c): a[..., m, n] -> (s [..., k] descending, u [..., m, k],
 *    vt [..., k, n]), k = min(m, n); u [..., m, m] and vt [..., n, n] with
 *    full_matrices=i0; u [..., m, 0] and vt [..., 0, n] without compute_uv
 *    (i1 = 0);
 *  - pinv (pinv.c): a[..., m, n] -> its pseudo-inverse [..., n, m], the
 *    singular values at or below rtol=f0 times the largest dropped;
 *  - eig (eig.c): a[..., n, n] (f32, f64, c64 or c128) -> complex (w
 *    [..., n], vl, vr, vl^-1, vr^-1), the eigenvectors in the columns of
 *    [..., n, n] with compute_left=i0, compute_right=i1, inverses=i2 (empty
 *    [..., n, 0] otherwise); eigvec_derivs=i3 opts in to their derivatives.
 *
 * Every kernel factors the matrices of a stack in parallel over jx's pool
 * (jx_linalg_for_each_matrix). */
#ifndef JX_SRC_LINALG_LINALG_PRIMS_H
#define JX_SRC_LINALG_LINALG_PRIMS_H

#include "../array/dtype.h"
#include "../base/threadpool.h"
#include "../prims/prim.h"

extern const jx_prim jx_prim_cholesky, jx_prim_triangular_solve, jx_prim_lu, jx_prim_eigh,
    jx_prim_qr, jx_prim_svd, jx_prim_pinv, jx_prim_eig;

/* Checks that av is an f32/f64 stack of matrices (rank >= 2); records an
 * error naming op and the aval otherwise. */
jx_status jx_linalg_check_matrix(const char *op, const char *what, const jx_aval *av);
/* Checks that av is an f32/f64 stack of square matrices; records an error
 * naming op and the aval otherwise. */
jx_status jx_linalg_check_square(const char *op, const char *what, const jx_aval *av);
/* Checks that av is an f32/f64/c64/c128 stack of square matrices (eig's
 * operand); records an error naming op and the aval otherwise. */
jx_status jx_linalg_check_eig_operand(const char *op, const jx_aval *av);
/* As jx_linalg_check_matrix and jx_linalg_check_square, for the primitives
 * that also take complex matrices: av must be f32, f64, c64 or c128 (JAX's
 * inexact dtypes). */
jx_status jx_linalg_check_inexact_matrix(const char *op, const char *what, const jx_aval *av);
jx_status jx_linalg_check_inexact_square(const char *op, const char *what, const jx_aval *av);

/* The LAPACK/BLAS routine family of a dtype, the letter its routines start
 * with (s, d, c, z), for a kernel's switch. */
typedef enum { JX_LINALG_S, JX_LINALG_D, JX_LINALG_C, JX_LINALG_Z } jx_linalg_type;
static inline jx_linalg_type jx_linalg_type_of(jx_dtype dt) {
  return dt == JX_F64    ? JX_LINALG_D
         : dt == JX_C64  ? JX_LINALG_C
         : dt == JX_C128 ? JX_LINALG_Z
                         : JX_LINALG_S;
}

/* fn(ctx, b0, b1) over the matrices [0, count) of a stack, split among
 * jx's pool a matrix at a time at least, with OpenBLAS's own threads off so
 * that LAPACK on the pool's threads does not oversubscribe the cores. fn
 * allocates its own scratch (it runs on several threads at once). */
void jx_linalg_for_each_matrix(int64_t count, jx_range_fn fn, void *ctx);
/* What LAPACK's ormqr and ormlq add to the workspace for their T block
 * (LDT * NBMAX = 65 * 64 entries) beyond what ormbr's and ormtr's queries
 * report: given only the reported size, they shrink their block size, and
 * the result's bits change with it. */
enum { JX_LINALG_ORM_TSIZE = 65 * 64 };
/* A lone matrix's back-transformation (svd's ormbr, eigh's ormtr) applies
 * to its k vectors in blocks spread over the pool: the number of blocks for
 * k vectors (about 256 each, at most 8; narrower blocks cost OpenBLAS's GEMM
 * more per vector: 4 blocks of 128 took 1.16x one of 512 on one thread),
 * and block b's vectors [*v0, *v1), its bounds at multiples of 64 (where a
 * narrower GEMM rounds as the whole one does more often). Both follow from
 * k alone, so the bits depend on neither the threads nor the load. */
int64_t jx_linalg_vector_blocks(int64_t k);
void jx_linalg_vector_block(int64_t k, int64_t blocks, int64_t b, int64_t *v0, int64_t *v1);
/* The most vectors a block holds (the workspace each needs). */
int64_t jx_linalg_widest_vector_block(int64_t k, int64_t blocks);
/* Number of matrices in a stack of shape s (product of all but the last two dims). */
int64_t jx_linalg_batch_count(jx_shape s);

/* x with the entries outside a band zeroed: the lower triangle (lower: row +
 * k >= col) or the upper one (row + k <= col) of the last two axes. */
jx_array *jx_linalg_triangle(jx_array *x, int lower, int k);
/* The diagonal of x's last two axes (square): [..., n]. */
jx_array *jx_linalg_diagonal(jx_array *x);
/* The block x[..., r0:r1, c0:c1] of x's last two axes. */
jx_array *jx_linalg_block(jx_array *x, int64_t r0, int64_t r1, int64_t c0, int64_t c1);
/* x with its last two axes swapped. */
jx_array *jx_linalg_swap_last(jx_array *x);
/* The adjoint (conjugate transpose) of x's last two axes, JAX's _H: the
 * transpose for a real x. */
jx_array *jx_linalg_adjoint(jx_array *x);
/* (x + x^H) / 2: JAX's symmetrize, the Hermitian (real: symmetric) part of
 * x's square matrices. */
jx_array *jx_linalg_hermitian_part(jx_array *x);
/* The identity of x's last two axes (square), in x's dtype. */
jx_array *jx_linalg_eye_like(jx_array *x);
/* The rows of x (second-to-last axis) in the order of perm (i32[..., m], one
 * permutation per matrix, x's batch dims): row i of the result is row
 * perm[i] of x. A gather (take_along_axis), whose transpose is a scatter-add,
 * batched like any gather. */
jx_array *jx_linalg_permute_rows(jx_array *x, jx_array *perm);
/* triangular_solve applied with params p. */
jx_array *jx_linalg_bind_triangular_solve(jx_array *a, jx_array *b, const jx_params *p);

#endif
