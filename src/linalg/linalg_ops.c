/* The public linear algebra functions (jx/linalg.h): argument checks named
 * after the caller's function, then the primitives. */
#include <float.h>
#include <math.h>

#include <jx/linalg.h>
#include <jx/ops.h>

#include "../base/error.h"
#include "../trace/dispatch.h"
#include "linalg_prims.h"

/* Checks a as f32/f64/c64/c128 square matrices for op; 0 when fine. */
static jx_status check_inexact(const char *op, const char *what, jx_array *a) {
  jx_aval av = {a->dtype, a->weak, a->shape, 0};
  return jx_linalg_check_inexact_square(op, what, &av);
}

/* The machine epsilon of a float dtype (jnp.finfo(dt).eps). */
static double eps_of(jx_dtype dt) { return dt == JX_F64 ? DBL_EPSILON : FLT_EPSILON; }

/* (a + a^H) / 2: jnp.linalg's symmetrize_input, so only the Hermitian part
 * counts and derivatives stay Hermitian. */
static jx_array *symmetrize(jx_array *a) { return jx_linalg_hermitian_part(a); }

static jx_array *cholesky(const char *op, jx_array *a, int upper, int symmetrize_input) {
  if (jx_check_inputs(op, 1, &a) || check_inexact(op, "operand", a)) return jx_poison();
  jx_array *in = symmetrize_input ? symmetrize(a) : a;
  jx_params p = JX_PARAMS_INIT;
  jx_array *l = jx_bind1(&jx_prim_cholesky, 1, &in, &p);
  return upper ? jx_linalg_adjoint(l) : l;
}

jx_array *jx_linalg_cholesky(jx_array *a) { return cholesky("jx_linalg_cholesky", a, 0, 1); }

jx_array *jx_linalg_cholesky_ex(jx_array *a, int upper, int symmetrize_input) {
  return cholesky("jx_linalg_cholesky_ex", a, upper, symmetrize_input);
}

static jx_array *triangular_solve(const char *op, jx_array *a, jx_array *b, int left_side,
                                  int lower, int transpose_a, int conjugate_a, int unit_diagonal) {
  jx_array *in[2] = {a, b};
  if (jx_check_inputs(op, 2, in) || check_inexact(op, "a", a)) return jx_poison();
  /* b's fit to a is the primitive's shape rule */
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = left_side != 0;
  p.i[1] = lower != 0;
  p.i[2] = transpose_a != 0;
  p.i[3] = unit_diagonal != 0;
  p.i[4] = conjugate_a != 0;
  return jx_bind1(&jx_prim_triangular_solve, 2, in, &p);
}

jx_array *jx_linalg_triangular_solve(jx_array *a, jx_array *b, int left_side, int lower,
                                     int transpose_a, int unit_diagonal) {
  return triangular_solve("jx_linalg_triangular_solve", a, b, left_side, lower, transpose_a, 0,
                          unit_diagonal);
}

jx_array *jx_linalg_triangular_solve_ex(jx_array *a, jx_array *b, int left_side, int lower,
                                        int transpose_a, int conjugate_a, int unit_diagonal) {
  return triangular_solve("jx_linalg_triangular_solve_ex", a, b, left_side, lower, transpose_a,
                          conjugate_a, unit_diagonal);
}

jx_status jx_linalg_lu(jx_array *a, jx_array **lu, jx_array **pivots, jx_array **permutation) {
  const char *op = "jx_linalg_lu";
  if (!lu || !pivots || !permutation)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: an output pointer is NULL", op);
  *lu = *pivots = *permutation = jx_poison();
  jx_status st = jx_check_inputs(op, 1, &a);
  if (!st) st = check_inexact(op, "operand", a);
  if (st) return st;
  jx_params p = JX_PARAMS_INIT;
  jx_array *out[3];
  st = jx_bind(&jx_prim_lu, 1, &a, &p, out);
  *lu = out[0];
  *pivots = out[1];
  *permutation = out[2];
  return st;
}

/* x with a x = b through a's LU factors; b [..., m, k], of a's batch dims. */
static jx_array *lu_solve(jx_array *lu, jx_array *permutation, jx_array *b) {
  jx_params unit_lower = JX_PARAMS_INIT, upper = JX_PARAMS_INIT;
  unit_lower.i[0] = unit_lower.i[1] = unit_lower.i[3] = 1; /* L y = P b */
  upper.i[0] = 1;                                          /* U x = y */
  jx_array *y =
      jx_linalg_bind_triangular_solve(lu, jx_linalg_permute_rows(b, permutation), &unit_lower);
  return jx_linalg_bind_triangular_solve(lu, y, &upper);
}

