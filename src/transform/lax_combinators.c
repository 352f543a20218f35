/* lax.map, lax.associative_scan and lax.reduce with a generic monoid,
 * written as JAX writes them on the transformations and ops below them, so
 * that they differentiate, batch and jit wherever the user's function
 * does: map is a scan without a carry; associative_scan is JAX's recursive
 * odd/even scan (Blelloch), calling the combining function on whole
 * strided slices; reduce is the pairwise tree JAX differentiates its
 * generic reduce with, the scalar monoid vmapped over the other axes. */
#include <stdlib.h>

#include <jx/transform.h>

#include "../base/error.h"
#include "../ops/ops_util.h"

/* ---- map ---- */

static void map_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_call((jx_fn *)ctx, in, out);
}

jx_status jx_map(jx_fn *f, int nxs, jx_array *const *xs, jx_array **out) {
  const char *op = "jx_map";
  if (!f || !out || nxs < 1 || !xs)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs f, out and at least one xs (given %d)",
                        op, nxs);
  int nout = jx_fn_nout(f);
  for (int i = 0; i < nout; i++) out[i] = jx_poison();
  if (jx_fn_nin(f) != nxs)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %s takes %d inputs, given %d xs", op,
                        jx_fn_name(f), jx_fn_nin(f), nxs);
  jx_status st = jx_check_inputs(op, nxs, xs);
  if (st) return st;
  char s0[JX_AVAL_STR_CAP], si[JX_AVAL_STR_CAP];
  for (int i = 0; i < nxs; i++)
    if (xs[i]->shape.rank < 1 || xs[i]->shape.dims[0] != xs[0]->shape.dims[0])
      return jx_error_set(JX_ERR_SHAPE, "%s: xs %d %s must have the leading axis of xs 0 %s", op, i,
                          jx_aval_str(xs[i]->dtype, xs[i]->shape, si),
                          jx_aval_str(xs[0]->dtype, xs[0]->shape, s0));
  jx_fn *body = jx_fn_create(jx_fn_name(f), nxs, nout, map_body, f);
  if (!body) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  st = jx_scan(body, 0, NULL, nxs, xs, xs[0]->shape.dims[0], 0, out);
  jx_fn_release(body);
  return st;
}

/* lax.map's batch_size: vmap(f) over whole batches in a scan, then over the remainder */
jx_status jx_map_batched(jx_fn *f, int64_t batch_size, int nxs, jx_array *const *xs,
                         jx_array **out) {
  const char *op = "jx_map_batched";
  if (!f || !out || nxs < 1 || nxs > 64 || !xs)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs f, out and 1 to 64 xs (given %d)", op,
                        nxs);
  int nout = jx_fn_nout(f);
  for (int i = 0; i < nout; i++) out[i] = jx_poison();
  if (batch_size < 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: batch_size %lld must be >= 1", op,
                        (long long)batch_size);
  jx_status st = jx_check_inputs(op, nxs, xs);
  if (st) return st;
  char s0[JX_AVAL_STR_CAP], si[JX_AVAL_STR_CAP];
  for (int i = 0; i < nxs; i++)
    if (xs[i]->shape.rank < 1 || xs[i]->shape.rank >= JX_MAX_RANK ||
        xs[i]->shape.dims[0] != xs[0]->shape.dims[0])
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: xs %d %s must have the leading axis of xs 0 %s (rank below %d)", op,
                          i, jx_aval_str(xs[i]->dtype, xs[i]->shape, si),
                          jx_aval_str(xs[0]->dtype, xs[0]->shape, s0), JX_MAX_RANK);
  int64_t n = xs[0]->shape.dims[0], nb = n / batch_size, whole = nb * batch_size;
  jx_fn *vf = jx_vmap(f, JX_AXES(), JX_AXES());
  if (!vf) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_array *in[64], *ys[64], *rest[64];
  if (nb > 0) {
    for (int i = 0; i < nxs; i++) {
      jx_shape s = xs[i]->shape, bs = {s.rank + 1, {nb, batch_size}};
      for (int d = 1; d < s.rank; d++) bs.dims[d + 1] = s.dims[d];
      in[i] = jx_reshape(jx_ops_slice_axis(xs[i], 0, 0, whole, 1), bs);
    }
    st = jx_map(vf, nxs, in, ys);
    for (int o = 0; o < nout && !st; o++) {
      jx_shape s = jx_shape_of(ys[o]), flat = {s.rank - 1, {whole}};
      for (int d = 2; d < s.rank; d++) flat.dims[d - 1] = s.dims[d];
      ys[o] = jx_reshape(ys[o], flat);
    }
  }
  if (!st && whole < n) {
    for (int i = 0; i < nxs; i++) in[i] = jx_ops_slice_axis(xs[i], 0, whole, n, 1);
    st = jx_call(vf, in, rest);
    for (int o = 0; o < nout && !st; o++)
      ys[o] = nb > 0 ? jx_concatenate(2, (jx_array *[]){ys[o], rest[o]}, 0) : rest[o];
  }
  jx_fn_release(vf);
  if (st) return st;
  for (int o = 0; o < nout; o++) out[o] = ys[o];
  return jx_check_inputs(op, nout, out);
}

