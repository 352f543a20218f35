/* Vector and matrix norms (jx/linalg.h), as jnp.linalg.vector_norm and
 * jnp.linalg.matrix_norm, composed from elementwise ops and reductions the
 * way JAX writes them, so their derivatives are JAX's, ties and zeros
 * included (the 2-norm's gradient at 0 is NaN, as in JAX); the matrix norms
 * "nuc", 2 and -2 reduce the singular values (svdvals). A complex operand
 * (c64, c128) has a real norm (f32, f64), through |x| and real(x conj(x)). */
#include <math.h>

#include <jx/linalg.h>
#include <jx/ops.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "../trace/dispatch.h"

/* Checks x as a floating or complex array of rank >= min_rank for op; 0 when fine. */
static jx_status check_norm_operand(const char *op, jx_array *x, int min_rank) {
  jx_status st = jx_check_inputs(op, 1, &x);
  if (st) return st;
  char s[JX_AVAL_STR_CAP];
  if (x->dtype != JX_F32 && x->dtype != JX_F64 && !jx_is_complex(x->dtype))
    return jx_error_set(JX_ERR_DTYPE, "%s: operand %s must be f32, f64, c64 or c128", op,
                        jx_aval_str(x->dtype, x->shape, s));
  if (x->shape.rank < min_rank)
    return jx_error_set(JX_ERR_SHAPE, "%s: operand %s needs at least %d axes", op,
                        jx_aval_str(x->dtype, x->shape, s), min_rank);
  return JX_OK;
}

/* sqrt(sum(real(x conj(x)))) over ax: the 2-norm and the Frobenius norm
 * (sqrt(sum(x x)) for a real x: jx_real and jx_conj of a real array stop
 * its gradient). */
static jx_array *root_sum_squares(jx_array *x, jx_axes ax) {
  jx_array *sq = jx_is_complex(x->dtype) ? jx_real(jx_mul(x, jx_conj(x))) : jx_mul(x, x);
  return jx_sqrt(jx_sum(sq, ax, 0));
}

/* JAX's amax(x, axis, initial=0): the max with 0 after the reduction also
 * splits a tie at 0 in the gradient. */
static jx_array *max_from_zero(jx_array *x, jx_axes ax) {
  return jx_maximum(jx_max(x, ax, 0), jx_scalar(x->dtype, 0));
}

jx_array *jx_linalg_vector_norm(jx_array *x, double ord) {
  const char *op = "jx_linalg_vector_norm";
  if (check_norm_operand(op, x, 1)) return jx_poison();
  jx_axes last = JX_AXES(x->shape.rank - 1);
  if (isnan(ord)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: ord is NaN", op);
    return jx_poison();
  }
  if (ord == 2) return root_sum_squares(x, last);
  if (ord == INFINITY) return max_from_zero(jx_abs(x), last);
  if (ord == -INFINITY) return jx_min(jx_abs(x), last, 0);
  jx_dtype real = jx_complex_part(x->dtype);
  if (ord == 0) return jx_sum(jx_astype(jx_ne(x, jx_scalar(real, 0)), real), last, 0);
  if (ord == 1) return jx_sum(jx_abs(x), last, 0);
  jx_array *p = jx_scalar(real, ord);
  return jx_pow(jx_sum(jx_pow(jx_abs(x), p), last, 0), jx_reciprocal(p));
}

jx_array *jx_linalg_matrix_norm(jx_array *x, jx_matrix_norm_ord ord) {
  const char *op = "jx_linalg_matrix_norm";
  if (check_norm_operand(op, x, 2)) return jx_poison();
  int r = x->shape.rank;
  jx_axes rows = JX_AXES(r - 2), cols = JX_AXES(r - 1);
  switch (ord) {
  case JX_NORM_FRO: return root_sum_squares(x, JX_AXES(r - 2, r - 1));
  /* the largest / smallest column sum */
  case JX_NORM_1: return max_from_zero(jx_sum(jx_abs(x), rows, 0), JX_AXES(r - 2));
  case JX_NORM_NEG_1: return jx_min(jx_sum(jx_abs(x), rows, 0), JX_AXES(r - 2), 0);
  /* the largest / smallest row sum */
  case JX_NORM_INF: return max_from_zero(jx_sum(jx_abs(x), cols, 0), JX_AXES(r - 2));
  case JX_NORM_NEG_INF: return jx_min(jx_sum(jx_abs(x), cols, 0), JX_AXES(r - 2), 0);
  /* the singular values', as JAX reduces svd(x, compute_uv=False) */
  case JX_NORM_NUC: return jx_sum(jx_linalg_svdvals(x), JX_AXES(r - 2), 0);
  case JX_NORM_2: return jx_max(jx_linalg_svdvals(x), JX_AXES(r - 2), 0);
  case JX_NORM_NEG_2: return jx_min(jx_linalg_svdvals(x), JX_AXES(r - 2), 0);
  }
  jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: ord %d is not a jx_matrix_norm_ord", op, (int)ord);
  return jx_poison();
}
