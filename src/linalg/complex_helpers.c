/* Helpers for the decompositions that take complex matrices as well as real
 * ones (qr, eigh): the dtype check that admits c64 and c128, the conjugate
 * transpose and the Hermitian part that their rules use in place of the
 * plain transpose and symmetric part. */
#include <jx/ops.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "linalg_prims.h"

jx_status jx_linalg_check_inexact_matrix(const char *op, const char *what, const jx_aval *av,
                                         int square) {
  char s[JX_AVAL_STR_CAP];
  int r = av->shape.rank;
  if (av->dtype != JX_F32 && av->dtype != JX_F64 && !jx_is_complex(av->dtype))
    return jx_error_set(JX_ERR_DTYPE, "%s: %s %s must be f32, f64, c64 or c128", op, what,
                        jx_aval_str(av->dtype, av->shape, s));
  if (r < 2 || (square && av->shape.dims[r - 1] != av->shape.dims[r - 2]))
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: %s %s must be a %smatrix (or a stack of them) in its last two axes",
                        op, what, jx_aval_str(av->dtype, av->shape, s), square ? "square " : "");
  return JX_OK;
}

jx_array *jx_linalg_adjoint_of(jx_array *x) {
  jx_array *t = jx_linalg_swap_last(x);
  return jx_is_complex(x->dtype) ? jx_conj(t) : t;
}

jx_array *jx_linalg_hermitian_part(jx_array *a) {
  return jx_mul(jx_add(a, jx_linalg_adjoint_of(a)), jx_scalar(a->dtype, 0.5));
}
