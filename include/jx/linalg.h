/* jx/linalg.h: linear algebra on matrices in the last two axes, as
 * jax.lax.linalg and jax.numpy.linalg, for f32 and f64 (LAPACK underneath);
 * cholesky, triangular_solve, lu, solve, inv, det, slogdet, matrix_power,
 * expm, the norms and eig also for c64 and c128.
 *
 * Every function works on a stack of matrices: leading axes are batch axes,
 * the same for every operand. A factorization that fails (cholesky of a
 * matrix that is not positive definite) gives NaNs in that matrix's result,
 * as JAX does; it is not an error. Every function is differentiable (JVP and
 * VJP) and batches under vmap. */
#ifndef JX_LINALG_H
#define JX_LINALG_H

#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The lower Cholesky factor L of a symmetric (complex: Hermitian) positive
 * definite a[..., n, n]: a = L L^H, the strict upper triangle of L zero. As
 * jnp.linalg.cholesky, a is symmetrized first ((a + a^H) / 2), so only its
 * Hermitian part matters and derivatives stay Hermitian. */
JX_API jx_array *jx_linalg_cholesky(jx_array *a);
/* jx_linalg_cholesky with jnp.linalg.cholesky's options: upper gives U =
 * L^H (a = U^H U); without symmetrize_input only a's lower triangle is read
 * (and, as in JAX, the derivative takes the tangent as it is). */
JX_API jx_array *jx_linalg_cholesky_ex(jx_array *a, int upper, int symmetrize_input);

/* x solving op(a) x = b (left_side) or x op(a) = b (otherwise), where op(a)
 * is a or its transpose (transpose_a) and a[..., m, m] is lower or upper
 * triangular (lower); only that triangle of a is read, and its diagonal is
 * taken to be ones when unit_diagonal is set. b is [..., m, n] (left_side) or
 * [..., n, m]. As jax.lax.linalg.triangular_solve (whose left_side defaults
 * to 0). */
JX_API jx_array *jx_linalg_triangular_solve(jx_array *a, jx_array *b, int left_side, int lower,
                                            int transpose_a, int unit_diagonal);
/* jx_linalg_triangular_solve with lax.linalg.triangular_solve's conjugate_a:
 * op(a) conjugated, so a^H with transpose_a (no effect on a real a). */
JX_API jx_array *jx_linalg_triangular_solve_ex(jx_array *a, jx_array *b, int left_side, int lower,
                                               int transpose_a, int conjugate_a, int unit_diagonal);

/* The LU factorization with partial pivoting of a[..., n, n], as
 * jax.lax.linalg.lu: P a = L U with lu holding L's strict lower triangle (L's
 * diagonal is ones) and U's upper one, pivots (i32[..., n]) the row swapped
 * with row i at step i, permutation (i32[..., n]) the rows of a in P a's
 * order. A singular matrix factors all the same (a zero on U's diagonal). */
JX_API jx_status jx_linalg_lu(jx_array *a, jx_array **lu, jx_array **pivots,
                              jx_array **permutation);

/* x with a x = b (jnp.linalg.solve) through a's LU factors: b is [..., n, k]
 * or a vector [..., n], with a's batch dims and dtype. */
JX_API jx_array *jx_linalg_solve(jx_array *a, jx_array *b);
/* The inverse of each matrix of a[..., n, n] (jnp.linalg.inv). */
JX_API jx_array *jx_linalg_inv(jx_array *a);
/* The determinant of each matrix, [...] (jnp.linalg.det), from its LU
 * factors. */
JX_API jx_array *jx_linalg_det(jx_array *a);
/* The sign (+1, -1, or 0 for a singular matrix) and log |det| (-inf when
 * singular) of each matrix, [...] each (jnp.linalg.slogdet). */
JX_API jx_status jx_linalg_slogdet(jx_array *a, jx_array **sign, jx_array **logabsdet);

/* The eigenvalues w [...,n], ascending, and eigenvectors v [..., n, n] (in
 * its columns, orthonormal: a = v diag(w) v^T) of each symmetric matrix of
 * a[..., n, n], as jnp.linalg.eigh: a is symmetrized first ((a + a^T) / 2).
 * The eigenvectors' signs are LAPACK's (syevd), so compare sign-invariant
 * quantities. The derivative of v is infinite/NaN where eigenvalues are
 * equal, as JAX's. */
