/* jax.numpy's constructors from other arrays: zeros_like, ones_like,
 * full_like (a's dtype, weak type and shape), linspace and logspace
 * (differentiable in start and stop, as JAX's), meshgrid. */
#include "ops_util.h"

static jx_array *filled_like(const char *op, jx_array *a, double v) {
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  return jx_ops_convert(jx_full(a->dtype, a->shape, v), a->dtype, a->weak);
}

jx_array *jx_zeros_like(jx_array *a) { return filled_like("jx_zeros_like", a, 0); }
jx_array *jx_ones_like(jx_array *a) { return filled_like("jx_ones_like", a, 1); }
jx_array *jx_full_like(jx_array *a, double v) { return filled_like("jx_full_like", a, v); }

/* jnp.linspace: start * (1 - t) + stop * t for t = i / div, then stop itself when endpoint */
static jx_array *linspace(const char *op, jx_array *start, jx_array *stop, int64_t num,
                          int endpoint, int axis) {
  if (jx_check_inputs(op, 2, (jx_array *[]){start, stop})) return jx_poison();
  if (num < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the number of samples %lld must be >= 0", op,
                 (long long)num);
    return jx_poison();
  }
  int weak;
  jx_dtype dt =
      jx_to_inexact(jx_promote_weak(start->dtype, start->weak, stop->dtype, stop->weak, &weak));
  jx_shape bounds;
  if (jx_ops_broadcast_shapes(op, start->shape, stop->shape, &bounds)) return jx_poison();
  if (bounds.rank + 1 > JX_MAX_RANK) {
    jx_error_set(JX_ERR_SHAPE, "%s: the result would have more than %d dims", op, JX_MAX_RANK);
    return jx_poison();
  }
  int ax = jx_normalize_axis(axis, bounds.rank + 1, op);
  if (ax < 0) return jx_poison();
  jx_array *lo = jx_expand_dims(jx_ops_broadcast(jx_ops_convert(start, dt, 0), bounds), ax);
  jx_array *hi = jx_expand_dims(jx_ops_broadcast(jx_ops_convert(stop, dt, 0), bounds), ax);
  if (num == 0) {
    jx_shape s = jx_shape_of(lo);
    s.dims[ax] = 0;
    return jx_zeros(dt, s);
  }
  if (num == 1) return lo;
  int64_t div = endpoint ? num - 1 : num;
  jx_shape is = {bounds.rank + 1, {0}};
  for (int d = 0; d < is.rank; d++) is.dims[d] = d == ax ? div : 1;
  jx_array *t = jx_div(jx_iota(dt, is, ax), jx_full(dt, JX_SHAPE(), (double)div));
  jx_array *out = jx_add(jx_mul(lo, jx_sub(jx_scalar(JX_I64, 1), t)), jx_mul(hi, t));
  return endpoint ? jx_concatenate(2, (jx_array *[]){out, hi}, ax) : out;
}

jx_array *jx_linspace(jx_array *start, jx_array *stop, int64_t num, int endpoint, int axis) {
  return linspace("jx_linspace", start, stop, num, endpoint, axis);
}

jx_array *jx_logspace(jx_array *start, jx_array *stop, int64_t num, int endpoint, double base,
                      int axis) {
  jx_array *lin = linspace("jx_logspace", start, stop, num, endpoint, axis);
  return jx_pow(jx_scalar(JX_F64, base), lin);
}

/* sparse: each output keeps its own axis and has length 1 on the others (jnp.meshgrid's
 * sparse=True), else all are broadcast to the full grid */
static jx_status meshgrid(const char *op, int n, jx_array *const *xs, const char *indexing,
                          int sparse, jx_array **out) {
  if (!out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: out is NULL", op);
  for (int i = 0; i < n; i++) out[i] = jx_poison();
  if (n < 0 || n > JX_MAX_RANK || (n > 0 && !xs))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: takes 0 to %d arrays, given %d", op,
                        JX_MAX_RANK, n);
  jx_status st = jx_check_inputs(op, n, xs);
  if (st) return st;
  int xy;
  if (!indexing || !strcmp(indexing, "xy")) {
    xy = 1;
  } else if (!strcmp(indexing, "ij")) {
    xy = 0;
  } else {
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: indexing \"%s\" is not \"xy\" or \"ij\"", op,
                        indexing);
  }
  jx_shape s = {n, {0}};
  for (int i = 0; i < n; i++) {
    if ((st = jx_ops_need_rank(op, "every argument", xs[i], 1))) return st;
    s.dims[i] = xs[i]->shape.dims[0];
  }
  int swap = xy && n >= 2;
  if (swap) {
    int64_t t = s.dims[0];
    s.dims[0] = s.dims[1];
    s.dims[1] = t;
  }
  for (int i = 0; i < n; i++) {
    int at = swap && i < 2 ? 1 - i : i;
    jx_shape si = s;
    for (int d = 0; sparse && d < n; d++) si.dims[d] = d == at ? s.dims[at] : 1;
    out[i] = jx_broadcast_in_dim(xs[i], si, JX_AXES(at));
  }
  return jx_check_inputs(op, n, out);
}

jx_status jx_meshgrid(int n, jx_array *const *xs, const char *indexing, jx_array **out) {
  return meshgrid("jx_meshgrid", n, xs, indexing, 0, out);
}

jx_status jx_meshgrid_sparse(int n, jx_array *const *xs, const char *indexing, jx_array **out) {
  return meshgrid("jx_meshgrid_sparse", n, xs, indexing, 1, out);
}
