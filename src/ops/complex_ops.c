/* NumPy-level complex ops: jnp.real, jnp.imag, jnp.conj, jnp.angle and
 * lax.complex, on top of the rows of prims/complex.c. Like jnp, real and
 * conj hand a real array back unchanged (as a fresh array), imag of a real
 * array is zeros, and angle of a real array is atan2(0, x). */
#include "../prims/elementwise.h"
#include "ops_util.h"

static jx_array *bind1(const jx_prim *p, jx_array *a) { return jx_bind1(p, 1, &a, NULL); }

/* a real array handed back as a fresh array whose derivative is the identity,
 * as jnp.real and jnp.conj return a real array (a conversion to its own
 * dtype: the jit drops it) */
static jx_array *same_real(jx_array *a) {
  jx_params p = JX_PARAMS_INIT;
  p.dtype = a->dtype;
  p.i[0] = a->weak;
  return jx_bind1(&jx_prim_convert_element_type, 1, &a, &p);
}

jx_array *jx_real(jx_array *a) {
  if (jx_check_inputs("jx_real", 1, &a)) return jx_poison();
  return jx_is_complex(a->dtype) ? bind1(&jx_prim_real, a) : same_real(a);
}

jx_array *jx_imag(jx_array *a) {
  if (jx_check_inputs("jx_imag", 1, &a)) return jx_poison();
  if (!jx_is_complex(a->dtype))
    return jx_ops_broadcast(jx_ops_convert(jx_scalar(JX_F64, 0), a->dtype, a->weak), a->shape);
  return bind1(&jx_prim_imag, a);
}

jx_array *jx_conj(jx_array *a) {
  if (jx_check_inputs("jx_conj", 1, &a)) return jx_poison();
  return jx_is_complex(a->dtype) ? bind1(&jx_prim_conj, a) : same_real(a);
}

jx_array *jx_complex(jx_array *re, jx_array *im) {
  const char *op = "jx_complex";
  jx_array *in[2] = {re, im};
  if (jx_check_inputs(op, 2, in)) return jx_poison();
  for (int i = 0; i < 2; i++)
    if (jx_is_complex(in[i]->dtype)) {
      char s[JX_AVAL_STR_CAP];
      jx_error_set(JX_ERR_DTYPE, "%s: operand %d is %s; the parts must be real", op, i,
                   jx_aval_str(in[i]->dtype, in[i]->shape, s));
      return jx_poison();
    }
  if (jx_ops_promote_broadcast(op, &re, &im)) return jx_poison();
  /* lax.complex takes f32 or f64: integers as jx_to_inexact, 16-bit floats in f32 */
  jx_dtype dt = jx_to_inexact(re->dtype);
  if (dt != JX_F64) dt = JX_F32;
  re = jx_ops_convert(re, dt, 0);
  im = jx_ops_convert(im, dt, 0);
  return jx_bind1(&jx_prim_complex, 2, (jx_array *[]){re, im}, NULL);
}

jx_array *jx_angle(jx_array *a) {
  if (jx_check_inputs("jx_angle", 1, &a)) return jx_poison();
  if (!jx_is_complex(a->dtype)) {
    a = jx_ops_convert(a, jx_to_inexact(a->dtype), a->weak);
    return jx_atan2(jx_imag(a), a);
  }
  return jx_atan2(bind1(&jx_prim_imag, a), bind1(&jx_prim_real, a));
}
