/* jax.numpy's products and diagonals: jnp.dot, vdot, tensordot, outer,
 * kron, diagonal, trace, diag, tril, triu, each written as jax.numpy writes
 * it on dot_general, reshapes, slices and selects, so their derivatives
 * and batching are those of the primitives. diagonal reads the diagonal as
 * one strided slice of the flattened matrix plane. */
#include "ops_util.h"

static char *str(jx_array *a, char *buf) { return jx_aval_str(a->dtype, a->shape, buf); }

jx_array *jx_dot(jx_array *a, jx_array *b) {
  const char *op = "jx_dot";
  if (jx_check_inputs(op, 2, (jx_array *[]){a, b})) return jx_poison();
  int ra = a->shape.rank, rb = b->shape.rank;
  if (ra == 0 || rb == 0) return jx_mul(a, b);
  int kb = rb == 1 ? 0 : rb - 2;
  if (a->shape.dims[ra - 1] != b->shape.dims[kb]) {
    char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE,
                 "%s: %s and %s do not align: a's last axis (%lld) must equal b's %s (%lld)", op,
                 str(a, sa), str(b, sb), (long long)a->shape.dims[ra - 1],
                 rb == 1 ? "only axis" : "second-to-last axis", (long long)b->shape.dims[kb]);
    return jx_poison();
  }
  return jx_dot_general(a, b, JX_AXES(ra - 1), JX_AXES(kb), JX_AXES(), JX_AXES());
}

jx_array *jx_vdot(jx_array *a, jx_array *b) {
  const char *op = "jx_vdot";
  if (jx_check_inputs(op, 2, (jx_array *[]){a, b})) return jx_poison();
  if (jx_size(a) != jx_size(b)) {
    char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE, "%s: %s and %s have different sizes (%lld vs %lld)", op, str(a, sa),
                 str(b, sb), (long long)jx_size(a), (long long)jx_size(b));
    return jx_poison();
  }
  return jx_dot_general(jx_reshape(a, JX_SHAPE(-1)), jx_reshape(b, JX_SHAPE(-1)), JX_AXES(0),
                        JX_AXES(0), JX_AXES(), JX_AXES());
}

jx_array *jx_tensordot_axes(jx_array *a, jx_array *b, jx_axes a_axes, jx_axes b_axes) {
  const char *op = "jx_tensordot";
  if (jx_check_inputs(op, 2, (jx_array *[]){a, b})) return jx_poison();
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  if (a_axes.n < 0 || a_axes.n != b_axes.n) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: the axis lists of a and b must have one length, got %d and %d", op, a_axes.n,
                 b_axes.n);
    return jx_poison();
  }
  for (int i = 0; i < a_axes.n; i++) {
    int x = jx_normalize_axis(a_axes.v[i], a->shape.rank, op);
    int y = x < 0 ? -1 : jx_normalize_axis(b_axes.v[i], b->shape.rank, op);
    if (y < 0) return jx_poison();
    if (a->shape.dims[x] != b->shape.dims[y]) {
      jx_error_set(JX_ERR_SHAPE, "%s: axis %d of %s (%lld) and axis %d of %s (%lld) differ", op, x,
                   str(a, sa), (long long)a->shape.dims[x], y, str(b, sb),
                   (long long)b->shape.dims[y]);
      return jx_poison();
    }
    a_axes.v[i] = x;
    b_axes.v[i] = y;
  }
  return jx_dot_general(a, b, a_axes, b_axes, JX_AXES(), JX_AXES());
}

jx_array *jx_tensordot(jx_array *a, jx_array *b, int n) {
  const char *op = "jx_tensordot";
  if (jx_check_inputs(op, 2, (jx_array *[]){a, b})) return jx_poison();
  if (n < 0 || n > a->shape.rank || n > b->shape.rank) {
    char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: cannot contract %d axes of %s with %s (at most the smaller rank)", op, n,
                 str(a, sa), str(b, sb));
    return jx_poison();
  }
  jx_axes la = {n, {0}}, lb = {n, {0}};
  for (int i = 0; i < n; i++) {
    la.v[i] = a->shape.rank - n + i;
    lb.v[i] = i;
  }
  return jx_tensordot_axes(a, b, la, lb);
}

jx_array *jx_outer(jx_array *a, jx_array *b) {
  if (jx_check_inputs("jx_outer", 2, (jx_array *[]){a, b})) return jx_poison();
  jx_array *col = jx_reshape(a, JX_SHAPE(-1, 1)), *row = jx_reshape(b, JX_SHAPE(1, -1));
  return jx_mul(col, row);
}

