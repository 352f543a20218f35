/* jnp.unique, nonzero, argwhere and one-argument where with the static
 * size JAX needs under jit, and jax.ops.segment_max / segment_min /
 * segment_prod. As in jax.numpy, nonzero counts with cumsums and a
 * bincount (no data-dependent shape anywhere), unique sorts and keeps the
 * first of each run of equal values (NaNs equal), with the first
 * occurrences, inverse and counts jnp.unique returns on request, and the segment
 * reductions scatter into an array of the reduction's identity. */
#include <float.h>
#include <stdint.h>

#include "ops_util.h"

static char *str(jx_array *a, char *buf) { return jx_aval_str(a->dtype, a->shape, buf); }

static jx_status check_size(const char *op, int64_t size) {
  if (size >= 0 && size <= INT32_MAX) return JX_OK;
  return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: size %lld must be in [0, %d]", op,
                      (long long)size, INT32_MAX);
}

/* The flat positions of the first `size` true elements of the flattened mask (past the last
 * one: its size) and how many there are. */
static jx_array *flat_positions(jx_array *mask, int64_t size, jx_array **count) {
  jx_array *m = jx_astype(jx_reshape(mask, JX_SHAPE(-1)), jx_default_int());
  jx_array *before = jx_cumsum(m, 0); /* the rank of each element among the true ones, from 1 */
  jx_array *ones = jx_ones_like(before);
  *count = jx_sum(m, JX_AXES(), 0);
  return jx_cumsum(jx_segment_sum(ones, before, size), 0);
}

static jx_status nonzero(const char *op, jx_array *a, int64_t size, int64_t fill, jx_array **out) {
  jx_array *mask = a->dtype == JX_BOOL ? a : jx_ne(a, jx_zeros_like(a));
  jx_array *count, *flat = flat_positions(mask, size, &count);
  jx_array *pad = jx_ge(jx_iota(jx_default_int(), JX_SHAPE(size), 0), count);
  int64_t stride = 1;
  for (int d = a->shape.rank - 1; d >= 0; d--) {
    int64_t n = a->shape.dims[d];
    jx_array *i = jx_rem(jx_floor_divide(flat, jx_full(flat->dtype, JX_SHAPE(), (double)stride)),
                         jx_full(flat->dtype, JX_SHAPE(), (double)(n ? n : 1)));
    out[d] = jx_where(pad, jx_full(flat->dtype, JX_SHAPE(), (double)fill), i);
    stride *= n;
  }
  return jx_check_inputs(op, a->shape.rank, out);
}