JX_API jx_status jx_linalg_eigh(jx_array *a, jx_array **w, jx_array **v);
/* The eigenvalues alone (jnp.linalg.eigvalsh), [..., n] ascending. */
JX_API jx_array *jx_linalg_eigvalsh(jx_array *a);

/* The eigenvalues w [..., n] and right eigenvectors v [..., n, n] (in its
 * columns: a v_j = w_j v_j) of each general square matrix of a[..., n, n],
 * as jnp.linalg.eig. The results are complex: c64 for f32 and c64 input,
 * c128 for f64 and c128. The eigenvalues come in LAPACK's order (geev's,
 * not sorted) and each eigenvector has unit 2-norm and its largest component
 * real, as JAX's on CPU. Only w is differentiable, as in JAX: differentiating
 * v is an error (jx_linalg_eig_ex opts in). A matrix holding a NaN gives
 * NaNs. */
JX_API jx_status jx_linalg_eig(jx_array *a, jx_array **w, jx_array **v);
/* The eigenvalues alone (jnp.linalg.eigvals), complex [..., n], differentiable. */
JX_API jx_array *jx_linalg_eigvals(jx_array *a);

/* jx_linalg_eig_ex's options, as jax.lax.linalg.eig's arguments. Zeroed,
 * only the eigenvalues are computed; NULL is JAX's default (both sets of
 * eigenvectors, no eigenvector derivatives). */
typedef struct {
  int compute_left_eigenvectors;  /* vl: u_j^H a = w_j u_j^H, u_j in vl's columns */
  int compute_right_eigenvectors; /* vr: a v_j = w_j v_j */
  /* Differentiate the eigenvectors under geev's normalization (unit norm,
   * largest component real). Valid only where every eigenvalue is distinct
   * and no eigenvector has two components tied for the largest magnitude,
   * which jx cannot check; without it their derivative is an error. */
  int enable_eigvec_derivs;
} jx_eig_options;

/* The eigendecomposition of each general square matrix of a[..., n, n], as
 * jax.lax.linalg.eig: w [..., n] and, as opts asks, vl and vr [..., n, n],
 * all complex (see jx_linalg_eig). Outputs not asked for are left alone (and
 * may be NULL). */
JX_API jx_status jx_linalg_eig_ex(jx_array *a, const jx_eig_options *opts, jx_array **w,
                                  jx_array **vl, jx_array **vr);

/* The QR factorization a = q r of each matrix of a[..., m, n], as
 * jnp.linalg.qr: q [..., m, k] has orthonormal columns and r [..., k, n] is
 * upper triangular, with k = min(m, n) (mode "reduced", full_matrices 0) or
 * k = m (mode "complete"). The signs are LAPACK's (geqrf), as JAX's on CPU. */
JX_API jx_status jx_linalg_qr(jx_array *a, int full_matrices, jx_array **q, jx_array **r);

/* The singular value decomposition a = u diag(s) vh of each matrix of
 * a[..., m, n], as jnp.linalg.svd: s [..., k] descending, k = min(m, n); u
 * [..., m, k] and vh [..., k, n] with orthonormal columns and rows, or u
 * [..., m, m] and vh [..., n, n] with full_matrices. With compute_uv 0 only s
 * is computed (u and vh may be NULL and are left alone). The signs of u's
 * columns and vh's rows are LAPACK's (gesdd), as JAX's on CPU; compare
 * sign-invariant quantities. As JAX, the derivative of u and vh with
 * full_matrices of a non-square matrix is not implemented (an error), and
 * that of u and vh is infinite/NaN where singular values are equal. A matrix
 * holding a NaN gives NaNs, not an error. */
JX_API jx_status jx_linalg_svd(jx_array *a, int full_matrices, int compute_uv, jx_array **u,
                               jx_array **s, jx_array **vh);
/* jx_linalg_svd with jnp.linalg.svd's hermitian: a symmetric (square; its
 * symmetric part is what counts) is decomposed by eigh, s = |w| descending,
 * u the eigenvectors in that order and vh = (u diag(sign(w)))^T, composed as
 * JAX composes it (full_matrices makes no difference); differentiable
 * through eigh. hermitian 0 is jx_linalg_svd. */
