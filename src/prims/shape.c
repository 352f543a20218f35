/* Shape primitives: broadcast_in_dim, reshape, squeeze, expand_dims,
 * transpose, rev, iota. All but iota only move elements, so their kernels
 * copy whole elements by size and handle every dtype alike; they keep the
 * operand's dtype and weak type, as JAX does. Their JVP, transpose and
 * batching rules are in shape_rules.c. */
#include <string.h>

#include "../base/error.h"
#include "prims.h"
#include "rules.h"
#include "strided_copy.h"
#include "structural_rules.h"

/* ---- helpers ---- */

/* "[2,3]" of a parameter list into buf. */
static char *list_str(const jx_ilist *l, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < l->n && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, i ? ",%lld" : "%lld", (long long)l->v[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}

static jx_status check_list(const char *prim, const char *what, const jx_ilist *l) {
  if (l->n < 0 || l->n > JX_MAX_RANK)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %s has %d entries (at most %d)", prim, what,
                        l->n, JX_MAX_RANK);
  return JX_OK;
}

/* A shape from a parameter list, checked (non-negative dims). */
static jx_status list_shape(const char *prim, const jx_ilist *l, jx_shape *out) {
  jx_status st = check_list(prim, "shape", l);
  if (st) return st;
  out->rank = l->n;
  for (int i = 0; i < l->n; i++) {
    if (l->v[i] < 0) {
      char b[160];
      return jx_error_set(JX_ERR_SHAPE, "%s: negative dimension in shape %s", prim,
                          list_str(l, b, sizeof b));
    }
    out->dims[i] = l->v[i];
  }
  return JX_OK;
}

/* Checks that l lists distinct dims in [0, rank); marks them in seen. */
static jx_status distinct_dims(const char *prim, const char *what, const jx_ilist *l, int rank,
                               const jx_aval *a, int *seen) {
  char s[JX_AVAL_STR_CAP], b[160];
  jx_status st = check_list(prim, what, l);
  if (st) return st;
  for (int i = 0; i < rank; i++) seen[i] = 0;
  for (int i = 0; i < l->n; i++) {
    int64_t d = l->v[i];
    if (d < 0 || d >= rank || seen[d])
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: %s %s must be distinct dims in [0, %d) for operand %s", prim, what,
                          list_str(l, b, sizeof b), rank, jx_aval_str(a->dtype, a->shape, s));
    seen[d] = 1;
  }
  return JX_OK;
}

/* Rules may be run outside jx_bind (by the IR verifier), so they check the count too. */
static jx_status one_operand(const char *prim, int nin) {
  if (nin != 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: takes 1 operand, given %d", prim, nin);
  return JX_OK;
}

/* ---- broadcast_in_dim: l0 = output shape, l1 = broadcast_dimensions ---- */
static jx_status infer_broadcast_in_dim(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  const char *n = "broadcast_in_dim";
  jx_status st = one_operand(n, ctx->nin);
  if (st) return st;
  jx_shape s;
  if ((st = list_shape(n, &p->l[0], &s)) || (st = check_list(n, "broadcast_dimensions", &p->l[1])))
    return st;
  char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP], d[160];
  const jx_ilist *bd = &p->l[1];
  if (bd->n != in->shape.rank)
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: broadcast_dimensions %s must have one entry per dim of operand %s", n,
                        list_str(bd, d, sizeof d), jx_aval_str(in->dtype, in->shape, a));
  for (int i = 0; i < bd->n; i++) {
    int64_t o = bd->v[i];
    if (o < 0 || o >= s.rank || (i > 0 && o <= bd->v[i - 1]))
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: broadcast_dimensions %s must be strictly increasing dims of "
                          "the output %s",
                          n, list_str(bd, d, sizeof d), jx_aval_str(in->dtype, s, b));
    if (in->shape.dims[i] != 1 && in->shape.dims[i] != s.dims[o])
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: operand %s cannot broadcast to %s with broadcast_dimensions %s "
                          "(operand dim %d is %lld, output dim %lld is %lld)",
                          n, jx_aval_str(in->dtype, in->shape, a), jx_aval_str(in->dtype, s, b),
                          list_str(bd, d, sizeof d), i, (long long)in->shape.dims[i], (long long)o,
                          (long long)s.dims[o]);
  }
  *out = (jx_aval){in->dtype, in->weak, s, 0};
  return JX_OK;
}
static void eval_broadcast_in_dim(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  int64_t own[JX_MAX_RANK], st[JX_MAX_RANK] = {0};
  jx_shape_strides(in->shape, own);
  for (int d = 0; d < in->shape.rank; d++)
    if (in->shape.dims[d] != 1) st[ctx->params->l[1].v[d]] = own[d];
  jx_strided_copy(out->data, out->shape, in->data, st, jx_dtype_size(in->dtype));
}

