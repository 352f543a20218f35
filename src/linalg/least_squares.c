/* The pseudo-inverse and least squares (jx/linalg.h), as jnp.linalg.pinv
 * (the pinv primitive, pinv.c) and jnp.linalg.lstsq (composed from the
 * reduced SVD as JAX composes it, so its derivative is the SVD's; complex a
 * and b too, with real singular values and residuals). */
#include <float.h>
#include <math.h>

#include <jx/linalg.h>
#include <jx/ops.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "../trace/dispatch.h"
#include "linalg_prims.h"

/* The machine epsilon of a float dtype (jnp.finfo(dt).eps). */
static double eps_of(jx_dtype dt) { return dt == JX_F64 ? DBL_EPSILON : FLT_EPSILON; }

static jx_array *pinv(const char *op, jx_array *a, double rtol, int hermitian) {
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  jx_aval av = {a->dtype, a->weak, a->shape, 0};
  if (hermitian ? jx_linalg_check_inexact_square(op, "operand", &av)
                : jx_linalg_check_inexact_matrix(op, "operand", &av))
    return jx_poison();
  int r = a->shape.rank;
  int64_t m = a->shape.dims[r - 2], n = a->shape.dims[r - 1];
  jx_params p = JX_PARAMS_INIT;
  /* JAX's default: 10 max(m, n) eps */
  p.f[0] = isnan(rtol) ? 10.0 * (double)(m > n ? m : n) * eps_of(jx_complex_part(a->dtype)) : rtol;
  p.i[0] = hermitian != 0;
  return jx_bind1(&jx_prim_pinv, 1, &a, &p);
}

jx_array *jx_linalg_pinv(jx_array *a, double rtol) { return pinv("jx_linalg_pinv", a, rtol, 0); }

jx_array *jx_linalg_pinv_ex(jx_array *a, double rtol, int hermitian) {
  return pinv("jx_linalg_pinv_ex", a, rtol, hermitian);
}

/* Checks lstsq's operands: a [m, n] and b [m] or [m, k] of a's dtype. */
static jx_status check_lstsq(const char *op, jx_array *a, jx_array *b) {
  jx_array *in[2] = {a, b};
  jx_status st = jx_check_inputs(op, 2, in);
  if (st) return st;
  jx_aval av = {a->dtype, a->weak, a->shape, 0};
  if ((st = jx_linalg_check_inexact_matrix(op, "a", &av))) return st;
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  if (a->shape.rank != 2)
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: a %s must be one matrix [m, n], as in JAX (vmap for a stack)", op,
                        jx_aval_str(a->dtype, a->shape, sa));
  if (b->dtype != a->dtype || b->shape.rank < 1 || b->shape.rank > 2 ||
      b->shape.dims[0] != a->shape.dims[0])
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: b %s does not fit a %s: b must have a's dtype and be [m] or [m, k] "
                        "for a [m, n]",
                        op, jx_aval_str(b->dtype, b->shape, sb),
                        jx_aval_str(a->dtype, a->shape, sa));
  return JX_OK;
}

jx_status jx_linalg_lstsq(jx_array *a, jx_array *b, double rcond, jx_array **x,
                          jx_array **residuals, jx_array **rank, jx_array **s) {
  const char *op = "jx_linalg_lstsq";
  if (!x || !residuals || !rank || !s)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: an output pointer is NULL", op);
  *x = *residuals = *rank = *s = jx_poison();
  jx_status st = check_lstsq(op, a, b);
  if (st) return st;
  jx_dtype dt = a->dtype, rdt = jx_complex_part(dt); /* s is real */
  int64_t m = a->shape.dims[0], n = a->shape.dims[1];
  int vector = b->shape.rank == 1;
  jx_array *b2 = vector ? jx_expand_dims(b, 1) : b, *sol;
  if (m * n == 0) {
    *s = jx_zeros(rdt, JX_SHAPE(0));
    *rank = jx_zeros(JX_I32, JX_SHAPE());
    sol = jx_zeros(dt, JX_SHAPE(n, b2->shape.dims[1]));
  } else {
    /* JAX's cutoff: rcond s[0], rcond eps max(m, n) by default, eps when negative */
    double cut = isnan(rcond) ? eps_of(rdt) * (double)(m > n ? m : n)
                 : rcond < 0  ? eps_of(rdt)
                              : rcond;
    jx_array *u, *vt;
    if ((st = jx_linalg_svd(a, 0, 1, &u, s, &vt))) return st;
    jx_array *largest = jx_slice(*s, JX_SHAPE(0), JX_SHAPE(1), JX_SHAPE(1));
    jx_array *zero = jx_scalar(rdt, 0);
    jx_array *mask =
        jx_logical_and(jx_gt(*s, zero), jx_ge(*s, jx_mul(jx_scalar(rdt, cut), largest)));
    *rank = jx_sum(jx_astype(mask, JX_I32), JX_AXES(0), 0);
    jx_array *safe = jx_where(mask, *s, jx_scalar(rdt, 1));
    jx_array *s_inv = jx_expand_dims(jx_where(mask, jx_reciprocal(safe), zero), 1);
    jx_array *uhb = jx_matmul(jx_linalg_adjoint(u), b2);
    sol = jx_matmul(jx_linalg_adjoint(vt), jx_mul(jx_astype(s_inv, dt), uhb));
  }
  /* JAX's residuals in every case (not NumPy's empty ones): |b - a x|^2 per column, real */
  jx_array *diff = jx_sub(b2, jx_matmul(a, sol));
  jx_array *sq = jx_is_complex(dt) ? jx_real(jx_mul(diff, jx_conj(diff))) : jx_mul(diff, diff);
  *residuals = jx_square(jx_sqrt(jx_sum(sq, JX_AXES(0), 0)));
  *x = vector ? jx_squeeze(sol, JX_AXES(1)) : sol;
  return jx_last_status();
}
