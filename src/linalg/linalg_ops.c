/* The public linear algebra functions (jx/linalg.h): argument checks named
 * after the caller's function, then the primitives. */
#include <jx/linalg.h>
#include <jx/ops.h>

#include "../base/error.h"
#include "../trace/dispatch.h"
#include "linalg_prims.h"

/* Checks a as f32/f64 square matrices for op; 0 when fine. */
static jx_status check_matrix(const char *op, const char *what, jx_array *a) {
  jx_aval av = {a->dtype, a->weak, a->shape, 0};
  return jx_linalg_check_square(op, what, &av);
}

jx_array *jx_linalg_cholesky(jx_array *a) {
  const char *op = "jx_linalg_cholesky";
  if (jx_check_inputs(op, 1, &a) || check_matrix(op, "operand", a)) return jx_poison();
  /* jnp.linalg.cholesky's symmetrize_input: only the symmetric part counts */
  jx_array *sym = jx_mul(jx_add(a, jx_linalg_swap_last(a)), jx_scalar(a->dtype, 0.5));
  jx_params p = JX_PARAMS_INIT;
  return jx_bind1(&jx_prim_cholesky, 1, &sym, &p);
}

jx_array *jx_linalg_triangular_solve(jx_array *a, jx_array *b, int left_side, int lower,
                                     int transpose_a, int unit_diagonal) {
  const char *op = "jx_linalg_triangular_solve";
  jx_array *in[2] = {a, b};
  if (jx_check_inputs(op, 2, in) || check_matrix(op, "a", a)) return jx_poison();
  /* b's fit to a is the primitive's shape rule */
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = left_side != 0;
  p.i[1] = lower != 0;
  p.i[2] = transpose_a != 0;
  p.i[3] = unit_diagonal != 0;
  return jx_bind1(&jx_prim_triangular_solve, 2, in, &p);
}
