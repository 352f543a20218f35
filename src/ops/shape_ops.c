/* NumPy-level shape ops (jnp.reshape, transpose, broadcast_to, expand_dims,
 * squeeze, flip, concatenate, stack, pad) and the lax-level ones (slice,
 * dynamic_slice, dynamic_update_slice, pad_general, iota), each a checked
 * call of one or more shape/slicing primitives. As in JAX (and unlike XLA),
 * the dynamic slicing ops wrap a negative start once (start + dim) before it
 * is clamped into [0, dim - size]. Checks happen here so that
 * messages name the public function; the primitives check again for callers
 * that bind them directly. */
#include <stdlib.h>

#include "ops_util.h"

static char *shape_str(jx_shape s, char *buf) {
  jx_aval_str(JX_F32, s, buf);
  return buf + 3; /* drop the dtype: "[2,3]" */
}

static void set_list(jx_ilist *l, int n, const int64_t *v) {
  l->n = n;
  for (int i = 0; i < n; i++) l->v[i] = v[i];
}

static jx_array *bind_list(const jx_prim *p, jx_array *a, int n, const int64_t *v) {
  jx_params pp = JX_PARAMS_INIT;
  set_list(&pp.l[0], n, v);
  return jx_bind1(p, 1, &a, &pp);
}

jx_array *jx_reshape(jx_array *a, jx_shape s) {
  const char *op = "jx_reshape";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  if (s.rank < 0 || s.rank > JX_MAX_RANK) {
    jx_error_set(JX_ERR_SHAPE, "%s: new shape has more than %d dimensions", op, JX_MAX_RANK);
    return jx_poison();
  }
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.rank; i++) {
    if (s.dims[i] == -1 && infer < 0) {
      infer = i;
    } else if (s.dims[i] == -1) {
      jx_error_set(JX_ERR_SHAPE, "%s: new shape %s can have only one -1 (axes %d and %d)", op,
                   shape_str(s, sb), infer, i);
      return jx_poison();
    } else if (s.dims[i] < 0) {
      jx_error_set(JX_ERR_SHAPE, "%s: new shape %s has a negative dimension %lld", op,
                   shape_str(s, sb), (long long)s.dims[i]);
      return jx_poison();
    } else {
      known *= s.dims[i];
    }
  }
  int64_t n = jx_size(a);
  if (infer >= 0) {
    if (known == 0 || n % known != 0) {
      jx_error_set(JX_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) into shape %s", op,
                   jx_aval_str(a->dtype, a->shape, sa), (long long)n, shape_str(s, sb));
      return jx_poison();
    }
    s.dims[infer] = n / known;
  } else if (known != n) {
    jx_error_set(JX_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) into shape %s (%lld)", op,
                 jx_aval_str(a->dtype, a->shape, sa), (long long)n, shape_str(s, sb),
                 (long long)known);
    return jx_poison();
  }
  return bind_list(&jx_prim_reshape, a, s.rank, s.dims);
}

jx_array *jx_transpose(jx_array *a, jx_axes perm) {
  const char *op = "jx_transpose";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int r = a->shape.rank;
  int64_t p[JX_MAX_RANK];
  int seen[JX_MAX_RANK] = {0};
  if (perm.n == 0) {
    for (int i = 0; i < r; i++) p[i] = r - 1 - i;
    return bind_list(&jx_prim_transpose, a, r, p);
  }
  char sa[JX_AVAL_STR_CAP];
  if (perm.n != r) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: axes has %d entries but %s has %d dims; it must be a permutation", op, perm.n,
                 jx_aval_str(a->dtype, a->shape, sa), r);
    return jx_poison();
  }
  for (int i = 0; i < r; i++) {
    int ax = jx_normalize_axis(perm.v[i], r, op);
    if (ax < 0) return jx_poison();
    if (seen[ax]) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT,
                   "%s: axes is not a permutation: axis %d appears twice (operand %s)", op,
                   perm.v[i], jx_aval_str(a->dtype, a->shape, sa));
      return jx_poison();
    }
    seen[ax] = 1;
    p[i] = ax;
  }
  return bind_list(&jx_prim_transpose, a, r, p);
}

