/* Slicing primitives: pad, concatenate, slice, dynamic_slice,
 * dynamic_update_slice (lax semantics). Kernels move whole elements by size,
 * so every dtype is handled alike; results keep the operand's weak type.
 * Dynamic starts are clamped into [0, dim - size] as XLA does, so a start out
 * of range never reads or writes out of bounds. Transformation rules are in
 * slicing_rules.c. */
#include <string.h>

#include "../base/error.h"
#include "prims.h"
#include "rules.h"
#include "strided_copy.h"
#include "structural_rules.h"

/* ---- helpers ---- */
static char *list_str(const jx_ilist *l, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < l->n && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, i ? ",%lld" : "%lld", (long long)l->v[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}

/* Checks that list l of prim has one entry per dim of operand a. */
static jx_status per_dim(const char *prim, const char *what, const jx_ilist *l, const jx_aval *a) {
  if (l->n != a->shape.rank) {
    char s[JX_AVAL_STR_CAP], b[160];
    return jx_error_set(JX_ERR_SHAPE, "%s: %s %s needs one entry per dim of operand %s", prim, what,
                        l->n >= 0 && l->n <= JX_MAX_RANK ? list_str(l, b, sizeof b) : "?",
                        jx_aval_str(a->dtype, a->shape, s));
  }
  return JX_OK;
}

static void copy_elem(void *dst, int64_t i, const void *src, int64_t j, size_t es) {
  memcpy((char *)dst + (size_t)i * es, (const char *)src + (size_t)j * es, es);
}

/* Copies a box of `box` elements from src (element offset so, strides ss)
 * to dst (offset do_, strides ds): an odometer over the outer dims, and the
 * innermost run one memcpy when both sides are contiguous there, else a
 * loop typed by the element size. Every element is moved, never computed. */
static void copy_box(char *dst, int64_t do_, const int64_t *ds, const char *src, int64_t so,
                     const int64_t *ss, jx_shape box, size_t es) {
  int r = box.rank;
  if (jx_shape_numel(box) == 0) return;
  if (r == 0) {
    copy_elem(dst, do_, src, so, es);
    return;
  }
  int64_t n = box.dims[r - 1], dl = ds[r - 1], sl = ss[r - 1], idx[JX_MAX_RANK] = {0};
  int64_t outer = jx_shape_numel(box) / n;
  for (int64_t o = 0; o < outer; o++) {
    int64_t di = do_, si = so;
    for (int d = 0; d < r - 1; d++) {
      di += idx[d] * ds[d];
      si += idx[d] * ss[d];
    }
    char *dp = dst + (size_t)di * es;
    const char *sp = src + (size_t)si * es;
    if (dl == 1 && sl == 1) {
      memcpy(dp, sp, (size_t)n * es);
    } else if (es == 4) {
      for (int64_t k = 0; k < n; k++) memcpy(dp + 4 * k * dl, sp + 4 * k * sl, 4);
    } else if (es == 8) {
      for (int64_t k = 0; k < n; k++) memcpy(dp + 8 * k * dl, sp + 8 * k * sl, 8);
    } else {
      for (int64_t k = 0; k < n; k++)
        memcpy(dp + (size_t)(k * dl) * es, sp + (size_t)(k * sl) * es, es);
    }
    for (int d = r - 2; d >= 0; d--) { /* the next index of the outer dims */
      if (++idx[d] < box.dims[d]) break;
      idx[d] = 0;
    }
  }
}

/* Fills n elements of dst with the one element at v: doubling copies. */
static void fill(char *dst, int64_t n, const void *v, size_t es) {
  if (n <= 0) return;
  memcpy(dst, v, es);
  size_t done = es, total = (size_t)n * es;
  while (done < total) {
    size_t k = done < total - done ? done : total - done;
    memcpy(dst + done, dst, k);
    done += k;
  }
}

/* A start index scalar as int64, saturating unsigned values above INT64_MAX
 * (they clamp to the top of the range either way). */
static int64_t load_start(const jx_tensor *t) {
  if (jx_is_unsigned_int(t->dtype)) {
    uint64_t u = jx_load_u64(t->data, t->dtype, 0);
    return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
  }
  return jx_load_i64(t->data, t->dtype, 0);
}

static int64_t clamp_start(int64_t s, int64_t dim, int64_t size) {
  int64_t hi = dim - size;
  return s < 0 ? 0 : s > hi ? hi : s;
}

/* Checks in[first..nin) are integer scalars, one per dim of in[0]. */
static jx_status check_starts(const char *prim, int first, int nin, const jx_aval *in) {
  char s[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  if (nin - first != in[0].shape.rank)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: %d start indices given for operand %s of rank %d", prim, nin - first,
                        jx_aval_str(in[0].dtype, in[0].shape, s), in[0].shape.rank);
  for (int i = first; i < nin; i++)
    if (in[i].shape.rank != 0 || !jx_is_int(in[i].dtype))
      return jx_error_set(JX_ERR_DTYPE, "%s: start index %d is %s, not an integer scalar", prim,
                          i - first, jx_aval_str(in[i].dtype, in[i].shape, b));
  return JX_OK;
}

/* ---- pad: operand, padding value (rank 0, same dtype); l0 lo, l1 hi, l2 interior ---- */
static jx_status infer_pad(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  char s[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  if (in[1].shape.rank != 0 || in[1].dtype != in[0].dtype)
    return jx_error_set(
        JX_ERR_DTYPE, "pad: padding value %s must be a scalar of operand %s's dtype",
        jx_aval_str(in[1].dtype, in[1].shape, b), jx_aval_str(in[0].dtype, in[0].shape, s));
  jx_status st;
  if ((st = per_dim("pad", "lo", &p->l[0], in)) || (st = per_dim("pad", "hi", &p->l[1], in)) ||
      (st = per_dim("pad", "interior", &p->l[2], in)))
    return st;
  jx_shape o = in[0].shape;
  for (int d = 0; d < o.rank; d++) {
    int64_t n = o.dims[d], lo = p->l[0].v[d], hi = p->l[1].v[d], it = p->l[2].v[d];
    int64_t sz = lo + hi + n + (n > 0 ? (n - 1) * it : 0);
    if (it < 0 || sz < 0)
      return jx_error_set(JX_ERR_SHAPE,
                          "pad: dim %d of %s with lo %lld, hi %lld, interior %lld gives size "
                          "%lld (interior must be >= 0 and the size >= 0)",
                          d, jx_aval_str(in[0].dtype, in[0].shape, s), (long long)lo, (long long)hi,
                          (long long)it, (long long)sz);
    o.dims[d] = sz;
  }
  *out = (jx_aval){in[0].dtype, in[0].weak, o, 0};
  return JX_OK;
}
/* The output is filled with the padding value, then the operand's elements
 * that land inside it (negative lo/hi crop) are copied as one strided box:
 * along dim d, operand index i goes to lo + i * (interior + 1). */
static void eval_pad(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  size_t es = jx_dtype_size(in[0].dtype);
  int64_t istr[JX_MAX_RANK], ostr[JX_MAX_RANK], ds[JX_MAX_RANK], so = 0, do_ = 0;
  jx_shape box = in[0].shape;
  jx_shape_strides(in[0].shape, istr);
  jx_shape_strides(out->shape, ostr);
  for (int d = 0; d < box.rank; d++) {
    int64_t lo = p->l[0].v[d], step = p->l[2].v[d] + 1, n = in[0].shape.dims[d];
    int64_t first = lo < 0 ? (-lo + step - 1) / step : 0; /* first index at pos >= 0 */
    int64_t room = out->shape.dims[d] - lo;               /* pos < dims: i * step < room */
    int64_t last = room <= 0 ? -1 : (room - 1) / step;
    if (last > n - 1) last = n - 1;
    box.dims[d] = last >= first ? last - first + 1 : 0;
    so += first * istr[d];
    do_ += (lo + first * step) * ostr[d];
    ds[d] = ostr[d] * step;
  }
  /* A box that is one contiguous block of out (no interior padding, whole
   * rows of the inner dims; the identity pad of max_pool's gradient) is
   * moved by the strided copy engine (one memcpy, split over the pool when
   * large), and only what lies around it is filled. */
  int64_t run = 1, total = jx_shape_numel(out->shape), n = jx_shape_numel(box);
  for (int d = box.rank - 1; d >= 0 && run; d--)
    if (box.dims[d] != 1) run = ds[d] == run ? run * box.dims[d] : 0;
  if (run && n > 0) {
    char *o = out->data;
    fill(o, do_, in[1].data, es);
    fill(o + (size_t)(do_ + n) * es, total - do_ - n, in[1].data, es);
    jx_strided_copy(o + (size_t)do_ * es, box, (const char *)in[0].data + (size_t)so * es, istr,
                    es);
    return;
  }
  fill(out->data, total, in[1].data, es);
  copy_box(out->data, do_, ds, in[0].data, so, istr, box, es);
}

/* ---- concatenate: variadic; i0 = dimension ---- */
static jx_status infer_concatenate(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  char s[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  int r = in[0].shape.rank;
  int64_t ax = ctx->params->i[0];
  if (ax < 0 || ax >= r)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "concatenate: dimension %lld out of range for %s",
                        (long long)ax, jx_aval_str(in[0].dtype, in[0].shape, s));
  jx_shape o = in[0].shape;
  int weak = 1;
  for (int i = 0; i < ctx->nin; i++) {
    int ok = in[i].dtype == in[0].dtype && in[i].shape.rank == r;
    for (int d = 0; ok && d < r; d++) ok = d == ax || in[i].shape.dims[d] == o.dims[d];
    if (!ok)
      return jx_error_set(JX_ERR_SHAPE,
                          "concatenate: operand %d is %s, which does not match operand 0's %s "
                          "(same dtype, same dims except dimension %lld)",
                          i, jx_aval_str(in[i].dtype, in[i].shape, b),
                          jx_aval_str(in[0].dtype, in[0].shape, s), (long long)ax);
    if (i > 0) o.dims[ax] += in[i].shape.dims[ax];
    weak = weak && in[i].weak;
  }
  *out = (jx_aval){in[0].dtype, (uint8_t)weak, o, 0};
  return JX_OK;
}
/* Copies each operand's rows of the concatenated dim as contiguous blocks:
 * for every index of the outer dims, operand i contributes dims[ax]*inner
 * consecutive elements. */
static void eval_concatenate(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  int ax = (int)ctx->params->i[0];
  size_t es = jx_dtype_size(out->dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < ax; d++) outer *= out->shape.dims[d];
  for (int d = ax + 1; d < out->shape.rank; d++) inner *= out->shape.dims[d];
  int64_t orow = out->shape.dims[ax] * inner;
  char *dst = out->data;
  for (int64_t o = 0; o < outer; o++) {
    int64_t off = 0;
    for (int i = 0; i < ctx->nin; i++) {
      int64_t rows = in[i].shape.dims[ax] * inner;
      if (rows)
        memcpy(dst + (size_t)(o * orow + off) * es,
               (const char *)in[i].data + (size_t)(o * rows) * es, (size_t)rows * es);
      off += rows;
    }
  }
}

/* ---- slice: l0 start, l1 limit, l2 strides (empty = all 1) ---- */
static int64_t stride_of(const jx_params *p, int d) { return p->l[2].n ? p->l[2].v[d] : 1; }
static jx_status infer_slice(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  jx_status st;
  if ((st = per_dim("slice", "start_indices", &p->l[0], in)) ||
      (st = per_dim("slice", "limit_indices", &p->l[1], in)) ||
      (p->l[2].n != 0 && (st = per_dim("slice", "strides", &p->l[2], in))))
    return st;
  jx_shape o = in->shape;
  for (int d = 0; d < o.rank; d++) {
    int64_t lo = p->l[0].v[d], hi = p->l[1].v[d], sd = stride_of(p, d);
    if (lo < 0 || hi < lo || hi > in->shape.dims[d] || sd < 1) {
      char s[JX_AVAL_STR_CAP];
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "slice: dim %d of %s: start %lld, limit %lld, stride %lld must satisfy "
                          "0 <= start <= limit <= %lld and stride >= 1",
                          d, jx_aval_str(in->dtype, in->shape, s), (long long)lo, (long long)hi,
                          (long long)sd, (long long)in->shape.dims[d]);
    }
    o.dims[d] = (hi - lo + sd - 1) / sd;
  }
  *out = (jx_aval){in->dtype, in->weak, o, 0};
  return JX_OK;
}
static void eval_slice(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  int64_t istr[JX_MAX_RANK], ss[JX_MAX_RANK], ostr[JX_MAX_RANK], so = 0;
  jx_shape_strides(in->shape, istr);
  jx_shape_strides(out->shape, ostr);
  for (int d = 0; d < in->shape.rank; d++) {
    so += p->l[0].v[d] * istr[d];
    ss[d] = istr[d] * stride_of(p, d);
  }
  copy_box(out->data, 0, ostr, in->data, so, ss, out->shape, jx_dtype_size(in->dtype));
}

/* ---- dynamic_slice: operand, one integer scalar start per dim; l0 slice sizes ---- */
static jx_status infer_dynamic_slice(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  jx_status st;
  if ((st = check_starts("dynamic_slice", 1, ctx->nin, in)) ||
      (st = per_dim("dynamic_slice", "slice_sizes", &p->l[0], in)))
    return st;
  jx_shape o = in[0].shape;
  for (int d = 0; d < o.rank; d++) {
    if (p->l[0].v[d] < 0 || p->l[0].v[d] > o.dims[d]) {
      char s[JX_AVAL_STR_CAP], b[160];
      return jx_error_set(JX_ERR_SHAPE, "dynamic_slice: slice_sizes %s do not fit in %s (dim %d)",
                          list_str(&p->l[0], b, sizeof b), jx_aval_str(in[0].dtype, in[0].shape, s),
                          d);
    }
    o.dims[d] = p->l[0].v[d];
  }
  *out = (jx_aval){in[0].dtype, in[0].weak, o, 0};
  return JX_OK;
}
static void eval_dynamic_slice(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  jx_shape is = in[0].shape;
  int64_t istr[JX_MAX_RANK], ostr[JX_MAX_RANK], so = 0;
  jx_shape_strides(is, istr);
  jx_shape_strides(out->shape, ostr);
  for (int d = 0; d < is.rank; d++)
    so += clamp_start(load_start(&in[1 + d]), is.dims[d], ctx->params->l[0].v[d]) * istr[d];
  copy_box(out->data, 0, ostr, in[0].data, so, istr, out->shape, jx_dtype_size(in[0].dtype));
}

/* ---- dynamic_update_slice: operand, update, one integer scalar start per dim ---- */
static jx_status infer_dynamic_update_slice(const jx_rule_ctx *ctx, const jx_aval *in,
                                            jx_aval *out) {
  char s[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  if (ctx->nin < 2)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "dynamic_update_slice: needs an operand and an update");
  jx_status st = check_starts("dynamic_update_slice", 2, ctx->nin, in);
  if (st) return st;
  int ok = in[1].dtype == in[0].dtype && in[1].shape.rank == in[0].shape.rank;
  for (int d = 0; ok && d < in[0].shape.rank; d++) ok = in[1].shape.dims[d] <= in[0].shape.dims[d];
  if (!ok)
    return jx_error_set(JX_ERR_SHAPE,
                        "dynamic_update_slice: update %s must have operand %s's dtype and rank "
                        "and fit inside it",
                        jx_aval_str(in[1].dtype, in[1].shape, b),
                        jx_aval_str(in[0].dtype, in[0].shape, s));
  *out = (jx_aval){in[0].dtype, in[0].weak, in[0].shape, 0};
  return JX_OK;
}
static void eval_dynamic_update_slice(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  jx_shape os = in[0].shape, us = in[1].shape;
  size_t es = jx_dtype_size(in[0].dtype);
  int64_t n = jx_shape_numel(os);
  /* out may be the operand itself (a donated operand updated in place) */
  if (n && out->data != in[0].data) memcpy(out->data, in[0].data, (size_t)n * es);
  int64_t ostr[JX_MAX_RANK], ustr[JX_MAX_RANK], do_ = 0;
  jx_shape_strides(os, ostr);
  jx_shape_strides(us, ustr);
  for (int d = 0; d < os.rank; d++)
    do_ += clamp_start(load_start(&in[2 + d]), os.dims[d], us.dims[d]) * ostr[d];
  copy_box(out->data, do_, ostr, in[1].data, 0, ustr, us, es);
}

const jx_prim jx_prim_pad = {.name = "pad",
                             .id = JX_PRIM_pad,
                             .nin = 2,
                             .nout = 1,
                             .params = "padding_lo=l0 padding_hi=l1 interior=l2",
                             .infer = infer_pad,
                             .eval = eval_pad,
                             .jvp = jx_jvp_pad,
                             .transpose = jx_transpose_pad,
                             .batch = jx_batch_pad};
const jx_prim jx_prim_concatenate = {.name = "concatenate",
                                     .id = JX_PRIM_concatenate,
                                     .nin = JX_VARIADIC,
                                     .nout = 1,
                                     .params = "dimension=i0",
                                     .infer = infer_concatenate,
                                     .eval = eval_concatenate,
                                     .jvp = jx_jvp_concatenate,
                                     .transpose = jx_transpose_concatenate,
                                     .batch = jx_batch_concatenate};
const jx_prim jx_prim_slice = {.name = "slice",
                               .id = JX_PRIM_slice,
                               .nin = 1,
                               .nout = 1,
                               .params = "start_indices=l0 limit_indices=l1 strides=l2",
                               .infer = infer_slice,
                               .eval = eval_slice,
                               .jvp = jx_jvp_linear_first,
                               .transpose = jx_transpose_slice,
                               .batch = jx_batch_slice};
const jx_prim jx_prim_dynamic_slice = {.name = "dynamic_slice",
                                       .id = JX_PRIM_dynamic_slice,
                                       .nin = JX_VARIADIC,
                                       .nout = 1,
                                       .params = "slice_sizes=l0",
                                       .infer = infer_dynamic_slice,
                                       .eval = eval_dynamic_slice,
                                       .jvp = jx_jvp_linear_first,
                                       .transpose = jx_transpose_dynamic_slice,
                                       .batch = jx_batch_dynamic_slice};
const jx_prim jx_prim_dynamic_update_slice = {.name = "dynamic_update_slice",
                                              .id = JX_PRIM_dynamic_update_slice,
                                              .nin = JX_VARIADIC,
                                              .nout = 1,
                                              .params = "",
                                              .infer = infer_dynamic_update_slice,
                                              .eval = eval_dynamic_update_slice,
                                              .jvp = jx_jvp_dynamic_update_slice,
                                              .transpose = jx_transpose_dynamic_update_slice,
                                              .batch = jx_batch_dynamic_update_slice};
const jx_prim *const jx_prims_slicing[] = {
    &jx_prim_pad,           &jx_prim_concatenate,          &jx_prim_slice,
    &jx_prim_dynamic_slice, &jx_prim_dynamic_update_slice, NULL};