/* ---- associative_scan ---- */

typedef struct {
  jx_fn *fn;
  int n, axis;
} assoc;

static jx_status combine(const assoc *c, jx_array *const *a, jx_array *const *b, jx_array **out) {
  jx_array *in[2 * 64];
  for (int i = 0; i < c->n; i++) {
    in[i] = a[i];
    in[c->n + i] = b[i];
  }
  return jx_call(c->fn, in, out);
}

static jx_array *strided(const assoc *c, jx_array *x, int64_t start, int64_t stop, int64_t step) {
  int64_t len = jx_shape_of(x).dims[c->axis];
  if (stop > len) stop = len;
  if (start > stop) start = stop;
  return jx_ops_slice_axis(x, c->axis, start, stop, step);
}

/* a at the even positions, b at the odd ones (a as long as b or one longer) */
static jx_array *interleave(const assoc *c, jx_array *a, jx_array *b) {
  jx_shape s = jx_shape_of(a), zero = {s.rank, {0}}, ahi = zero, blo = zero, bhi = zero,
           inner = zero;
  int same = s.dims[c->axis] == jx_shape_of(b).dims[c->axis];
  ahi.dims[c->axis] = same;
  blo.dims[c->axis] = 1;
  bhi.dims[c->axis] = !same;
  inner.dims[c->axis] = 1;
  jx_array *z = jx_ops_const_like(a, 0);
  jx_array *pa = jx_pad_general(a, z, zero, ahi, inner),
           *pb = jx_pad_general(b, z, blo, bhi, inner);
  return jx_dtype_of(a) == JX_BOOL ? jx_logical_or(pa, pb) : jx_add(pa, pb);
}

static jx_status scan_rec(const assoc *c, jx_array *const *e, jx_array **out) {
  int n = c->n;
  int64_t num = jx_shape_of(e[0]).dims[c->axis];
  if (num < 2) {
    for (int i = 0; i < n; i++) out[i] = e[i];
    return JX_OK;
  }
  jx_array *a[64], *b[64], *red[64], *odd[64], *even[64];
  for (int i = 0; i < n; i++) {
    a[i] = strided(c, e[i], 0, num - 1, 2);
    b[i] = strided(c, e[i], 1, num, 2);
  }
  jx_status st = combine(c, a, b, red);
  if (!st) st = scan_rec(c, red, odd);
  if (st) return st;
  for (int i = 0; i < n; i++) {
    int64_t nodd = jx_shape_of(odd[i]).dims[c->axis];
    a[i] = num % 2 == 0 ? strided(c, odd[i], 0, nodd - 1, 1) : odd[i];
    b[i] = strided(c, e[i], 2, num, 2);
  }
  if ((st = combine(c, a, b, even))) return st;
  for (int i = 0; i < n; i++) {
    jx_array *first = strided(c, e[i], 0, 1, 1);
    even[i] = jx_concatenate(2, (jx_array *[]){first, even[i]}, c->axis);
    out[i] = interleave(c, even[i], odd[i]);
  }
  return jx_check_inputs("jx_associative_scan", n, out);
}

jx_status jx_associative_scan(jx_fn *fn, int n, jx_array *const *elems, int reverse, int axis,
                              jx_array **out) {
  const char *op = "jx_associative_scan";
  if (!fn || !out || n < 1 || n > 64 || !elems)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs fn, out and 1 to 64 elems (given %d)",
                        op, n);
  for (int i = 0; i < n; i++) out[i] = jx_poison();
  if (jx_fn_nin(fn) != 2 * n || jx_fn_nout(fn) != n)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: %s must take %d inputs (a..., b...) and give %d, not %d -> %d", op,
                        jx_fn_name(fn), 2 * n, n, jx_fn_nin(fn), jx_fn_nout(fn));
  jx_status st = jx_check_inputs(op, n, elems);
  if (st) return st;
  int rank = elems[0]->shape.rank;
  int ax = jx_normalize_axis(axis, rank, op);
  if (ax < 0) return JX_ERR_INVALID_ARGUMENT;
  char s0[JX_AVAL_STR_CAP], si[JX_AVAL_STR_CAP];
  for (int i = 1; i < n; i++)
    if (elems[i]->shape.rank <= ax || elems[i]->shape.dims[ax] != elems[0]->shape.dims[ax])
      return jx_error_set(JX_ERR_SHAPE, "%s: elems %d %s and elems 0 %s differ along axis %d", op,
                          i, jx_aval_str(elems[i]->dtype, elems[i]->shape, si),
                          jx_aval_str(elems[0]->dtype, elems[0]->shape, s0), ax);
  assoc c = {fn, n, ax};
  jx_array *e[64];
  for (int i = 0; i < n; i++) e[i] = reverse ? jx_flip(elems[i], JX_AXES(ax)) : elems[i];
  if ((st = scan_rec(&c, e, out))) {
    for (int i = 0; i < n; i++) out[i] = jx_poison();
    return st;
  }
  for (int i = 0; i < n && reverse; i++) out[i] = jx_flip(out[i], JX_AXES(ax));
  return jx_check_inputs(op, n, out);
}

