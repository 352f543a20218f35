/* Indexing ops on top of gather and scatter: jnp.take, jnp.take_along_axis,
 * jax.nn.one_hot, jax.ops.segment_sum, and the lax-level jx_gather and
 * jx_scatter. Out-of-range handling follows JAX's defaults ("fill" for
 * reads, dropped updates for segment_sum), not NumPy's IndexError. */
#include "../prims/rules.h"
#include "ops_util.h"

static void axes_to_list(jx_axes a, jx_ilist *l) {
  l->n = a.n;
  for (int i = 0; i < a.n; i++) l->v[i] = a.v[i];
}

static jx_status need_int(const char *op, const char *what, jx_array *x) {
  if (jx_is_int(x->dtype)) return JX_OK;
  char s[JX_AVAL_STR_CAP];
  return jx_error_set(JX_ERR_DTYPE, "%s: %s %s must have an integer dtype", op, what,
                      jx_aval_str(x->dtype, x->shape, s));
}

/* JAX's behaviour for an empty axis or empty indices is kept as it is:
 * taking nothing from an empty axis returns `a` itself unchanged. */
jx_array *jx_take(jx_array *a, jx_array *indices, int axis) {
  const char *op = "jx_take";
  if (jx_check_inputs(op, 2, (jx_array *[]){a, indices}) || need_int(op, "indices", indices))
    return jx_poison();
  int r = a->shape.rank, k = indices->shape.rank;
  int ax = jx_normalize_axis(axis, r, op);
  if (ax < 0) return jx_poison();
  char sa[JX_AVAL_STR_CAP];
  if (r + k - 1 > JX_MAX_RANK) {
    jx_error_set(JX_ERR_SHAPE, "%s: the result would have more than %d dims", op, JX_MAX_RANK);
    return jx_poison();
  }
  jx_shape out = {0, {0}};
  for (int d = 0; d < ax; d++) out.dims[out.rank++] = a->shape.dims[d];
  for (int d = 0; d < k; d++) out.dims[out.rank++] = indices->shape.dims[d];
  for (int d = ax + 1; d < r; d++) out.dims[out.rank++] = a->shape.dims[d];
  if (a->shape.dims[ax] == 0) {
    if (jx_size(indices) != 0) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT,
                   "%s: cannot take a non-empty selection from axis %d of %s, which is empty", op,
                   ax, jx_aval_str(a->dtype, a->shape, sa));
      return jx_poison();
    }
    return a;
  }
  if (jx_size(indices) == 0) return jx_zeros(a->dtype, out);
  jx_params p = JX_PARAMS_INIT;
  for (int d = 0; d < ax; d++) p.l[0].v[p.l[0].n++] = d;
  for (int d = ax + k; d < r + k - 1; d++) p.l[0].v[p.l[0].n++] = d;
  p.l[1].n = p.l[2].n = 1;
  p.l[1].v[0] = p.l[2].v[0] = ax;
  p.l[3].n = r;
  for (int d = 0; d < r; d++) p.l[3].v[d] = d == ax ? 1 : a->shape.dims[d];
  p.i[0] = k; /* each index a scalar */
  p.i[1] = JX_GATHER_FILL;
  jx_array *idx = jx_ops_wrap_negative(indices, a->shape.dims[ax]);
  jx_array *res = jx_bind1(&jx_prim_gather, 2, (jx_array *[]){a, idx}, &p);
  return res;
}

/* Builds, for every output position, the full operand index (the iota of
 * each other dim and the wrapped index along axis) and gathers single
 * elements with them. */
jx_array *jx_take_along_axis(jx_array *a, jx_array *indices, int axis) {
  const char *op = "jx_take_along_axis";
  if (jx_check_inputs(op, 2, (jx_array *[]){a, indices}) || need_int(op, "indices", indices))
    return jx_poison();
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  int r = a->shape.rank;
  if (indices->shape.rank != r) {
    jx_error_set(JX_ERR_SHAPE, "%s: indices %s and array %s must have the same number of dims", op,
                 jx_aval_str(indices->dtype, indices->shape, sb),
                 jx_aval_str(a->dtype, a->shape, sa));
    return jx_poison();
  }
  int ax = jx_normalize_axis(axis, r, op);
  if (ax < 0) return jx_poison();
  if (r + 1 > JX_MAX_RANK) {
    jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: arrays of rank %d are not supported (at most %d)", op,
                 r, JX_MAX_RANK - 1);
    return jx_poison();
  }
  jx_shape as1 = a->shape, out;
  as1.dims[ax] = 1;
  if (jx_ops_broadcast_shapes(op, indices->shape, as1, &out)) return jx_poison();
  int64_t n = a->shape.dims[ax];
  if (n == 0) return jx_zeros(a->dtype, out);
  jx_shape abig = out;
  abig.dims[ax] = n;
  jx_array *ab = jx_ops_broadcast(a, abig);
  jx_array *idx =
      jx_ops_wrap_negative(jx_ops_convert(jx_ops_broadcast(indices, out), JX_I64, 0), n);
  return jx_rule_take_along_axis(ab, idx, ax);
}