jx_array *jx_broadcast_to(jx_array *a, jx_shape s) {
  const char *op = "jx_broadcast_to";
  if (jx_check_inputs(op, 1, &a) || jx_shape_check(s, op, "shape")) return jx_poison();
  int r = a->shape.rank;
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  int ok = r <= s.rank;
  for (int i = 0; ok && i < r; i++) {
    int64_t d = a->shape.dims[i], o = s.dims[s.rank - r + i];
    ok = d == 1 || d == o;
  }
  if (!ok) {
    jx_error_set(JX_ERR_SHAPE, "%s: cannot broadcast %s to shape %s", op,
                 jx_aval_str(a->dtype, a->shape, sa), shape_str(s, sb));
    return jx_poison();
  }
  return jx_ops_broadcast(a, s);
}

jx_array *jx_broadcast_in_dim(jx_array *a, jx_shape s, jx_axes dims) {
  const char *op = "jx_broadcast_in_dim";
  if (jx_check_inputs(op, 1, &a) || jx_shape_check(s, op, "shape")) return jx_poison();
  if (dims.n < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: too many broadcast dimensions", op);
    return jx_poison();
  }
  jx_params p = JX_PARAMS_INIT;
  set_list(&p.l[0], s.rank, s.dims);
  p.l[1].n = dims.n;
  for (int i = 0; i < dims.n; i++) p.l[1].v[i] = dims.v[i];
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &a, &p);
}

jx_array *jx_expand_dims(jx_array *a, int axis) {
  const char *op = "jx_expand_dims";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int ax = jx_normalize_axis(axis, a->shape.rank + 1, op);
  if (ax < 0) return jx_poison();
  int64_t v = ax;
  return bind_list(&jx_prim_expand_dims, a, 1, &v);
}

jx_array *jx_squeeze(jx_array *a, jx_axes ax) {
  const char *op = "jx_squeeze";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int64_t dims[JX_MAX_RANK];
  int n = 0;
  if (ax.n == 0) {
    for (int i = 0; i < a->shape.rank; i++)
      if (a->shape.dims[i] == 1) dims[n++] = i;
    return bind_list(&jx_prim_squeeze, a, n, dims);
  }
  jx_ilist l;
  if (jx_ops_axes(op, ax, a->shape.rank, 0, &l)) return jx_poison();
  for (int i = 0; i < l.n; i++) {
    if (a->shape.dims[l.v[i]] != 1) {
      char sa[JX_AVAL_STR_CAP];
      jx_error_set(JX_ERR_SHAPE, "%s: cannot squeeze axis %lld of %s: its size is %lld, not 1", op,
                   (long long)l.v[i], jx_aval_str(a->dtype, a->shape, sa),
                   (long long)a->shape.dims[l.v[i]]);
      return jx_poison();
    }
  }
  return bind_list(&jx_prim_squeeze, a, l.n, l.v);
}

jx_array *jx_flip(jx_array *a, jx_axes ax) {
  const char *op = "jx_flip";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  jx_ilist l;
  if (jx_ops_axes(op, ax, a->shape.rank, 1, &l)) return jx_poison();
  return bind_list(&jx_prim_rev, a, l.n, l.v);
}

/* The common dtype of xs under JAX's weak-type promotion; *weak when all are weak. */
static jx_dtype promote_all(int n, jx_array *const *xs, int *weak) {
  jx_dtype dt = xs[0]->dtype;
  *weak = xs[0]->weak;
  for (int i = 1; i < n; i++) dt = jx_promote_weak(dt, *weak, xs[i]->dtype, xs[i]->weak, weak);
  return dt;
}

static jx_status check_list_args(const char *op, int n, jx_array *const *xs) {
  if (n < 1 || !xs)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs at least one array, given %d", op, n);
  return jx_check_inputs(op, n, xs);
}