/* ---- reduce ---- */

jx_status jx_reduce(jx_fn *fn, int n, jx_array *const *operands, jx_array *const *init,
                    jx_axes axes, jx_array **out) {
  const char *op = "jx_reduce";
  if (!fn || !out || n < 1 || n > 32 || !operands || !init)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: needs fn, out, init and 1 to 32 operands (given %d)", op, n);
  for (int i = 0; i < n; i++) out[i] = jx_poison();
  if (jx_fn_nin(fn) != 2 * n || jx_fn_nout(fn) != n)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: %s must take %d inputs (a..., b...) and give %d, not %d -> %d", op,
                        jx_fn_name(fn), 2 * n, n, jx_fn_nin(fn), jx_fn_nout(fn));
  jx_status st = jx_check_inputs(op, n, operands);
  if (!st) st = jx_check_inputs(op, n, init);
  if (st) return st;
  char s0[JX_AVAL_STR_CAP], si[JX_AVAL_STR_CAP];
  jx_shape s = operands[0]->shape;
  for (int i = 0; i < n; i++) {
    if (!jx_shape_equal(operands[i]->shape, s))
      return jx_error_set(JX_ERR_SHAPE, "%s: operand %d %s and operand 0 %s differ in shape", op, i,
                          jx_aval_str(operands[i]->dtype, operands[i]->shape, si),
                          jx_aval_str(operands[0]->dtype, s, s0));
    if (init[i]->shape.rank != 0 || init[i]->dtype != operands[i]->dtype)
      return jx_error_set(JX_ERR_SHAPE, "%s: init %d %s must be a scalar of operand %d's dtype %s",
                          op, i, jx_aval_str(init[i]->dtype, init[i]->shape, si), i,
                          jx_dtype_name(operands[i]->dtype));
  }
  jx_ilist ax;
  if ((st = jx_ops_axes(op, axes, s.rank, 0, &ax))) return st;
  /* the reduced axes first, merged into one */
  int reduced[JX_MAX_RANK] = {0};
  for (int i = 0; i < ax.n; i++) reduced[ax.v[i]] = 1;
  jx_axes perm = {0, {0}};
  jx_shape flat = {1, {1}}, rest = {0, {0}};
  for (int d = 0; d < s.rank; d++)
    if (reduced[d]) {
      perm.v[perm.n++] = d;
      flat.dims[0] *= s.dims[d];
    }
  for (int d = 0; d < s.rank; d++)
    if (!reduced[d]) {
      perm.v[perm.n++] = d;
      flat.dims[flat.rank++] = s.dims[d];
      rest.dims[rest.rank++] = s.dims[d];
    }
  jx_array *x[64];
  for (int i = 0; i < n; i++) x[i] = jx_reshape(jx_transpose(operands[i], perm), flat);
  int64_t len = flat.dims[0];
  if (len == 0) {
    for (int i = 0; i < n; i++) out[i] = jx_broadcast_to(init[i], rest);
    return jx_check_inputs(op, n, out);
  }
  /* the scalar monoid over every axis of the flattened operands */
  jx_fn *mapped = fn, *made[JX_MAX_RANK + 1];
  int nmade = 0;
  for (int d = 0; d < flat.rank && !st; d++) {
    mapped = jx_vmap(mapped, JX_AXES(), JX_AXES());
    if (!mapped)
      st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    else
      made[nmade++] = mapped;
  }
  jx_shape zero = {flat.rank, {0}}, one = zero;
  one.dims[0] = 1;
  while (!st && len > 1) {
    int64_t n1 = (len + 1) / 2, n2 = len - n1;
    jx_array *in[64];
    for (int i = 0; i < n; i++) {
      in[i] = jx_ops_slice_axis(x[i], 0, 0, n1, 1);
      in[n + i] = jx_ops_slice_axis(x[i], 0, n1, len, 1);
      if (n2 != n1) in[n + i] = jx_pad_general(in[n + i], init[i], zero, one, zero);
    }
    st = jx_call(mapped, in, x);
    len = n1;
  }
  for (int i = 0; i < nmade; i++) jx_fn_release(made[i]);
  if (st) {
    for (int i = 0; i < n; i++) out[i] = jx_poison();
    return st;
  }
  for (int i = 0; i < n; i++) out[i] = jx_reshape(x[i], rest);
  return jx_check_inputs(op, n, out);
}