JX_API jx_status jx_linalg_svd_ex(jx_array *a, int full_matrices, int compute_uv, int hermitian,
                                  jx_array **u, jx_array **s, jx_array **vh);
/* The rank of each matrix of a[..., m, n], i32 [...] (i64 under x64), as
 * jnp.linalg.matrix_rank: the count of singular values (|eigenvalues| with
 * hermitian) above the largest times max(m, n) eps (rtol NAN), or above
 * rtol itself, as JAX compares a given rtol (not scaled). A vector or a
 * scalar has rank 1 unless it is all zeros (an i32 scalar). */
JX_API jx_array *jx_linalg_matrix_rank(jx_array *a, double rtol, int hermitian);
/* The singular values alone, [..., min(m, n)] descending (jnp.linalg.svdvals). */
JX_API jx_array *jx_linalg_svdvals(jx_array *a);

/* The Moore-Penrose pseudo-inverse [..., n, m] of each matrix of a[..., m,
 * n], as jnp.linalg.pinv: from the SVD, singular values at or below rtol
 * times the largest dropped; rtol NAN is JAX's default, 10 max(m, n) eps of
 * a's dtype. Its derivative is JAX's custom JVP (finite where the SVD's is
 * not). */
JX_API jx_array *jx_linalg_pinv(jx_array *a, double rtol);
/* jx_linalg_pinv with jnp.linalg.pinv's hermitian: a symmetric (square; its
 * symmetric part counts) is decomposed by syevd instead of gesdd, the
 * singular values being |w|. The JVP is the same custom one, taken on the
 * symmetric parts of a and its tangent, as JAX's. */
JX_API jx_array *jx_linalg_pinv_ex(jx_array *a, double rtol, int hermitian);

/* The least-squares solution x of a x = b, as jnp.linalg.lstsq: a [m, n]
 * (one matrix, as in JAX; vmap for a stack), b [m] or [m, k] of a's dtype;
 * x [n] or [n, k], residuals [1] or [k] (|b - a x|^2 per column, in every
 * case, as JAX: not NumPy's empty ones), rank (i32 scalar: the singular
 * values above rcond times the largest) and s (a's singular values, [min(m,
 * n)] descending). rcond NAN is JAX's default, eps max(m, n); a negative
 * rcond is eps. Differentiable through the SVD, as JAX's. */
JX_API jx_status jx_linalg_lstsq(jx_array *a, jx_array *b, double rcond, jx_array **x,
                                 jx_array **residuals, jx_array **rank, jx_array **s);

/* a to the integer power n of each matrix of a[..., m, m], as
 * jnp.linalg.matrix_power: the identity for n = 0, powers of the inverse for
 * n < 0, binary powering (the products JAX forms) otherwise. */
JX_API jx_array *jx_linalg_matrix_power(jx_array *a, int64_t n);

/* The matrix exponential of each matrix of a[..., m, m], as
 * jax.scipy.linalg.expm: a Pade approximant of degree 3, 5, 7, 9 or 13 (3, 5
 * or 7 for f32) picked by a's 1-norm, with scaling and squaring (at most 16
 * squarings; a matrix that needs more gives NaNs, as JAX). Differentiable,
 * batched and jitted by composition. */
JX_API jx_array *jx_linalg_expm(jx_array *a);
/* jx_linalg_expm with jax.scipy.linalg.expm's options: upper_triangular
 * (a is upper triangular: the approximant's q^-1 p is one triangular solve
 * reading q's upper triangle, not an LU solve) and max_squarings (JAX's
 * default is 16; more squarings needed give NaNs). */
JX_API jx_array *jx_linalg_expm_ex(jx_array *a, int upper_triangular, int max_squarings);

/* The ord-norm of each vector in x's last axis, [...] (jnp.linalg.vector_norm
 * with axis=-1): ord 2 (Euclidean), 1, INFINITY (max |x|), -INFINITY
 * (min |x|), 0 (the count of nonzeros) or any other p ((sum |x|^p)^(1/p)).
 * Differentiable as JAX's: the 2-norm's gradient at 0 is NaN. */
JX_API jx_array *jx_linalg_vector_norm(jx_array *x, double ord);

/* The matrix norms jx_linalg_matrix_norm computes, as jnp.linalg.norm's ord
 * for a matrix. */