/* Concatenates xs (already of one rank) along axis after promotion; op names errors. */
static jx_array *concat_checked(const char *op, int n, jx_array *const *xs, int axis) {
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  jx_shape s0 = xs[0]->shape;
  for (int i = 1; i < n; i++) {
    jx_shape s = xs[i]->shape;
    int ok = s.rank == s0.rank;
    for (int d = 0; ok && d < s.rank; d++) ok = d == axis || s.dims[d] == s0.dims[d];
    if (!ok) {
      jx_error_set(JX_ERR_SHAPE,
                   "%s: array %d has shape %s, which does not match array 0's %s except "
                   "along axis %d",
                   op, i, jx_aval_str(xs[i]->dtype, s, sb), jx_aval_str(xs[0]->dtype, s0, sa),
                   axis);
      return jx_poison();
    }
  }
  int weak;
  jx_dtype dt = promote_all(n, xs, &weak);
  jx_array *small[16] = {0}, **conv = n <= 16 ? small : malloc(sizeof *conv * (size_t)n);
  if (!conv) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return jx_poison();
  }
  for (int i = 0; i < n; i++) conv[i] = jx_ops_convert(xs[i], dt, weak);
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = axis;
  jx_array *r = jx_bind1(&jx_prim_concatenate, n, conv, &p);
  if (conv != small) free(conv);
  return r;
}

jx_array *jx_concatenate(int n, jx_array *const *xs, int axis) {
  const char *op = "jx_concatenate";
  if (check_list_args(op, n, xs)) return jx_poison();
  if (xs[0]->shape.rank == 0) {
    jx_error_set(JX_ERR_SHAPE, "%s: zero-dimensional arrays cannot be concatenated", op);
    return jx_poison();
  }
  for (int i = 1; i < n; i++) {
    if (xs[i]->shape.rank != xs[0]->shape.rank) {
      char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
      jx_error_set(JX_ERR_SHAPE,
                   "%s: arrays must have the same rank: array 0 is %s, array %d is %s", op,
                   jx_aval_str(xs[0]->dtype, xs[0]->shape, sa), i,
                   jx_aval_str(xs[i]->dtype, xs[i]->shape, sb));
      return jx_poison();
    }
  }
  int ax = jx_normalize_axis(axis, xs[0]->shape.rank, op);
  if (ax < 0) return jx_poison();
  return concat_checked(op, n, xs, ax);
}

jx_array *jx_stack(int n, jx_array *const *xs, int axis) {
  const char *op = "jx_stack";
  if (check_list_args(op, n, xs)) return jx_poison();
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  for (int i = 1; i < n; i++) {
    if (!jx_shape_equal(xs[i]->shape, xs[0]->shape)) {
      jx_error_set(JX_ERR_SHAPE, "%s: arrays must have one shape: array 0 is %s, array %d is %s",
                   op, jx_aval_str(xs[0]->dtype, xs[0]->shape, sa), i,
                   jx_aval_str(xs[i]->dtype, xs[i]->shape, sb));
      return jx_poison();
    }
  }
  int ax = jx_normalize_axis(axis, xs[0]->shape.rank + 1, op);
  if (ax < 0) return jx_poison();
  jx_array *small[16] = {0}, **ex = n <= 16 ? small : malloc(sizeof *ex * (size_t)n);
  if (!ex) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return jx_poison();
  }
  int64_t v = ax;
  for (int i = 0; i < n; i++) ex[i] = bind_list(&jx_prim_expand_dims, xs[i], 1, &v);
  jx_array *r = jx_check_inputs(op, n, ex) ? jx_poison() : concat_checked(op, n, ex, ax);
  if (ex != small) free(ex);
  return r;
}

