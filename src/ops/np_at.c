/* x.at[idx]: jx_at_get and the updates jx_at_set/add/mul/min/max, one
 * gather or scatter built from a NumPy index expression over a's leading
 * axes. Every entry becomes an integer grid over the result's index shape
 * (an array entry broadcast with the other arrays, a static slice as the
 * arange of its positions), the grids are stacked into one index vector per
 * result position, and the unindexed trailing axes ride along as a window.
 * The layout is NumPy's: the broadcast array dims stand where the array
 * entries are when those are adjacent, else first. As in JAX, a negative
 * index wraps once, reads clamp (a gather in clip mode; the gradient of a
 * clamped read is dropped, as the scatter JAX transposes its reads to drops
 * it) and updates drop what falls outside (a scatter in drop mode). */
#include "ops_util.h"

static char *str(jx_array *a, char *buf) { return jx_aval_str(a->dtype, a->shape, buf); }

typedef struct {
  jx_array *indices; /* grid shape + [n] */
  jx_shape grid;     /* the result's index dims */
  jx_array *inside;  /* bool over the grid: every array entry in range (NULL: only slices) */
  int n;             /* indexed axes */
} at_plan;

/* Python's slice.indices for a length-len axis: *first and *count of start:stop:step */
static void slice_range(int64_t len, int64_t start, int64_t stop, int64_t step, int64_t *first,
                        int64_t *count) {
  int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? len - 1 : len;
  if (start == JX_END)
    start = step < 0 ? hi : lo;
  else if (start < 0)
    start = start + len < lo ? lo : start + len;
  else if (start > hi)
    start = hi;
  if (stop == JX_END)
    stop = step < 0 ? lo : hi;
  else if (stop < 0)
    stop = stop + len < lo ? lo : stop + len;
  else if (stop > hi)
    stop = hi;
  int64_t c = step < 0 ? (stop < start ? (start - stop - 1) / -step + 1 : 0)
                       : (start < stop ? (stop - start - 1) / step + 1 : 0);
  *first = start;
  *count = c;
}

static jx_status plan(const char *op, jx_array *a, int n, const jx_index *idx, at_plan *p) {
  jx_status st = jx_check_inputs(op, 1, &a);
  if (st) return st;
  char s[JX_AVAL_STR_CAP], si[JX_AVAL_STR_CAP];
  int r = a->shape.rank;
  if (n < 1 || n > r || !idx)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %d index entries for %s (1 to %d)", op, n,
                        str(a, s), r);
  jx_shape b = {0, {0}}; /* the broadcast shape of the array entries */
  int first_adv = -1, last_adv = -1, nslice = 0;
  int64_t start[JX_MAX_RANK], count[JX_MAX_RANK];
  for (int k = 0; k < n; k++) {
    jx_array *x = idx[k].array;
    if (!x) {
      if (idx[k].step == 0)
        return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: entry %d is a slice with step 0", op, k);
      slice_range(a->shape.dims[k], idx[k].start, idx[k].stop, idx[k].step, &start[k], &count[k]);
      nslice++;
      continue;
    }
    if ((st = jx_check_inputs(op, 1, &x))) return st;
    if (!jx_is_int(x->dtype))
      return jx_error_set(JX_ERR_DTYPE,
                          "%s: index entry %d %s must have an integer dtype (a boolean mask "
                          "needs jx_nonzero with a static size first)",
                          op, k, str(x, si));
    if ((st = jx_ops_broadcast_shapes(op, b, x->shape, &b))) return st;
    if (first_adv < 0) first_adv = k;
    last_adv = k;
  }
  int adjacent = 1;
  for (int k = first_adv + 1; first_adv >= 0 && k < last_adv; k++) adjacent &= !!idx[k].array;
  int brank = first_adv >= 0 ? b.rank : 0;
  if (brank + nslice + 1 > JX_MAX_RANK || brank + nslice + (r - n) > JX_MAX_RANK)
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: indexing %s this way gives more than %d dims",
                        op, str(a, s), JX_MAX_RANK);
  /* the grid: NumPy's layout (see the top of the file) */
  jx_shape g = {0, {0}};
  int pos[JX_MAX_RANK] = {0}, bpos = 0;
  for (int k = 0; k < n; k++) {
    if (adjacent ? k == first_adv : k == 0) {
      bpos = g.rank;
      for (int d = 0; d < brank; d++) g.dims[g.rank++] = b.dims[d];
    }
    if (!idx[k].array) {
      pos[k] = g.rank;
      g.dims[g.rank++] = count[k];
    }
  }
  jx_array *grids[JX_MAX_RANK];
  p->inside = NULL;
  for (int k = 0; k < n; k++) {
    jx_axes dims = {0, {0}};
    jx_array *v;
    if (idx[k].array) {
      v = jx_ops_broadcast(jx_ops_wrap_negative(idx[k].array, a->shape.dims[k]), b);
      for (int d = 0; d < b.rank; d++) dims.v[dims.n++] = bpos + d;
      jx_array *in = jx_logical_and(jx_ge(v, jx_scalar(JX_I64, 0)),
                                    jx_lt(v, jx_scalar(JX_I64, (double)a->shape.dims[k])));
      in = jx_broadcast_in_dim(in, g, dims);
      p->inside = p->inside ? jx_logical_and(p->inside, in) : in;
    } else {
      v = jx_add(jx_mul(jx_iota(JX_I64, JX_SHAPE(count[k]), 0), jx_scalar(JX_I64, idx[k].step)),
                 jx_scalar(JX_I64, start[k]));
      dims.v[dims.n++] = pos[k];
    }
    grids[k] = jx_broadcast_in_dim(jx_astype(v, JX_I32), g, dims);
  }
  p->indices = jx_stack(n, grids, g.rank);
  p->grid = g;
  p->n = n;
  return jx_check_inputs(op, 1, &p->indices);
}