jx_array *jx_one_hot(jx_array *indices, int64_t n, jx_dtype dt) {
  const char *op = "jx_one_hot";
  if (jx_check_inputs(op, 1, &indices) || need_int(op, "indices", indices)) return jx_poison();
  if (n < 0 || !jx_dtype_valid(dt)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: bad number of classes %lld or dtype %d", op,
                 (long long)n, (int)dt);
    return jx_poison();
  }
  int r = indices->shape.rank;
  if (r + 1 > JX_MAX_RANK) {
    jx_error_set(JX_ERR_SHAPE, "%s: the result would have more than %d dims", op, JX_MAX_RANK);
    return jx_poison();
  }
  jx_shape cls = {r + 1, {0}};
  for (int d = 0; d < r; d++) cls.dims[d] = 1;
  cls.dims[r] = n;
  jx_array *lhs = jx_expand_dims(indices, -1);
  jx_array *hot = jx_eq(lhs, jx_iota(indices->dtype, cls, r));
  return jx_ops_convert(hot, dt, 0);
}

jx_array *jx_segment_sum(jx_array *data, jx_array *segment_ids, int64_t n) {
  const char *op = "jx_segment_sum";
  if (jx_check_inputs(op, 2, (jx_array *[]){data, segment_ids}) ||
      need_int(op, "segment_ids", segment_ids))
    return jx_poison();
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  int r = data->shape.rank;
  if (r < 1 || segment_ids->shape.rank != 1 || segment_ids->shape.dims[0] != data->shape.dims[0]) {
    jx_error_set(JX_ERR_SHAPE, "%s: segment_ids %s must be 1-D with one id per row of data %s", op,
                 jx_aval_str(segment_ids->dtype, segment_ids->shape, sb),
                 jx_aval_str(data->dtype, data->shape, sa));
    return jx_poison();
  }
  if (n < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: num_segments %lld must be >= 0", op, (long long)n);
    return jx_poison();
  }
  jx_shape os = data->shape;
  os.dims[0] = n;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = r - 1;
  for (int d = 1; d < r; d++) p.l[0].v[d - 1] = d;
  p.l[1].n = p.l[2].n = 1;
  p.i[0] = 1; /* each id a scalar */
  p.i[1] = JX_SCATTER_DROP;
  jx_array *zero = jx_zeros(data->dtype, os);
  return jx_bind1(&jx_prim_scatter_add, 3, (jx_array *[]){zero, segment_ids, data}, &p);
}

jx_array *jx_gather(jx_array *operand, jx_array *indices, const jx_gather_dims *dims,
                    jx_shape slice_sizes, jx_gather_mode mode) {
  const char *op = "jx_gather";
  if (jx_check_inputs(op, 2, (jx_array *[]){operand, indices})) return jx_poison();
  if (!dims || dims->offset_dims.n < 0 || dims->collapsed_slice_dims.n < 0 ||
      dims->start_index_map.n < 0 || slice_sizes.rank < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: dimension numbers are missing or too long", op);
    return jx_poison();
  }
  jx_params p = JX_PARAMS_INIT;
  axes_to_list(dims->offset_dims, &p.l[0]);
  axes_to_list(dims->collapsed_slice_dims, &p.l[1]);
  axes_to_list(dims->start_index_map, &p.l[2]);
  p.l[3].n = slice_sizes.rank;
  for (int d = 0; d < slice_sizes.rank; d++) p.l[3].v[d] = slice_sizes.dims[d];
  p.i[0] = dims->index_vector_dim;
  p.i[1] = mode;
  return jx_bind1(&jx_prim_gather, 2, (jx_array *[]){operand, indices}, &p);
}

jx_array *jx_scatter(jx_array *operand, jx_array *indices, jx_array *updates,
                     const jx_scatter_dims *dims, jx_scatter_op sop, jx_scatter_mode mode) {
  const char *op = "jx_scatter";
  static const jx_prim *const prims[] = {&jx_prim_scatter, &jx_prim_scatter_add,
                                         &jx_prim_scatter_mul, &jx_prim_scatter_min,
                                         &jx_prim_scatter_max};
  if (jx_check_inputs(op, 3, (jx_array *[]){operand, indices, updates})) return jx_poison();
  if (!dims || dims->update_window_dims.n < 0 || dims->inserted_window_dims.n < 0 ||
      dims->scatter_dims_to_operand_dims.n < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: dimension numbers are missing or too long", op);
    return jx_poison();
  }
  if ((unsigned)sop > JX_SCATTER_MAX) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: unknown scatter op %d", op, (int)sop);
    return jx_poison();
  }
  jx_params p = JX_PARAMS_INIT;
  axes_to_list(dims->update_window_dims, &p.l[0]);
  axes_to_list(dims->inserted_window_dims, &p.l[1]);
  axes_to_list(dims->scatter_dims_to_operand_dims, &p.l[2]);
  p.i[0] = dims->index_vector_dim;
  p.i[1] = mode;
  return jx_bind1(prims[sop], 3, (jx_array *[]){operand, indices, updates}, &p);
}