jx_array *jx_slice(jx_array *a, jx_shape start, jx_shape stop, jx_shape step) {
  const char *op = "jx_slice";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int r = a->shape.rank;
  char sa[JX_AVAL_STR_CAP];
  if (start.rank != r || stop.rank != r || (step.rank != 0 && step.rank != r)) {
    jx_error_set(JX_ERR_SHAPE,
                 "%s: start, stop and step need one entry per dim of %s (given %d, %d, %d)", op,
                 jx_aval_str(a->dtype, a->shape, sa), start.rank, stop.rank, step.rank);
    return jx_poison();
  }
  jx_params p = JX_PARAMS_INIT;
  for (int d = 0; d < r; d++) {
    int64_t lo = start.dims[d], hi = stop.dims[d], st = step.rank ? step.dims[d] : 1;
    if (lo < 0 || hi < lo || hi > a->shape.dims[d] || st < 1) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT,
                   "%s: dim %d of %s: start %lld, stop %lld, step %lld must satisfy "
                   "0 <= start <= stop <= %lld and step >= 1",
                   op, d, jx_aval_str(a->dtype, a->shape, sa), (long long)lo, (long long)hi,
                   (long long)st, (long long)a->shape.dims[d]);
      return jx_poison();
    }
    p.l[0].v[d] = lo;
    p.l[1].v[d] = hi;
    p.l[2].v[d] = st;
  }
  p.l[0].n = p.l[1].n = p.l[2].n = r;
  return jx_bind1(&jx_prim_slice, 1, &a, &p);
}

/* Checks the start scalars of the dynamic slicing ops. */
static jx_status check_starts(const char *op, jx_array *a, int n, jx_array *const *starts) {
  if (n > 0 && !starts) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: starts is NULL", op);
  for (int i = 0; i < n; i++) {
    if (!starts[i]) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: start %d is NULL", op, i);
    if (starts[i]->poisoned) return JX_ERR_POISONED;
    if (starts[i]->shape.rank != 0 || !jx_is_int(starts[i]->dtype)) {
      char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
      return jx_error_set(
          JX_ERR_DTYPE, "%s: start %d is %s; starts must be integer scalars (operand %s)", op, i,
          jx_aval_str(starts[i]->dtype, starts[i]->shape, sb), jx_aval_str(a->dtype, a->shape, sa));
    }
  }
  return JX_OK;
}

/* Binds p to (lead..., wrapped starts...) with params; lead[0] is the
 * operand. lax.dynamic_slice wraps a negative start once before the
 * primitive clamps it (the primitive itself, like XLA, only clamps). */
static jx_array *bind_with_starts(const jx_prim *p, int nlead, jx_array **lead, int n,
                                  jx_array *const *starts, const jx_params *pp) {
  jx_array *in[2 + JX_MAX_RANK];
  for (int i = 0; i < nlead; i++) in[i] = lead[i];
  for (int i = 0; i < n; i++)
    in[nlead + i] = jx_ops_wrap_negative(starts[i], lead[0]->shape.dims[i]);
  return jx_bind1(p, nlead + n, in, pp);
}

jx_array *jx_dynamic_slice(jx_array *a, jx_array *const *starts, jx_shape sizes) {
  const char *op = "jx_dynamic_slice";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  int r = a->shape.rank;
  if (sizes.rank != r) {
    jx_error_set(JX_ERR_SHAPE,
                 "%s: %s has %d dims but %d slice sizes (and starts) were given; one per dim "
                 "is needed",
                 op, jx_aval_str(a->dtype, a->shape, sa), r, sizes.rank < 0 ? 0 : sizes.rank);
    return jx_poison();
  }
  if (check_starts(op, a, r, starts)) return jx_poison();
  for (int d = 0; d < r; d++) {
    if (sizes.dims[d] < 0 || sizes.dims[d] > a->shape.dims[d]) {
      jx_error_set(JX_ERR_SHAPE, "%s: slice sizes %s do not fit in %s (dim %d)", op,
                   shape_str(sizes, sb), jx_aval_str(a->dtype, a->shape, sa), d);
      return jx_poison();
    }
  }
  jx_params p = JX_PARAMS_INIT;
  set_list(&p.l[0], r, sizes.dims);
  return bind_with_starts(&jx_prim_dynamic_slice, 1, &a, r, starts, &p);
}