jx_status jx_nonzero(jx_array *a, int64_t size, int64_t fill, jx_array **out) {
  const char *op = "jx_nonzero";
  if (!out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: out is NULL", op);
  jx_status st = jx_check_inputs(op, 1, &a);
  if (st) return st;
  for (int d = 0; d < a->shape.rank; d++) out[d] = jx_poison();
  if (a->shape.rank == 0)
    return jx_error_set(JX_ERR_SHAPE, "%s: a 0-d array has no axes to index; use a 1-D one", op);
  if ((st = check_size(op, size))) return st;
  return nonzero(op, a, size, fill, out);
}

jx_status jx_where_indices(jx_array *cond, int64_t size, int64_t fill, jx_array **out) {
  const char *op = "jx_where_indices";
  if (!out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: out is NULL", op);
  jx_status st = jx_check_inputs(op, 1, &cond);
  if (st) return st;
  for (int d = 0; d < cond->shape.rank; d++) out[d] = jx_poison();
  if (cond->shape.rank == 0)
    return jx_error_set(JX_ERR_SHAPE, "%s: a 0-d condition has no axes to index", op);
  if ((st = check_size(op, size))) return st;
  return nonzero(op, cond, size, fill, out);
}

jx_array *jx_argwhere(jx_array *a, int64_t size, int64_t fill) {
  const char *op = "jx_argwhere";
  if (jx_check_inputs(op, 1, &a) || check_size(op, size)) return jx_poison();
  jx_array *x = a->shape.rank == 0 ? jx_reshape(a, JX_SHAPE(1)) : a, *cols[JX_MAX_RANK];
  if (nonzero(op, x, size, fill, cols)) return jx_poison();
  jx_array *r = jx_stack(x->shape.rank, cols, 1);
  return a->shape.rank == 0 ? jx_ops_slice_axis(r, 1, 0, 0, 1) : r;
}

/* jnp.unique over the flattened a: the values and, each when wanted (non-NULL), the flat
 * position of each value's first occurrence, each element's position among the values and each
 * value's count. The values gather from a through a stable argsort, so their gradient reaches
 * the first occurrence, as JAX's does. */
static jx_status unique(const char *op, jx_array *a, int64_t size, jx_array *fill,
                        jx_array **values, jx_array **index, jx_array **inverse,
                        jx_array **counts) {
  jx_status st;
  if ((st = jx_check_inputs(op, 1, &a)) || (st = check_size(op, size))) return st;
  char s[JX_AVAL_STR_CAP];
  if (fill) {
    if ((st = jx_check_inputs(op, 1, &fill))) return st;
    if (fill->shape.rank != 0)
      return jx_error_set(JX_ERR_SHAPE, "%s: fill must be a scalar, got %s", op, str(fill, s));
  }
  jx_array *flat = jx_reshape(a, JX_SHAPE(-1));
  int64_t n = flat->shape.dims[0];
  if (n == 0) {
    jx_array *none = jx_zeros(jx_default_int(), JX_SHAPE(0));
    *values = fill ? jx_broadcast_to(jx_astype(fill, a->dtype), JX_SHAPE(size))
                   : jx_zeros(a->dtype, JX_SHAPE(size));
    if (index) *index = none;
    if (inverse) *inverse = jx_zeros(jx_default_int(), a->shape);
    if (counts) *counts = none;
    return JX_OK;
  }
  jx_array *perm = jx_argsort(flat, 0), *aux = jx_take(flat, perm, 0);
  jx_array *hi = jx_ops_slice_axis(aux, 0, 1, n, 1), *lo = jx_ops_slice_axis(aux, 0, 0, n - 1, 1);
  jx_array *differs = jx_ne(hi, lo);
  if (jx_is_float(a->dtype)) /* NaNs are equal */
    differs = jx_logical_and(differs, jx_logical_not(jx_logical_and(jx_isnan(hi), jx_isnan(lo))));
  jx_array *mask = jx_concatenate(2, (jx_array *[]){jx_full(JX_BOOL, JX_SHAPE(1), 1), differs}, 0);
  jx_array *count, *ind = flat_positions(mask, size, &count);
  jx_array *pad = jx_ge(jx_iota(jx_default_int(), JX_SHAPE(size), 0), count);
  ind = jx_where(pad, jx_zeros_like(ind), ind); /* JAX's default fill: the smallest value */
  jx_array *r = jx_take(aux, ind, 0);
  *values = fill ? jx_where(pad, jx_ops_convert(fill, a->dtype, 0), r) : r;
  if (index) *index = jx_take(perm, ind, 0);
  if (inverse) {
    jx_array *rank = jx_sub(jx_cumsum(jx_astype(mask, jx_default_int()), 0),
                            jx_full(jx_default_int(), JX_SHAPE(), 1));
    *inverse = jx_reshape(jx_take(rank, jx_argsort(perm, 0), 0), a->shape);
  }
  if (counts) { /* the distances between the starts of the runs (past the last one: n) */
    jx_array *unused;
    *counts = jx_diff(flat_positions(mask, size + 1, &unused), 1, 0);
  }
  return jx_check_inputs(op, 1, values);
}

jx_array *jx_unique(jx_array *a, int64_t size, jx_array *fill) {
  jx_array *values = NULL;
  return unique("jx_unique", a, size, fill, &values, NULL, NULL, NULL) ? jx_poison() : values;
}

jx_status jx_unique_all(jx_array *a, int64_t size, jx_array *fill, jx_array **values,
                        jx_array **index, jx_array **inverse, jx_array **counts) {
  const char *op = "jx_unique_all";
  if (!values) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: values is NULL", op);
  jx_array **outs[4] = {values, index, inverse, counts};
  for (int i = 0; i < 4; i++)
    if (outs[i]) *outs[i] = jx_poison();
  jx_status st = unique(op, a, size, fill, values, index, inverse, counts);
  if (st)
    for (int i = 0; i < 4; i++)
      if (outs[i]) *outs[i] = jx_poison();
  return st;
}

/* ---- segment reductions ---- */

static double lowest(jx_dtype dt) {
  if (jx_is_float(dt)) return -INFINITY;
  if (jx_is_unsigned_int(dt) || dt == JX_BOOL) return 0;
  return -ldexp(1, jx_dtype_bits(dt) - 1);
}
static double highest(jx_dtype dt) {
  if (jx_is_float(dt)) return INFINITY;
  if (dt == JX_BOOL) return 1;
  return ldexp(1, jx_dtype_bits(dt) - !jx_is_unsigned_int(dt)) - 1;
}

static jx_array *segment(const char *op, jx_array *data, jx_array *ids, int64_t n,
                         jx_scatter_op sop, double init) {
  if (jx_check_inputs(op, 2, (jx_array *[]){data, ids})) return jx_poison();
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  if (!jx_is_int(ids->dtype)) {
    jx_error_set(JX_ERR_DTYPE, "%s: segment_ids %s must have an integer dtype", op, str(ids, sb));
    return jx_poison();
  }
  int r = data->shape.rank;
  if (r < 1 || ids->shape.rank != 1 || ids->shape.dims[0] != data->shape.dims[0]) {
    jx_error_set(JX_ERR_SHAPE, "%s: segment_ids %s must be 1-D with one id per row of data %s", op,
                 str(ids, sb), str(data, sa));
    return jx_poison();
  }
  if (n < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: num_segments %lld must be >= 0", op, (long long)n);
    return jx_poison();
  }
  jx_shape os = data->shape;
  os.dims[0] = n;
  jx_scatter_dims dims = {.inserted_window_dims = JX_AXES(0),
                          .scatter_dims_to_operand_dims = JX_AXES(0),
                          .index_vector_dim = 1};
  dims.update_window_dims.n = r - 1;
  for (int d = 1; d < r; d++) dims.update_window_dims.v[d - 1] = d;
  jx_array *base = jx_ops_convert(jx_full(data->dtype, os, init), data->dtype, data->weak);
  return jx_scatter(base, ids, data, &dims, sop, JX_SCATTER_DROP);
}

jx_array *jx_segment_max(jx_array *data, jx_array *segment_ids, int64_t n) {
  double init = data ? lowest(jx_dtype_of(data)) : 0;
  return segment("jx_segment_max", data, segment_ids, n, JX_SCATTER_MAX, init);
}
jx_array *jx_segment_min(jx_array *data, jx_array *segment_ids, int64_t n) {
  double init = data ? highest(jx_dtype_of(data)) : 0;
  return segment("jx_segment_min", data, segment_ids, n, JX_SCATTER_MIN, init);
}
jx_array *jx_segment_prod(jx_array *data, jx_array *segment_ids, int64_t n) {
  return segment("jx_segment_prod", data, segment_ids, n, JX_SCATTER_MUL, 1);
}
