/* NumPy- and lax-level selection and conversion ops.
 *
 * jx_clip(a, lo, hi) is jnp.clip(a, lo, hi) = minimum(maximum(lo, a), hi)
 * with lo and hi passed as Python scalars would be: an integral bound is a
 * weak integer (an integer array stays integer), any other a weak float (an
 * integer array becomes f64). A bound of -inf (lo) or +inf (hi) means "no
 * bound", as None does in jnp.clip. An integral bound outside an integer
 * array's range saturates to that range (JAX wraps it to the dtype, which
 * gives nonsense such as clip(u8 200, 0, 300) = 44). */
#include "../prims/elementwise.h"
#include "ops_util.h"

static jx_aval aval_of(const jx_array *a) { return (jx_aval){a->dtype, a->weak, a->shape, 0}; }

static jx_array *as_bool(jx_array *c) {
  if (c->dtype == JX_BOOL) return c;
  jx_array *strong = jx_ops_convert(c, c->dtype, 0);
  jx_array *zero = jx_ops_broadcast(jx_ops_convert(jx_scalar(c->dtype, 0), c->dtype, 0), c->shape);
  return jx_bind1(&jx_prim_ne, 2, (jx_array *[]){strong, zero}, NULL);
}

/* jnp.where: cond tested != 0; a and b promoted; all three broadcast together */
jx_array *jx_where(jx_array *cond, jx_array *a, jx_array *b) {
  const char *op = "jx_where";
  if (jx_check_inputs(op, 3, (jx_array *[]){cond, a, b})) return jx_poison();
  jx_shape s;
  if (jx_ops_broadcast_shapes(op, cond->shape, a->shape, &s) ||
      jx_ops_broadcast_shapes(op, s, b->shape, &s) || jx_ops_promote_broadcast(op, &a, &b))
    return jx_poison();
  jx_array *c = jx_ops_broadcast(as_bool(cond), s);
  a = jx_ops_broadcast(a, s);
  b = jx_ops_broadcast(b, s);
  return jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){c, b, a}, NULL); /* false: case 0 */
}

jx_array *jx_select_n(jx_array *which, int n, jx_array *const *cases) {
  const char *op = "jx_select_n";
  if (n < 1 || !cases) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs at least one case, given %d", op, n);
    return jx_poison();
  }
  if (jx_check_inputs(op, 1, &which) || jx_check_inputs(op, n, cases)) return jx_poison();
  jx_array *all[1 + 64];
  jx_aval av[1 + 64], out;
  if (n > 64) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: at most 64 cases, given %d", op, n);
    return jx_poison();
  }
  all[0] = which;
  for (int i = 0; i < n; i++) all[1 + i] = cases[i];
  for (int i = 0; i <= n; i++) av[i] = aval_of(all[i]);
  if (jx_select_n_rule(op, n + 1, av, &out)) return jx_poison();
  return jx_bind1(&jx_prim_select_n, n + 1, all, NULL);
}

jx_array *jx_clamp(jx_array *lo, jx_array *a, jx_array *hi) {
  const char *op = "jx_clamp";
  jx_array *in[3] = {lo, a, hi};
  if (jx_check_inputs(op, 3, in)) return jx_poison();
  jx_aval av[3] = {aval_of(lo), aval_of(a), aval_of(hi)}, out;
  if (jx_clamp_rule(op, av, &out)) return jx_poison();
  return jx_bind1(&jx_prim_clamp, 3, in, NULL);
}

/* v as the weak scalar a Python number would be (see the header comment) */
static jx_array *bound(jx_array *a, double v) {
  if (v != floor(v) || isinf(v)) return jx_scalar(JX_F64, v); /* NaN too */
  if (!jx_is_int(a->dtype)) return jx_scalar(JX_I64, v);
  int bits = jx_dtype_bits(a->dtype), uns = jx_is_unsigned_int(a->dtype);
  double lo = uns ? 0 : -ldexp(1, bits - 1), hi = uns ? ldexp(1, bits) - 1 : ldexp(1, bits - 1) - 1;
  v = v < lo ? lo : v > hi ? hi : v; /* the conversion saturates where hi rounds up */
  return jx_ops_convert(jx_scalar(JX_F64, v), a->dtype, 1);
}

jx_array *jx_clip(jx_array *a, double lo, double hi) {
  if (jx_check_inputs("jx_clip", 1, &a)) return jx_poison();
  jx_array *r = a;
  if (lo != -INFINITY) r = jx_maximum(bound(a, lo), r);
  if (hi != INFINITY) r = jx_minimum(bound(a, hi), r);
  return r == a ? jx_bind1(&jx_prim_stop_gradient, 1, &a, NULL) : r;
}

jx_array *jx_astype(jx_array *a, jx_dtype dt) {
  if (jx_check_inputs("jx_astype", 1, &a)) return jx_poison();
  if (!jx_dtype_valid(dt)) {
    jx_error_set(JX_ERR_DTYPE, "jx_astype: invalid dtype %d", (int)dt);
    return jx_poison();
  }
  jx_params p = JX_PARAMS_INIT;
  p.dtype = dt; /* i0 = 0: the result is strongly typed */
  return jx_bind1(&jx_prim_convert_element_type, 1, &a, &p);
}

jx_array *jx_bitcast_convert_type(jx_array *a, jx_dtype dt) {
  const char *op = "jx_bitcast_convert_type";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  jx_aval av = aval_of(a), out;
  if (jx_bitcast_rule(op, dt, &av, &out)) return jx_poison();
  jx_params p = JX_PARAMS_INIT;
  p.dtype = dt;
  return jx_bind1(&jx_prim_bitcast_convert_type, 1, &a, &p);
}

jx_array *jx_stop_gradient(jx_array *a) {
  if (jx_check_inputs("jx_stop_gradient", 1, &a)) return jx_poison();
  return jx_bind1(&jx_prim_stop_gradient, 1, &a, NULL);
}