jx_array *jx_linalg_solve(jx_array *a, jx_array *b) {
  const char *op = "jx_linalg_solve";
  jx_array *in[2] = {a, b};
  if (jx_check_inputs(op, 2, in) || check_inexact(op, "a", a)) return jx_poison();
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  int r = a->shape.rank, vector = b->shape.rank == r - 1;
  int ok = b->dtype == a->dtype && (vector || b->shape.rank == r);
  for (int d = 0; ok && d < r - 2; d++) ok = b->shape.dims[d] == a->shape.dims[d];
  if (ok) ok = b->shape.dims[r - 2] == a->shape.dims[r - 1];
  if (!ok) {
    jx_error_set(JX_ERR_SHAPE,
                 "%s: b %s does not fit a %s: b must have a's dtype and batch dims, and be "
                 "[..., m] or [..., m, k] for a [..., m, m]",
                 op, jx_aval_str(b->dtype, b->shape, sb), jx_aval_str(a->dtype, a->shape, sa));
    return jx_poison();
  }
  jx_array *lu, *pivots, *perm;
  if (jx_linalg_lu(a, &lu, &pivots, &perm)) return jx_poison();
  if (!vector) return lu_solve(lu, perm, b);
  return jx_squeeze(lu_solve(lu, perm, jx_expand_dims(b, r - 1)), JX_AXES(r - 1));
}

jx_array *jx_linalg_inv(jx_array *a) {
  const char *op = "jx_linalg_inv";
  if (jx_check_inputs(op, 1, &a) || check_inexact(op, "operand", a)) return jx_poison();
  jx_array *lu, *pivots, *perm;
  if (jx_linalg_lu(a, &lu, &pivots, &perm)) return jx_poison();
  return lu_solve(lu, perm, jx_broadcast_to(jx_linalg_eye_like(a), a->shape));
}

/* The sign of the row permutation of pivots (+-1, in dt) and U's diagonal. */
static void lu_parts(jx_array *lu, jx_array *pivots, jx_array **parity_sign, jx_array **diag) {
  int r = lu->shape.rank;
  jx_array *swapped = jx_ne(pivots, jx_iota(JX_I32, pivots->shape, r - 2));
  jx_array *flip =
      jx_where(swapped, jx_full(lu->dtype, JX_SHAPE(), -1), jx_full(lu->dtype, JX_SHAPE(), 1));
  *parity_sign = jx_prod(flip, JX_AXES(r - 2), 0);
  *diag = jx_linalg_diagonal(lu);
}

jx_array *jx_linalg_det(jx_array *a) {
  const char *op = "jx_linalg_det";
  if (jx_check_inputs(op, 1, &a) || check_inexact(op, "operand", a)) return jx_poison();
  jx_array *lu, *pivots, *perm, *sign, *diag;
  if (jx_linalg_lu(a, &lu, &pivots, &perm)) return jx_poison();
  lu_parts(lu, pivots, &sign, &diag);
  return jx_mul(sign, jx_prod(diag, JX_AXES(a->shape.rank - 2), 0));
}

jx_status jx_linalg_slogdet(jx_array *a, jx_array **sign, jx_array **logabsdet) {
  const char *op = "jx_linalg_slogdet";
  if (!sign || !logabsdet)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: an output pointer is NULL", op);
  *sign = *logabsdet = jx_poison();
  jx_status st = jx_check_inputs(op, 1, &a);
  if (!st) st = check_inexact(op, "operand", a);
  if (st) return st;
  jx_array *lu, *pivots, *perm, *parity, *diag;
  if ((st = jx_linalg_lu(a, &lu, &pivots, &perm))) return st;
  lu_parts(lu, pivots, &parity, &diag);
  int ax = a->shape.rank - 2;
  jx_array *abs_diag = jx_abs(diag);
  *logabsdet = jx_sum(jx_log(abs_diag), JX_AXES(ax), 0);
  if (!jx_is_complex(a->dtype)) {
    *sign = jx_mul(parity, jx_prod(jx_sign(diag), JX_AXES(ax), 0));
    return jx_last_status();
  }
  /* complex: the product of diag / |diag| (JAX's composition, so the sign
   * has JAX's derivative), 0 where a pivot is 0 */
  jx_array *zero = jx_zeros(a->dtype, JX_SHAPE());
  jx_array *singular = jx_any(jx_eq(diag, zero), JX_AXES(ax), 0);
  jx_array *unit = jx_prod(jx_div(diag, jx_astype(abs_diag, a->dtype)), JX_AXES(ax), 0);
  *sign = jx_where(singular, zero, jx_mul(parity, unit));
  return jx_last_status();
}