/* kron: a's axes interleaved with b's (a at even positions, b at odd), multiplied and merged */
jx_array *jx_kron(jx_array *a, jx_array *b) {
  const char *op = "jx_kron";
  if (jx_check_inputs(op, 2, (jx_array *[]){a, b})) return jx_poison();
  int r = a->shape.rank > b->shape.rank ? a->shape.rank : b->shape.rank;
  if (2 * r > JX_MAX_RANK) {
    char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: %s and %s: rank above %d is not supported", op,
                 str(a, sa), str(b, sb), JX_MAX_RANK / 2);
    return jx_poison();
  }
  jx_shape sa = {2 * r, {0}}, sb = {2 * r, {0}}, out = {r, {0}};
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->shape.rank), ib = i - (r - b->shape.rank);
    int64_t da = ia >= 0 ? a->shape.dims[ia] : 1, db = ib >= 0 ? b->shape.dims[ib] : 1;
    sa.dims[2 * i] = da;
    sa.dims[2 * i + 1] = 1;
    sb.dims[2 * i] = 1;
    sb.dims[2 * i + 1] = db;
    out.dims[i] = da * db;
  }
  return jx_reshape(jx_mul(jx_reshape(a, sa), jx_reshape(b, sb)), out);
}

jx_array *jx_diagonal(jx_array *a, int offset, int axis1, int axis2) {
  const char *op = "jx_diagonal";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  char sa[JX_AVAL_STR_CAP];
  int r = a->shape.rank;
  if (r < 2) {
    jx_error_set(JX_ERR_SHAPE, "%s: needs an array of at least 2 dims, got %s", op, str(a, sa));
    return jx_poison();
  }
  int x = jx_normalize_axis(axis1, r, op), y = x < 0 ? -1 : jx_normalize_axis(axis2, r, op);
  if (y < 0) return jx_poison();
  if (x == y) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: axis1 and axis2 are both axis %d of %s", op, x,
                 str(a, sa));
    return jx_poison();
  }
  jx_axes perm = {0, {0}};
  jx_shape flat = {0, {0}};
  for (int d = 0; d < r; d++)
    if (d != x && d != y) {
      perm.v[perm.n++] = d;
      flat.dims[flat.rank++] = a->shape.dims[d];
    }
  perm.v[perm.n++] = x;
  perm.v[perm.n++] = y;
  int64_t n = a->shape.dims[x], m = a->shape.dims[y];
  int64_t len = offset >= 0 ? (n < m - offset ? n : m - offset) : (n + offset < m ? n + offset : m);
  if (len < 0) len = 0;
  flat.dims[flat.rank++] = n * m;
  jx_array *plane = jx_reshape(jx_transpose(a, perm), flat);
  if (len == 0) return jx_ops_slice_axis(plane, flat.rank - 1, 0, 0, 1);
  int64_t start = offset >= 0 ? offset : -(int64_t)offset * m;
  return jx_ops_slice_axis(plane, flat.rank - 1, start, start + (len - 1) * (m + 1) + 1, m + 1);
}

jx_array *jx_matrix_trace(jx_array *a, int offset, int axis1, int axis2) {
  jx_array *d = jx_diagonal(a, offset, axis1, axis2);
  return jx_sum(d, JX_AXES(-1), 0);
}

/* the [n, m] bool mask j <= i + k (jnp.tri) */
static jx_array *tri(int64_t n, int64_t m, int k) {
  jx_array *i = jx_iota(JX_I32, JX_SHAPE(n, m), 0), *j = jx_iota(JX_I32, JX_SHAPE(n, m), 1);
  return jx_le(j, jx_add(i, jx_scalar(JX_I64, k)));
}

static jx_array *triangle(const char *op, jx_array *a, int k, int lower) {
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int r = a->shape.rank;
  if (r < 2) {
    char sa[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE, "%s: needs an array of at least 2 dims, got %s", op, str(a, sa));
    return jx_poison();
  }
  jx_array *mask = tri(a->shape.dims[r - 2], a->shape.dims[r - 1], lower ? k : k - 1);
  jx_array *zero = jx_zeros_like(a);
  return lower ? jx_where(mask, a, zero) : jx_where(mask, zero, a);
}

jx_array *jx_tril(jx_array *a, int k) { return triangle("jx_tril", a, k, 1); }
jx_array *jx_triu(jx_array *a, int k) { return triangle("jx_triu", a, k, 0); }

jx_array *jx_diag(jx_array *v, int k) {
  const char *op = "jx_diag";
  if (jx_check_inputs(op, 1, &v)) return jx_poison();
  if (v->shape.rank == 2) return jx_diagonal(v, k, 0, 1);
  if (v->shape.rank != 1) {
    char sa[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE, "%s: the input must be 1-D or 2-D, got %s", op, str(v, sa));
    return jx_poison();
  }
  int64_t ak = k < 0 ? -(int64_t)k : k, n = v->shape.dims[0] + ak;
  /* v padded to n so that row i's diagonal element (column i + k) reads v[column] */
  jx_array *row = jx_pad_general(v, jx_ops_const_like(v, 0), JX_SHAPE(k > 0 ? k : 0),
                                 JX_SHAPE(k < 0 ? -(int64_t)k : 0), JX_SHAPE(0));
  jx_array *i = jx_iota(JX_I32, JX_SHAPE(n, n), 0), *j = jx_iota(JX_I32, JX_SHAPE(n, n), 1);
  jx_array *on = jx_eq(j, jx_add(i, jx_scalar(JX_I64, k)));
  jx_array *rows = jx_broadcast_to(row, JX_SHAPE(n, n));
  return jx_where(on, rows, jx_zeros_like(rows));
}