static jx_array *at_get(const char *op, jx_array *a, int n, const jx_index *idx) {
  at_plan p;
  if (plan(op, a, n, idx, &p)) return jx_poison();
  int r = a->shape.rank, gr = p.grid.rank;
  jx_gather_dims dims = {.index_vector_dim = gr};
  jx_shape sizes = {r, {0}};
  for (int d = 0; d < r; d++) sizes.dims[d] = d < n ? 1 : a->shape.dims[d];
  for (int k = 0; k < n; k++) {
    dims.collapsed_slice_dims.v[dims.collapsed_slice_dims.n++] = k;
    dims.start_index_map.v[dims.start_index_map.n++] = k;
  }
  for (int d = n; d < r; d++) dims.offset_dims.v[dims.offset_dims.n++] = gr + d - n;
  jx_array *got = jx_gather(a, p.indices, &dims, sizes, JX_GATHER_CLIP);
  if (!p.inside) return got;
  /* JAX's reads promise indices in bounds: XLA clamps the read, and the transposed scatter
   * drops the cotangent of a clamped index */
  jx_shape gs = jx_shape_of(got);
  jx_axes gd = {gr, {0}};
  for (int d = 0; d < gr; d++) gd.v[d] = d;
  jx_array *inside = jx_broadcast_in_dim(p.inside, gs, gd);
  return jx_where(inside, got, jx_stop_gradient(got));
}

jx_array *jx_at_get(jx_array *a, int n, const jx_index *idx) {
  return at_get("jx_at_get", a, n, idx);
}

static jx_array *at_update(const char *op, jx_array *a, int n, const jx_index *idx,
                           jx_array *values, jx_scatter_op sop) {
  if (jx_check_inputs(op, 2, (jx_array *[]){a, values})) return jx_poison();
  at_plan p;
  if (plan(op, a, n, idx, &p)) return jx_poison();
  int r = a->shape.rank, gr = p.grid.rank;
  jx_shape us = p.grid;
  for (int d = n; d < r; d++) us.dims[us.rank++] = a->shape.dims[d];
  int fits = values->shape.rank <= us.rank;
  for (int d = 0; fits && d < values->shape.rank; d++) {
    int64_t v = values->shape.dims[d], u = us.dims[us.rank - values->shape.rank + d];
    fits = v == 1 || v == u;
  }
  if (!fits) {
    char sv[JX_AVAL_STR_CAP], su[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE, "%s: values %s do not broadcast to the indexed shape %s", op,
                 str(values, sv), jx_aval_str(a->dtype, us, su));
    return jx_poison();
  }
  jx_array *upd = jx_ops_broadcast(jx_ops_convert(values, a->dtype, a->weak), us);
  jx_scatter_dims dims = {.index_vector_dim = gr};
  for (int k = 0; k < n; k++) {
    dims.inserted_window_dims.v[dims.inserted_window_dims.n++] = k;
    dims.scatter_dims_to_operand_dims.v[dims.scatter_dims_to_operand_dims.n++] = k;
  }
  for (int d = n; d < r; d++) dims.update_window_dims.v[dims.update_window_dims.n++] = gr + d - n;
  return jx_scatter(a, p.indices, upd, &dims, sop, JX_SCATTER_DROP);
}

jx_array *jx_at_set(jx_array *a, int n, const jx_index *idx, jx_array *values) {
  return at_update("jx_at_set", a, n, idx, values, JX_SCATTER_REPLACE);
}
jx_array *jx_at_add(jx_array *a, int n, const jx_index *idx, jx_array *values) {
  return at_update("jx_at_add", a, n, idx, values, JX_SCATTER_ADD);
}
jx_array *jx_at_mul(jx_array *a, int n, const jx_index *idx, jx_array *values) {
  return at_update("jx_at_mul", a, n, idx, values, JX_SCATTER_MUL);
}
jx_array *jx_at_min(jx_array *a, int n, const jx_index *idx, jx_array *values) {
  return at_update("jx_at_min", a, n, idx, values, JX_SCATTER_MIN);
}
jx_array *jx_at_max(jx_array *a, int n, const jx_index *idx, jx_array *values) {
  return at_update("jx_at_max", a, n, idx, values, JX_SCATTER_MAX);
}
