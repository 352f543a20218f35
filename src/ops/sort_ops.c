/* Sorting ops: jnp.sort / jnp.argsort and lax.sort / lax.top_k, through the
 * sort and top_k primitives (see src/prims/sort.c for the order of floats:
 * sort puts NaNs last and treats -0.0 as 0.0; top_k uses the IEEE total
 * order). jx_argsort gives i32 indices where jnp.argsort gives i64 in
 * 64-bit mode; the values agree. */
#include "../array/array.h"
#include "ops_util.h"

static jx_status bind_sort(int n, jx_array *const *in, int axis, int num_keys, jx_array **out) {
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = axis;
  p.i[1] = num_keys;
  return jx_bind(&jx_prim_sort, n, in, &p, out);
}

jx_array *jx_sort(jx_array *a, int axis) {
  if (jx_check_inputs("jx_sort", 1, &a)) return jx_poison();
  int ax = jx_normalize_axis(axis, a->shape.rank, "jx_sort");
  if (ax < 0) return jx_poison();
  jx_array *out;
  bind_sort(1, &a, ax, 1, &out);
  return out;
}

jx_array *jx_argsort(jx_array *a, int axis) {
  if (jx_check_inputs("jx_argsort", 1, &a)) return jx_poison();
  int ax = jx_normalize_axis(axis, a->shape.rank, "jx_argsort");
  if (ax < 0) return jx_poison();
  jx_array *in[2] = {a, jx_iota(jx_default_int(), a->shape, ax)}, *out[2];
  bind_sort(2, in, ax, 1, out);
  return out[1];
}

jx_status jx_sort_multi(int n, jx_array *const *operands, int axis, int num_keys, jx_array **out) {
  const char *op = "jx_sort_multi";
  if (!out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: out is NULL", op);
  if (n < 1 || !operands) {
    for (int i = 0; i < n; i++) out[i] = jx_poison();
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs at least one operand, given %d", op, n);
  }
  for (int i = 0; i < n; i++) out[i] = jx_poison();
  jx_status st = jx_check_inputs(op, n, operands);
  if (st) return st;
  char s0[JX_AVAL_STR_CAP], si[JX_AVAL_STR_CAP];
  for (int i = 1; i < n; i++)
    if (!jx_shape_equal(operands[i]->shape, operands[0]->shape))
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: operands must have one shape, got %s (operand 0) "
                          "and %s (operand %d)",
                          op, jx_aval_str(operands[0]->dtype, operands[0]->shape, s0),
                          jx_aval_str(operands[i]->dtype, operands[i]->shape, si), i);
  int ax = jx_normalize_axis(axis, operands[0]->shape.rank, op);
  if (ax < 0) return JX_ERR_INVALID_ARGUMENT;
  if (num_keys < 1 || num_keys > n)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: num_keys = %d must be in [1, %d]", op,
                        num_keys, n);
  return bind_sort(n, operands, ax, num_keys, out);
}

jx_status jx_top_k(jx_array *a, int k, jx_array **values, jx_array **indices) {
  const char *op = "jx_top_k";
  if (!values || !indices)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: values or indices is NULL", op);
  *values = *indices = jx_poison();
  jx_status st = jx_check_inputs(op, 1, &a);
  if (st) return st;
  char s[JX_AVAL_STR_CAP];
  int r = a->shape.rank;
  if (r < 1)
    return jx_error_set(JX_ERR_SHAPE, "%s: operand %s must have at least one dimension", op,
                        jx_aval_str(a->dtype, a->shape, s));
  if (k < 0 || k > a->shape.dims[r - 1])
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: k = %d is out of range [0, %lld] for the last axis of operand %s", op,
                        k, (long long)a->shape.dims[r - 1], jx_aval_str(a->dtype, a->shape, s));
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = k;
  jx_array *out[2];
  st = jx_bind(&jx_prim_top_k, 1, &a, &p, out);
  *values = out[0];
  *indices = out[1];
  return st;
}