/* ---- reshape: l0 = new shape (same element count) ---- */
static jx_status infer_reshape(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = one_operand("reshape", ctx->nin);
  jx_shape s;
  if (st || (st = list_shape("reshape", &ctx->params->l[0], &s))) return st;
  if (jx_shape_numel(s) != jx_shape_numel(in->shape)) {
    char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_SHAPE, "reshape: cannot reshape %s (%lld elements) to %s",
                        jx_aval_str(in->dtype, in->shape, a), (long long)jx_shape_numel(in->shape),
                        jx_aval_str(in->dtype, s, b));
  }
  *out = (jx_aval){in->dtype, in->weak, s, 0};
  return JX_OK;
}
/* Row-major order is unchanged by a reshape: a plain copy. */
static void eval_copy(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  size_t bytes = (size_t)jx_shape_numel(in->shape) * jx_dtype_size(in->dtype);
  if (bytes) memcpy(out->data, in->data, bytes);
}

/* ---- squeeze: l0 = dims to drop, each of size 1 ---- */
static jx_status infer_squeeze(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  int seen[JX_MAX_RANK];
  jx_status st = one_operand("squeeze", ctx->nin);
  if (st ||
      (st = distinct_dims("squeeze", "dimensions", &ctx->params->l[0], in->shape.rank, in, seen)))
    return st;
  jx_shape s = {0, {0}};
  for (int d = 0; d < in->shape.rank; d++) {
    if (!seen[d]) {
      s.dims[s.rank++] = in->shape.dims[d];
    } else if (in->shape.dims[d] != 1) {
      char a[JX_AVAL_STR_CAP];
      return jx_error_set(JX_ERR_SHAPE,
                          "squeeze: cannot squeeze dim %d of %s: its size is %lld, not 1", d,
                          jx_aval_str(in->dtype, in->shape, a), (long long)in->shape.dims[d]);
    }
  }
  *out = (jx_aval){in->dtype, in->weak, s, 0};
  return JX_OK;
}

/* ---- expand_dims: l0 = the new size-1 dims, as dims of the output ---- */
static jx_status infer_expand_dims(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  int seen[JX_MAX_RANK];
  jx_status st = one_operand("expand_dims", ctx->nin);
  if (st || (st = check_list("expand_dims", "dimensions", &p->l[0]))) return st;
  int r = in->shape.rank + p->l[0].n;
  if (r > JX_MAX_RANK) {
    char a[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_SHAPE,
                        "expand_dims: %s with %d new dims has more than %d dimensions",
                        jx_aval_str(in->dtype, in->shape, a), p->l[0].n, JX_MAX_RANK);
  }
  if ((st = distinct_dims("expand_dims", "dimensions", &p->l[0], r, in, seen))) return st;
  jx_shape s = {r, {0}};
  for (int d = 0, k = 0; d < r; d++) s.dims[d] = seen[d] ? 1 : in->shape.dims[k++];
  *out = (jx_aval){in->dtype, in->weak, s, 0};
  return JX_OK;
}

/* ---- transpose: l0 = permutation; output dim i is operand dim perm[i] ---- */
static jx_status infer_transpose(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  int seen[JX_MAX_RANK];
  jx_status st = one_operand("transpose", ctx->nin);
  if (st) return st;
  if (p->l[0].n != in->shape.rank) {
    char a[JX_AVAL_STR_CAP], b[160];
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "transpose: permutation %s is not a permutation of the dims of %s",
                        list_str(&p->l[0], b, sizeof b), jx_aval_str(in->dtype, in->shape, a));
  }
  if ((st = distinct_dims("transpose", "permutation", &p->l[0], in->shape.rank, in, seen)))
    return st;
  jx_shape s = {in->shape.rank, {0}};
  for (int d = 0; d < s.rank; d++) s.dims[d] = in->shape.dims[p->l[0].v[d]];
  *out = (jx_aval){in->dtype, in->weak, s, 0};
  return JX_OK;
}
static void eval_transpose(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  int64_t own[JX_MAX_RANK], st[JX_MAX_RANK];
  jx_shape_strides(in->shape, own);
  for (int d = 0; d < in->shape.rank; d++) st[d] = own[ctx->params->l[0].v[d]];
  jx_strided_copy(out->data, out->shape, in->data, st, jx_dtype_size(in->dtype));
}

/* ---- rev: l0 = dims to reverse ---- */
static jx_status infer_rev(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  int seen[JX_MAX_RANK];
  jx_status st = one_operand("rev", ctx->nin);
  if (st || (st = distinct_dims("rev", "dimensions", &ctx->params->l[0], in->shape.rank, in, seen)))
    return st;
  *out = (jx_aval){in->dtype, in->weak, in->shape, 0};
  return JX_OK;
}
static void eval_rev(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  /* a reversed dimension starts at its last element and steps backwards */
  int64_t st[JX_MAX_RANK], first = 0;
  jx_shape_strides(in->shape, st);
  for (int k = 0; k < p->l[0].n; k++) {
    int64_t d = p->l[0].v[k];
    if (in->shape.dims[d] > 0) first += (in->shape.dims[d] - 1) * st[d];
    st[d] = -st[d];
  }
  size_t es = jx_dtype_size(in->dtype);
  jx_strided_copy(out->data, out->shape, (const char *)in->data + first * (int64_t)es, st, es);
}