jx_array *jx_dynamic_update_slice(jx_array *a, jx_array *update, jx_array *const *starts) {
  const char *op = "jx_dynamic_update_slice";
  jx_array *lead[2] = {a, update};
  if (jx_check_inputs(op, 2, lead)) return jx_poison();
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  int r = a->shape.rank, ok = update->shape.rank == r;
  for (int d = 0; ok && d < r; d++) ok = update->shape.dims[d] <= a->shape.dims[d];
  if (!ok) {
    jx_error_set(JX_ERR_SHAPE, "%s: update %s does not fit in operand %s", op,
                 jx_aval_str(update->dtype, update->shape, sb),
                 jx_aval_str(a->dtype, a->shape, sa));
    return jx_poison();
  }
  if (update->dtype != a->dtype) {
    if (!update->weak) {
      jx_error_set(JX_ERR_DTYPE, "%s: update %s must have the operand's dtype (%s)", op,
                   jx_aval_str(update->dtype, update->shape, sb),
                   jx_aval_str(a->dtype, a->shape, sa));
      return jx_poison();
    }
    lead[1] = jx_ops_convert(update, a->dtype, a->weak);
  }
  if (check_starts(op, a, r, starts)) return jx_poison();
  return bind_with_starts(&jx_prim_dynamic_update_slice, 2, lead, r, starts, NULL);
}

static jx_array *pad_bind(const char *op, jx_array *a, jx_array *v, jx_shape lo, jx_shape hi,
                          jx_shape interior) {
  char sa[JX_AVAL_STR_CAP];
  int r = a->shape.rank;
  if (lo.rank != r || hi.rank != r || (interior.rank != 0 && interior.rank != r)) {
    jx_error_set(JX_ERR_SHAPE,
                 "%s: lo, hi and interior need one entry per dim of %s (given %d, %d, %d)", op,
                 jx_aval_str(a->dtype, a->shape, sa), lo.rank, hi.rank, interior.rank);
    return jx_poison();
  }
  jx_params p = JX_PARAMS_INIT;
  for (int d = 0; d < r; d++) {
    p.l[0].v[d] = lo.dims[d];
    p.l[1].v[d] = hi.dims[d];
    p.l[2].v[d] = interior.rank ? interior.dims[d] : 0;
  }
  p.l[0].n = p.l[1].n = p.l[2].n = r;
  return jx_bind1(&jx_prim_pad, 2, (jx_array *[]){a, v}, &p);
}

jx_array *jx_pad(jx_array *a, jx_shape lo, jx_shape hi, double value) {
  const char *op = "jx_pad";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  for (int d = 0; d < lo.rank && d < JX_MAX_RANK; d++) {
    if (lo.dims[d] < 0 || (d < hi.rank && hi.dims[d] < 0)) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT,
                   "%s: pad widths must be >= 0 (dim %d: %lld, %lld); use jx_pad_general to crop",
                   op, d, (long long)lo.dims[d], (long long)(d < hi.rank ? hi.dims[d] : 0));
      return jx_poison();
    }
  }
  jx_array *v = jx_full(a->dtype, (jx_shape){0, {0}}, value);
  return pad_bind(op, a, v, lo, hi, (jx_shape){0, {0}});
}

jx_array *jx_pad_general(jx_array *a, jx_array *value, jx_shape lo, jx_shape hi,
                         jx_shape interior) {
  const char *op = "jx_pad_general";
  if (jx_check_inputs(op, 2, (jx_array *[]){a, value})) return jx_poison();
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  if (value->shape.rank != 0 || (value->dtype != a->dtype && !value->weak)) {
    jx_error_set(JX_ERR_DTYPE, "%s: padding value %s must be a scalar of the operand's dtype (%s)",
                 op, jx_aval_str(value->dtype, value->shape, sb),
                 jx_aval_str(a->dtype, a->shape, sa));
    return jx_poison();
  }
  return pad_bind(op, a, jx_ops_convert(value, a->dtype, a->weak), lo, hi, interior);
}

jx_array *jx_iota(jx_dtype dt, jx_shape s, int axis) {
  const char *op = "jx_iota";
  if (jx_shape_check(s, op, "shape")) return jx_poison();
  int ax = jx_normalize_axis(axis, s.rank, op);
  if (ax < 0) return jx_poison();
  jx_params p = JX_PARAMS_INIT;
  p.dtype = dt;
  set_list(&p.l[0], s.rank, s.dims);
  p.i[0] = ax;
  return jx_bind1(&jx_prim_iota, 0, NULL, &p);
}