typedef enum {
  JX_NORM_FRO,     /* "fro": sqrt of the sum of squares */
  JX_NORM_1,       /* 1: the largest column sum of |x| */
  JX_NORM_NEG_1,   /* -1: the smallest column sum */
  JX_NORM_INF,     /* inf: the largest row sum of |x| */
  JX_NORM_NEG_INF, /* -inf: the smallest row sum */
  JX_NORM_NUC,     /* "nuc": the sum of the singular values */
  JX_NORM_2,       /* 2: the largest singular value */
  JX_NORM_NEG_2,   /* -2: the smallest singular value */
} jx_matrix_norm_ord;

/* The ord-norm of each matrix in x's last two axes, [...]
 * (jnp.linalg.matrix_norm). */
JX_API jx_array *jx_linalg_matrix_norm(jx_array *x, jx_matrix_norm_ord ord);

#ifndef JX_NO_LOCATION_MACROS
#define jx_linalg_cholesky(...)            JX_LOCATED(jx_linalg_cholesky, __VA_ARGS__)
#define jx_linalg_cholesky_ex(...)         JX_LOCATED(jx_linalg_cholesky_ex, __VA_ARGS__)
#define jx_linalg_triangular_solve(...)    JX_LOCATED(jx_linalg_triangular_solve, __VA_ARGS__)
#define jx_linalg_triangular_solve_ex(...) JX_LOCATED(jx_linalg_triangular_solve_ex, __VA_ARGS__)
#define jx_linalg_lu(...)                  JX_LOCATED_STATUS(jx_linalg_lu, __VA_ARGS__)
#define jx_linalg_solve(...)               JX_LOCATED(jx_linalg_solve, __VA_ARGS__)
#define jx_linalg_inv(...)                 JX_LOCATED(jx_linalg_inv, __VA_ARGS__)
#define jx_linalg_det(...)                 JX_LOCATED(jx_linalg_det, __VA_ARGS__)
#define jx_linalg_slogdet(...)             JX_LOCATED_STATUS(jx_linalg_slogdet, __VA_ARGS__)
#define jx_linalg_eigh(...)                JX_LOCATED_STATUS(jx_linalg_eigh, __VA_ARGS__)
#define jx_linalg_eigvalsh(...)            JX_LOCATED(jx_linalg_eigvalsh, __VA_ARGS__)
#define jx_linalg_eig(...)                 JX_LOCATED_STATUS(jx_linalg_eig, __VA_ARGS__)
#define jx_linalg_eigvals(...)             JX_LOCATED(jx_linalg_eigvals, __VA_ARGS__)
#define jx_linalg_eig_ex(...)              JX_LOCATED_STATUS(jx_linalg_eig_ex, __VA_ARGS__)
#define jx_linalg_qr(...)                  JX_LOCATED_STATUS(jx_linalg_qr, __VA_ARGS__)
#define jx_linalg_svd(...)                 JX_LOCATED_STATUS(jx_linalg_svd, __VA_ARGS__)
#define jx_linalg_svd_ex(...)              JX_LOCATED_STATUS(jx_linalg_svd_ex, __VA_ARGS__)
#define jx_linalg_matrix_rank(...)         JX_LOCATED(jx_linalg_matrix_rank, __VA_ARGS__)
#define jx_linalg_svdvals(...)             JX_LOCATED(jx_linalg_svdvals, __VA_ARGS__)
#define jx_linalg_pinv(...)                JX_LOCATED(jx_linalg_pinv, __VA_ARGS__)
#define jx_linalg_pinv_ex(...)             JX_LOCATED(jx_linalg_pinv_ex, __VA_ARGS__)
#define jx_linalg_lstsq(...)               JX_LOCATED_STATUS(jx_linalg_lstsq, __VA_ARGS__)
#define jx_linalg_matrix_power(...)        JX_LOCATED(jx_linalg_matrix_power, __VA_ARGS__)
#define jx_linalg_expm(...)                JX_LOCATED(jx_linalg_expm, __VA_ARGS__)
#define jx_linalg_expm_ex(...)             JX_LOCATED(jx_linalg_expm_ex, __VA_ARGS__)
#define jx_linalg_vector_norm(...)         JX_LOCATED(jx_linalg_vector_norm, __VA_ARGS__)
#define jx_linalg_matrix_norm(...)         JX_LOCATED(jx_linalg_matrix_norm, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