jx_status jx_linalg_eigh(jx_array *a, jx_array **w, jx_array **v) {
  const char *op = "jx_linalg_eigh";
  if (!w || !v) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: an output pointer is NULL", op);
  *w = *v = jx_poison();
  jx_status st = jx_check_inputs(op, 1, &a);
  if (!st) st = check_inexact(op, "operand", a);
  if (st) return st;
  jx_array *sym = symmetrize(a), *out[2];
  jx_params p = JX_PARAMS_INIT;
  st = jx_bind(&jx_prim_eigh, 1, &sym, &p, out);
  *w = out[0];
  *v = out[1];
  return st;
}

jx_array *jx_linalg_eigvalsh(jx_array *a) {
  const char *op = "jx_linalg_eigvalsh";
  if (jx_check_inputs(op, 1, &a) || check_inexact(op, "operand", a)) return jx_poison();
  jx_array *out[2], *sym = symmetrize(a);
  jx_params p = JX_PARAMS_INIT;
  if (jx_bind(&jx_prim_eigh, 1, &sym, &p, out)) return jx_poison();
  return out[0];
}

/* eig for op: w, and vl, vr where asked (NULL where not). */
static jx_status eig(const char *op, jx_array *a, int left, int right, int derivs, jx_array **w,
                     jx_array **vl, jx_array **vr) {
  if (!w || (left && !vl) || (right && !vr))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: an output pointer is NULL", op);
  *w = jx_poison();
  if (left) *vl = jx_poison();
  if (right) *vr = jx_poison();
  jx_status st = jx_check_inputs(op, 1, &a);
  if (st) return st;
  jx_aval av = {a->dtype, a->weak, a->shape, 0};
  if ((st = jx_linalg_check_eig_operand(op, &av))) return st;
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = left;
  p.i[1] = right;
  p.i[3] = derivs;
  jx_array *out[5];
  if ((st = jx_bind(&jx_prim_eig, 1, &a, &p, out))) return st;
  *w = out[0];
  if (left) *vl = out[1];
  if (right) *vr = out[2];
  return JX_OK;
}

jx_status jx_linalg_eig_ex(jx_array *a, const jx_eig_options *opts, jx_array **w, jx_array **vl,
                           jx_array **vr) {
  static const jx_eig_options jax_default = {1, 1, 0};
  if (!opts) opts = &jax_default;
  return eig("jx_linalg_eig_ex", a, opts->compute_left_eigenvectors != 0,
             opts->compute_right_eigenvectors != 0, opts->enable_eigvec_derivs != 0, w, vl, vr);
}

jx_status jx_linalg_eig(jx_array *a, jx_array **w, jx_array **v) {
  return eig("jx_linalg_eig", a, 0, 1, 0, w, NULL, v);
}

jx_array *jx_linalg_eigvals(jx_array *a) {
  jx_array *w;
  return eig("jx_linalg_eigvals", a, 0, 0, 0, &w, NULL, NULL) ? jx_poison() : w;
}

jx_status jx_linalg_qr(jx_array *a, int full_matrices, jx_array **q, jx_array **r) {
  const char *op = "jx_linalg_qr";
  if (!q || !r) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: an output pointer is NULL", op);
  *q = *r = jx_poison();
  jx_status st = jx_check_inputs(op, 1, &a);
  if (st) return st;
  jx_aval av = {a->dtype, a->weak, a->shape, 0};
  if ((st = jx_linalg_check_inexact_matrix(op, "operand", &av))) return st;
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = full_matrices != 0;
  jx_array *out[2];
  st = jx_bind(&jx_prim_qr, 1, &a, &p, out);
  *q = out[0];
  *r = out[1];
  return st;
}

/* Checks a as an f32/f64/c64/c128 stack of matrices for op; 0 when fine. */
static jx_status check_any_matrix(const char *op, jx_array *a) {
  jx_status st = jx_check_inputs(op, 1, &a);
  if (st) return st;
  jx_aval av = {a->dtype, a->weak, a->shape, 0};
  return jx_linalg_check_inexact_matrix(op, "operand", &av);
}

