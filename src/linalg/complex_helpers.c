/* Helpers for the decompositions that take complex matrices as well as real
 * ones (qr, eigh, svd, pinv, lstsq): the dtype checks that admit c64 and
 * c128, and the conjugate transpose and Hermitian part that their rules use
 * in place of the plain transpose and symmetric part. */
#include <jx/ops.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "linalg_prims.h"

jx_status jx_linalg_check_inexact_matrix(const char *op, const char *what, const jx_aval *av) {
  char s[JX_AVAL_STR_CAP];
  if (av->dtype != JX_F32 && av->dtype != JX_F64 && !jx_is_complex(av->dtype))
    return jx_error_set(JX_ERR_DTYPE, "%s: %s %s must be f32, f64, c64 or c128", op, what,
                        jx_aval_str(av->dtype, av->shape, s));
  if (av->shape.rank < 2)
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: %s %s must be a matrix (or a stack of them) in its last two axes", op,
                        what, jx_aval_str(av->dtype, av->shape, s));
  return JX_OK;
}

jx_status jx_linalg_check_inexact_square(const char *op, const char *what, const jx_aval *av) {
  char s[JX_AVAL_STR_CAP];
  int r = av->shape.rank;
  if (av->dtype != JX_F32 && av->dtype != JX_F64 && !jx_is_complex(av->dtype))
    return jx_linalg_check_inexact_matrix(op, what, av);
  if (r < 2 || av->shape.dims[r - 1] != av->shape.dims[r - 2])
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: %s %s must be a square matrix (or a stack of them) in its last two "
                        "axes",
                        op, what, jx_aval_str(av->dtype, av->shape, s));
  return JX_OK;
}

jx_array *jx_linalg_adjoint(jx_array *x) {
  /* jx_conj of a real array would stop its gradient: a real x is only transposed */
  jx_array *t = jx_linalg_swap_last(x);
  return jx_is_complex(x->dtype) ? jx_conj(t) : t;
}

jx_array *jx_linalg_hermitian_part(jx_array *x) {
  return jx_mul(jx_add(x, jx_linalg_adjoint(x)), jx_scalar(jx_complex_part(x->dtype), 0.5));
}