/* Row-major unravel of a flat index. */
static void unravel(int64_t flat, jx_shape s, int64_t *idx) {
  for (int d = s.rank - 1; d >= 0; d--) {
    idx[d] = s.dims[d] ? flat % s.dims[d] : 0;
    flat = s.dims[d] ? flat / s.dims[d] : 0;
  }
}

/* ---- iota: no operands; dtype, l0 = shape, i0 = dimension that counts ---- */
static jx_status infer_iota(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  (void)in;
  if (ctx->nin != 0)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "iota: takes no operands, given %d", ctx->nin);
  jx_shape s;
  jx_status st = list_shape("iota", &p->l[0], &s);
  if (st) return st;
  char a[JX_AVAL_STR_CAP];
  if (!jx_dtype_valid(p->dtype) || p->dtype == JX_BOOL)
    return jx_error_set(JX_ERR_DTYPE, "iota: dtype %s is not numeric", jx_dtype_name(p->dtype));
  if (p->i[0] < 0 || p->i[0] >= s.rank)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "iota: dimension %lld out of range for %s",
                        (long long)p->i[0], jx_aval_str(p->dtype, s, a));
  *out = (jx_aval){p->dtype, 0, s, 0};
  return JX_OK;
}
static void eval_iota(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  (void)in;
  int64_t n = jx_shape_numel(out->shape), idx[JX_MAX_RANK];
  for (int64_t i = 0; i < n; i++) {
    unravel(i, out->shape, idx);
    if (jx_is_float(p->dtype))
      jx_store_f64(out->data, p->dtype, i, (double)idx[p->i[0]]);
    else
      jx_store_i64(out->data, p->dtype, i, idx[p->i[0]]);
  }
}

const jx_prim jx_prim_broadcast_in_dim = {.name = "broadcast_in_dim",
                                          .id = JX_PRIM_broadcast_in_dim,
                                          .nin = 1,
                                          .nout = 1,
                                          .params = "shape=l0 broadcast_dimensions=l1",
                                          .infer = infer_broadcast_in_dim,
                                          .eval = eval_broadcast_in_dim,
                                          .jvp = jx_jvp_linear_first,
                                          .transpose = jx_transpose_broadcast_in_dim,
                                          .batch = jx_batch_broadcast_in_dim};
const jx_prim jx_prim_reshape = {.name = "reshape",
                                 .id = JX_PRIM_reshape,
                                 .nin = 1,
                                 .nout = 1,
                                 .params = "new_sizes=l0",
                                 .infer = infer_reshape,
                                 .eval = eval_copy,
                                 .jvp = jx_jvp_linear_first,
                                 .transpose = jx_transpose_reshape,
                                 .batch = jx_batch_reshape};
const jx_prim jx_prim_squeeze = {.name = "squeeze",
                                 .id = JX_PRIM_squeeze,
                                 .nin = 1,
                                 .nout = 1,
                                 .params = "dimensions=l0",
                                 .infer = infer_squeeze,
                                 .eval = eval_copy,
                                 .jvp = jx_jvp_linear_first,
                                 .transpose = jx_transpose_squeeze,
                                 .batch = jx_batch_squeeze};
const jx_prim jx_prim_expand_dims = {.name = "expand_dims",
                                     .id = JX_PRIM_expand_dims,
                                     .nin = 1,
                                     .nout = 1,
                                     .params = "dimensions=l0",
                                     .infer = infer_expand_dims,
                                     .eval = eval_copy,
                                     .jvp = jx_jvp_linear_first,
                                     .transpose = jx_transpose_expand_dims,
                                     .batch = jx_batch_expand_dims};
const jx_prim jx_prim_transpose = {.name = "transpose",
                                   .id = JX_PRIM_transpose,
                                   .nin = 1,
                                   .nout = 1,
                                   .params = "permutation=l0",
                                   .infer = infer_transpose,
                                   .eval = eval_transpose,
                                   .jvp = jx_jvp_linear_first,
                                   .transpose = jx_transpose_transpose,
                                   .batch = jx_batch_transpose};
const jx_prim jx_prim_rev = {.name = "rev",
                             .id = JX_PRIM_rev,
                             .nin = 1,
                             .nout = 1,
                             .params = "dimensions=l0",
                             .infer = infer_rev,
                             .eval = eval_rev,
                             .jvp = jx_jvp_linear_first,
                             .transpose = jx_transpose_rev,
                             .batch = jx_batch_rev};
const jx_prim jx_prim_iota = {.name = "iota",
                              .id = JX_PRIM_iota,
                              .nin = 0,
                              .nout = 1,
                              .params = "dtype shape=l0 dimension=i0",
                              .infer = infer_iota,
                              .eval = eval_iota};
const jx_prim *const jx_prims_shape[] = {
    &jx_prim_broadcast_in_dim, &jx_prim_reshape, &jx_prim_squeeze, &jx_prim_expand_dims,
    &jx_prim_transpose,        &jx_prim_rev,     &jx_prim_iota,    NULL};