/* svd with params (full_matrices, compute_uv) into out[3]. */
static jx_status bind_svd(jx_array *a, int full_matrices, int compute_uv, jx_array **out) {
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = full_matrices != 0;
  p.i[1] = compute_uv != 0;
  return jx_bind(&jx_prim_svd, 1, &a, &p, out);
}

/* jnp.linalg.svd(a, hermitian=True) of the square matrices of a: from eigh
 * (of a's Hermitian part), s = |w| descending, u = v's columns in that order
 * and vh = (u sign(w))^H, composed as JAX composes it. */
static jx_status hermitian_svd(jx_array *a, int compute_uv, jx_array **u, jx_array **s,
                               jx_array **vh) {
  jx_array *out[2], *sym = symmetrize(a);
  jx_params p = JX_PARAMS_INIT;
  jx_status st = jx_bind(&jx_prim_eigh, 1, &sym, &p, out);
  if (st) return st;
  jx_array *w = out[0], *v = out[1], *abs_w = jx_abs(w);
  int last = w->shape.rank - 1;
  if (!compute_uv) {
    *s = jx_flip(jx_sort(abs_w, last), JX_AXES(last));
    return jx_last_status();
  }
  jx_array *order = jx_flip(jx_argsort(abs_w, last), JX_AXES(last));
  *s = jx_take_along_axis(abs_w, order, last);
  jx_array *sign = jx_take_along_axis(jx_sign(w), order, last);
  jx_array *columns = jx_broadcast_to(jx_expand_dims(order, last), v->shape);
  *u = jx_take_along_axis(v, columns, last + 1);
  *vh = jx_linalg_adjoint(jx_mul(*u, jx_astype(jx_expand_dims(sign, last), v->dtype)));
  return jx_last_status();
}

/* svd for op, as jnp.linalg.svd */
static jx_status svd(const char *op, jx_array *a, int full_matrices, int compute_uv, int hermitian,
                     jx_array **u, jx_array **s, jx_array **vh) {
  if (!s || (compute_uv && (!u || !vh)))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: an output pointer is NULL", op);
  *s = jx_poison();
  if (compute_uv) *u = *vh = jx_poison();
  jx_status st = check_any_matrix(op, a);
  if (!st && hermitian) st = check_inexact(op, "operand", a);
  if (st) return st;
  if (hermitian) return hermitian_svd(a, compute_uv, u, s, vh);
  jx_array *out[3];
  if ((st = bind_svd(a, full_matrices, compute_uv, out))) return st;
  *s = out[0];
  if (compute_uv) *u = out[1], *vh = out[2];
  return JX_OK;
}

jx_status jx_linalg_svd(jx_array *a, int full_matrices, int compute_uv, jx_array **u, jx_array **s,
                        jx_array **vh) {
  return svd("jx_linalg_svd", a, full_matrices, compute_uv, 0, u, s, vh);
}

jx_status jx_linalg_svd_ex(jx_array *a, int full_matrices, int compute_uv, int hermitian,
                           jx_array **u, jx_array **s, jx_array **vh) {
  return svd("jx_linalg_svd_ex", a, full_matrices, compute_uv, hermitian, u, s, vh);
}

jx_array *jx_linalg_matrix_rank(jx_array *a, double rtol, int hermitian) {
  const char *op = "jx_linalg_matrix_rank";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  if (a->shape.rank < 2) /* a vector or scalar: 1 unless all zero */
    return jx_astype(jx_any(jx_ne(a, jx_zeros(a->dtype, JX_SHAPE())), JX_AXES(), 0), JX_I32);
  jx_array *s;
  if (svd(op, a, 0, 0, hermitian, NULL, &s, NULL)) return jx_poison();
  int last = s->shape.rank - 1;
  int64_t m = a->shape.dims[last], n = a->shape.dims[last + 1];
  jx_array *cutoff;
  if (isnan(rtol)) /* JAX's default: the largest value times max(m, n) eps */
    cutoff = jx_mul(jx_max(s, JX_AXES(last), 1),
                    jx_scalar(s->dtype, (double)(m > n ? m : n) * eps_of(s->dtype)));
  else /* as JAX, a given rtol is compared with the values as it is */
    cutoff = jx_scalar(s->dtype, rtol);
  return jx_sum(jx_gt(s, cutoff), JX_AXES(last), 0);
}

jx_array *jx_linalg_svdvals(jx_array *a) {
  const char *op = "jx_linalg_svdvals";
  jx_array *out[3];
  if (check_any_matrix(op, a) || bind_svd(a, 0, 0, out)) return jx_poison();
  return out[0];
}
