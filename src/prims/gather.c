/* gather and scatter (replace, add, mul, min, max) with XLA's dimension
 * numbers (operand batching dims are not supported).
 *
 * gather: l0 offset_dims, l1 collapsed_slice_dims, l2 start_index_map,
 *   l3 slice_sizes, i0 index_vector_dim, i1 mode (0 clip: starts clamped into
 *   [0, dim - slice size]; 1 fill: a slice whose start is out of that range is
 *   filled with NaN / INT_MIN / the unsigned max / true, JAX's FILL_OR_DROP).
 * scatter: l0 update_window_dims, l1 inserted_window_dims,
 *   l2 scatter_dims_to_operand_dims, i0 index_vector_dim, i1 mode (0 drop: a
 *   window that does not fit entirely is skipped, JAX's FILL_OR_DROP and XLA's
 *   behaviour; 1 clip: starts clamped). Updates apply in row-major order of the
 *   updates array, so with duplicate indices the last one wins for scatter and
 *   every one combines for the others; 16-bit floats round after each combine,
 *   as XLA on CPU does.
 * index_vector_dim may equal the rank of the indices: each index is then a
 * scalar (an implicit trailing dim of size 1).
 * Deliberate difference: JAX/XLA on CPU truncate unsigned 64-bit indices of
 * 2**32 and more to 32 bits (2**32 + 1 reads element 1); here they are
 * simply out of range. Transformation rules are in gather_rules.c. */
#include <string.h>

#include "../base/error.h"
#include "prims.h"
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

static void unravel(int64_t flat, jx_shape s, int64_t *idx) {
  for (int d = s.rank - 1; d >= 0; d--) {
    idx[d] = s.dims[d] ? flat % s.dims[d] : 0;
    flat = s.dims[d] ? flat / s.dims[d] : 0;
  }
}

/* Checks that l holds n_max-bounded, in-range dims: values in [0, bound),
 * strictly increasing when sorted is set, else merely distinct. */
static jx_status check_dims(const char *prim, const char *what, const jx_ilist *l, int bound,
                            int sorted) {
  char b[160];
  if (l->n < 0 || l->n > JX_MAX_RANK)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %s has %d entries", prim, what, l->n);
  for (int i = 0; i < l->n; i++) {
    int bad = l->v[i] < 0 || l->v[i] >= bound;
    for (int j = 0; j < i && !bad; j++) bad = sorted ? l->v[j] >= l->v[i] : l->v[j] == l->v[i];
    if (bad)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %s %s must be %s dims in [0, %d)", prim,
                          what, list_str(l, b, sizeof b),
                          sorted ? "strictly increasing" : "distinct", bound);
  }
  return JX_OK;
}

static int contains(const jx_ilist *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return 1;
  return 0;
}

/* The indices operand seen through index_vector_dim: batch shape (the other
 * dims) and index vector length. */
typedef struct {
  int ivd;
  jx_shape batch;
  int64_t nvec;
} index_view;

static jx_status view_indices(const char *prim, const jx_aval *idx, int64_t ivd, index_view *v) {
  char s[JX_AVAL_STR_CAP];
  if (!jx_is_int(idx->dtype))
    return jx_error_set(JX_ERR_DTYPE, "%s: indices %s must have an integer dtype", prim,
                        jx_aval_str(idx->dtype, idx->shape, s));
  if (ivd < 0 || ivd > idx->shape.rank)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: index_vector_dim %lld is out of range [0, %d] for indices %s", prim,
                        (long long)ivd, idx->shape.rank, jx_aval_str(idx->dtype, idx->shape, s));
  v->ivd = (int)ivd;
  v->batch.rank = 0;
  for (int d = 0; d < idx->shape.rank; d++)
    if (d != ivd) v->batch.dims[v->batch.rank++] = idx->shape.dims[d];
  v->nvec = ivd == idx->shape.rank ? 1 : idx->shape.dims[ivd];
  return JX_OK;
}

/* Component k of the index vector at batch position g, as int64 (unsigned
 * values above INT64_MAX saturate: they are out of range either way). */
static int64_t load_index(const jx_tensor *t, const index_view *v, const int64_t *g, int64_t k) {
  int64_t flat = 0;
  for (int d = 0, b = 0; d < t->shape.rank; d++) {
    int64_t i = d == v->ivd ? k : g[b++];
    flat = flat * t->shape.dims[d] + i;
  }
  if (jx_is_unsigned_int(t->dtype)) {
    uint64_t u = jx_load_u64(t->data, t->dtype, flat);
    return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
  }
  return jx_load_i64(t->data, t->dtype, flat);
}

/* The window at batch position g: its start along every operand dim, read
 * from the index vector (0 along the dims it does not name) and clamped
 * into [0, dim - size]. Returns 0 when every start was in range, 1 when one
 * was clamped, 2 when a window of these sizes fits nowhere. */
static int window_start(const jx_tensor *op, const jx_tensor *indices, const index_view *v,
                        const jx_ilist *index_dims, const int64_t *size, const int64_t *g,
                        int64_t *start) {
  int r = op->shape.rank, clamped = 0;
  for (int d = 0; d < r; d++) start[d] = 0;
  for (int k = 0; k < index_dims->n; k++) start[index_dims->v[k]] = load_index(indices, v, g, k);
  for (int d = 0; d < r; d++) {
    int64_t hi = op->shape.dims[d] - size[d];
    if (hi < 0) return 2;
    if (start[d] < 0 || start[d] > hi) {
      clamped = 1;
      start[d] = start[d] < 0 ? 0 : hi;
    }
  }
  return clamped;
}

/* ---- gather ---- */
static jx_status infer_gather(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  const char *n = "gather";
  const jx_aval *op = &in[0];
  const jx_ilist *offs = &p->l[0], *coll = &p->l[1], *sim = &p->l[2], *ss = &p->l[3];
  char s[JX_AVAL_STR_CAP], t[JX_AVAL_STR_CAP], b[160];
  index_view v;
  jx_status st = view_indices(n, &in[1], p->i[0], &v);
  if (st) return st;
  int r = op->shape.rank, orank = offs->n + v.batch.rank;
  if (p->i[1] != 0 && p->i[1] != 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "gather: mode %lld is not 0 (clip) or 1 (fill)",
                        (long long)p->i[1]);
  if (offs->n < 0 || offs->n > JX_MAX_RANK || orank > JX_MAX_RANK)
    return jx_error_set(JX_ERR_SHAPE, "gather: the output would have more than %d dims",
                        JX_MAX_RANK);
  if ((st = check_dims(n, "offset_dims", offs, orank, 1)) ||
      (st = check_dims(n, "collapsed_slice_dims", coll, r, 1)) ||
      (st = check_dims(n, "start_index_map", sim, r, 0)))
    return st;
  if (ss->n != r)
    return jx_error_set(JX_ERR_SHAPE,
                        "gather: slice_sizes %s needs one entry per dim of operand %s",
                        ss->n >= 0 && ss->n <= JX_MAX_RANK ? list_str(ss, b, sizeof b) : "?",
                        jx_aval_str(op->dtype, op->shape, s));
  if (offs->n + coll->n != r)
    return jx_error_set(JX_ERR_SHAPE,
                        "gather: offset_dims (%d) plus collapsed_slice_dims (%d) must equal the "
                        "rank of operand %s",
                        offs->n, coll->n, jx_aval_str(op->dtype, op->shape, s));
  if (sim->n != v.nvec)
    return jx_error_set(JX_ERR_SHAPE,
                        "gather: start_index_map %s has %d entries but indices %s give index "
                        "vectors of length %lld (index_vector_dim %d)",
                        list_str(sim, b, sizeof b), sim->n,
                        jx_aval_str(in[1].dtype, in[1].shape, t), (long long)v.nvec, v.ivd);
  for (int d = 0; d < r; d++) {
    if (ss->v[d] < 0 || ss->v[d] > op->shape.dims[d])
      return jx_error_set(JX_ERR_SHAPE, "gather: slice_sizes %s do not fit in operand %s (dim %d)",
                          list_str(ss, b, sizeof b), jx_aval_str(op->dtype, op->shape, s), d);
    if (contains(coll, d) && ss->v[d] != 1)
      return jx_error_set(JX_ERR_SHAPE,
                          "gather: collapsed dim %d must have slice size 1, not %lld (operand %s)",
                          d, (long long)ss->v[d], jx_aval_str(op->dtype, op->shape, s));
  }
  jx_shape o = {orank, {0}};
  for (int i = 0, k = 0, bi = 0, od = 0; i < orank; i++) {
    if (k < offs->n && offs->v[k] == i) {
      while (contains(coll, od)) od++;
      o.dims[i] = ss->v[od++];
      k++;
    } else {
      o.dims[i] = v.batch.dims[bi++];
    }
  }
  *out = (jx_aval){op->dtype, op->weak, o, 0};
  return JX_OK;
}

static void store_fill(void *base, jx_dtype dt, int64_t i) {
  if (jx_is_inexact(dt))
    jx_store_f64(base, dt, i, NAN);
  else if (jx_is_signed_int(dt))
    jx_store_i64(base, dt, i, (int64_t)(~0ull << (jx_dtype_bits(dt) - 1)));
  else /* all ones: the unsigned max, or true */
    jx_store_i64(base, dt, i, dt == JX_BOOL ? 1 : -1);
}

/* The common layout, one window at a time: when the offset dims are the
 * output's trailing dims (an embedding lookup, a take of rows), the window
 * of each index is one contiguous block of the output, copied as a box of
 * the operand by jx_strided_copy instead of element by element. Returns 0
 * for other layouts. */
static int gather_windows(const jx_params *p, const jx_tensor *in, jx_tensor *out,
                          const index_view *v) {
  const jx_tensor *op = &in[0];
  const jx_ilist *offs = &p->l[0], *coll = &p->l[1], *sim = &p->l[2], *ss = &p->l[3];
  int r = op->shape.rank, orank = out->shape.rank, fill = p->i[1] == 1;
  for (int k = 0; k < offs->n; k++)
    if (offs->v[k] != orank - offs->n + k) return 0;
  size_t es = jx_dtype_size(op->dtype);
  int64_t ostr[JX_MAX_RANK], wst[JX_MAX_RANK], g[JX_MAX_RANK] = {0}, start[JX_MAX_RANK];
  jx_shape win = {0, {0}};
  jx_shape_strides(op->shape, ostr);
  for (int d = 0; d < r; d++)
    if (!contains(coll, d)) {
      win.dims[win.rank] = ss->v[d];
      wst[win.rank++] = ostr[d];
    }
  int64_t w = jx_shape_numel(win), nb = jx_shape_numel(v->batch);
  if (w == 0) return 1;
  for (int64_t b = 0; b < nb; b++) {
    int oob = window_start(op, &in[1], v, sim, ss->v, g, start) != 0;
    int64_t j = 0;
    for (int d = 0; d < r; d++) j += start[d] * ostr[d];
    if (fill && oob)
      for (int64_t i = 0; i < w; i++) store_fill(out->data, out->dtype, b * w + i);
    else
      jx_strided_copy((char *)out->data + (size_t)(b * w) * es, win,
                      (const char *)op->data + (size_t)j * es, wst, es);
    for (int d = v->batch.rank - 1; d >= 0; d--) /* the next batch position */
      if (++g[d] < v->batch.dims[d])
        break;
      else
        g[d] = 0;
  }
  return 1;
}

static void eval_gather(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  const jx_tensor *op = &in[0];
  const jx_ilist *offs = &p->l[0], *coll = &p->l[1], *sim = &p->l[2], *ss = &p->l[3];
  jx_aval ia = {in[1].dtype, 0, in[1].shape, 0};
  index_view v;
  view_indices("gather", &ia, p->i[0], &v);
  if (gather_windows(p, in, out, &v)) return;
  int r = op->shape.rank, fill = p->i[1] == 1;
  size_t es = jx_dtype_size(op->dtype);
  int64_t ostr[JX_MAX_RANK], oi[JX_MAX_RANK], g[JX_MAX_RANK], start[JX_MAX_RANK];
  int win_of[JX_MAX_RANK]; /* operand dim -> output offset dim, or -1 when collapsed */
  for (int d = 0, k = 0; d < r; d++) win_of[d] = contains(coll, d) ? -1 : (int)offs->v[k++];
  jx_shape_strides(op->shape, ostr);
  int64_t n = jx_shape_numel(out->shape);
  for (int64_t i = 0; i < n; i++) {
    unravel(i, out->shape, oi);
    for (int d = 0, b = 0; d < out->shape.rank; d++)
      if (!contains(offs, d)) g[b++] = oi[d];
    int oob = window_start(op, &in[1], &v, sim, ss->v, g, start) != 0;
    int64_t j = 0;
    for (int d = 0; d < r; d++) j += (start[d] + (win_of[d] >= 0 ? oi[win_of[d]] : 0)) * ostr[d];
    if (fill && oob)
      store_fill(out->data, out->dtype, i);
    else
      memcpy((char *)out->data + (size_t)i * es, (const char *)op->data + (size_t)j * es, es);
  }
}

/* ---- scatter ---- */
typedef enum { S_REPLACE, S_ADD, S_MUL, S_MIN, S_MAX } scatter_op;

/* numeric: add and mul reject bool, as lax.scatter_add/scatter_mul do */
static jx_status infer_scatter_named(const char *n, int numeric, const jx_params *p,
                                     const jx_aval *in, jx_aval *out) {
  const jx_aval *op = &in[0], *up = &in[2];
  const jx_ilist *uwd = &p->l[0], *iwd = &p->l[1], *sdod = &p->l[2];
  char s[JX_AVAL_STR_CAP], t[JX_AVAL_STR_CAP], b[160];
  index_view v;
  jx_status st = view_indices(n, &in[1], p->i[0], &v);
  if (st) return st;
  int r = op->shape.rank;
  if (p->i[1] != 0 && p->i[1] != 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: mode %lld is not 0 (drop) or 1 (clip)", n,
                        (long long)p->i[1]);
  if (numeric && op->dtype == JX_BOOL)
    return jx_error_set(JX_ERR_DTYPE, "%s: operand %s must have a numeric dtype", n,
                        jx_aval_str(op->dtype, op->shape, s));
  if (up->dtype != op->dtype)
    return jx_error_set(JX_ERR_DTYPE, "%s: updates %s must have operand %s's dtype", n,
                        jx_aval_str(up->dtype, up->shape, t), jx_aval_str(op->dtype, op->shape, s));
  if ((st = check_dims(n, "update_window_dims", uwd, up->shape.rank, 1)) ||
      (st = check_dims(n, "inserted_window_dims", iwd, r, 1)) ||
      (st = check_dims(n, "scatter_dims_to_operand_dims", sdod, r, 0)))
    return st;
  if (uwd->n + iwd->n != r)
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: update_window_dims (%d) plus inserted_window_dims (%d) must equal "
                        "the rank of operand %s",
                        n, uwd->n, iwd->n, jx_aval_str(op->dtype, op->shape, s));
  if (sdod->n != v.nvec)
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: scatter_dims_to_operand_dims %s has %d entries but indices %s give "
                        "index vectors of length %lld (index_vector_dim %d)",
                        n, list_str(sdod, b, sizeof b), sdod->n,
                        jx_aval_str(in[1].dtype, in[1].shape, t), (long long)v.nvec, v.ivd);
  if (up->shape.rank != uwd->n + v.batch.rank)
    return jx_error_set(
        JX_ERR_SHAPE, "%s: updates %s must have rank %d (%d window dims + %d scatter dims)", n,
        jx_aval_str(up->dtype, up->shape, t), uwd->n + v.batch.rank, uwd->n, v.batch.rank);
  for (int d = 0, k = 0, bi = 0, od = 0; d < up->shape.rank; d++) {
    int64_t want;
    if (k < uwd->n && uwd->v[k] == d) {
      while (contains(iwd, od)) od++;
      want = op->shape.dims[od++];
      k++;
      if (up->shape.dims[d] <= want) continue;
    } else {
      want = v.batch.dims[bi++];
      if (up->shape.dims[d] == want) continue;
    }
    return jx_error_set(
        JX_ERR_SHAPE,
        "%s: updates %s do not fit operand %s and indices %s (updates dim %d: "
        "%lld vs %lld)",
        n, jx_aval_str(up->dtype, up->shape, t), jx_aval_str(op->dtype, op->shape, s),
        jx_aval_str(in[1].dtype, in[1].shape, b), d, (long long)up->shape.dims[d], (long long)want);
  }
  *out = (jx_aval){op->dtype, op->weak, op->shape, 0};
  return JX_OK;
}

/* Combines update element u into out element o. */
static void combine(scatter_op sop, void *out, int64_t o, const void *up, int64_t u, jx_dtype dt) {
  if (sop == S_REPLACE) {
    size_t es = jx_dtype_size(dt);
    memcpy((char *)out + (size_t)o * es, (const char *)up + (size_t)u * es, es);
  } else if (jx_is_complex(dt)) { /* add only (complex.c): each part as a float's */
    jx_store_c128(out, dt, o, jx_load_c128(out, dt, o) + jx_load_c128(up, dt, u));
  } else if (jx_is_float(dt)) { /* double, rounded once per combine */
    double a = jx_load_f64(out, dt, o), b = jx_load_f64(up, dt, u), c;
    switch (sop) {
    case S_ADD: c = a + b; break;
    case S_MUL: c = a * b; break;
    case S_MIN: c = (a != a || a < b) ? a : b; break;
    default: c = (a != a || a > b) ? a : b; break;
    }
    jx_store_f64(out, dt, o, c);
  } else { /* integers wrap; bool min/max are and/or */
    int sg = jx_is_signed_int(dt);
    int64_t a = jx_load_i64(out, dt, o), b = jx_load_i64(up, dt, u), c;
    uint64_t ua = jx_load_u64(out, dt, o), ub = jx_load_u64(up, dt, u);
    switch (sop) {
    case S_ADD: c = (int64_t)(ua + ub); break;
    case S_MUL: c = (int64_t)(ua * ub); break;
    case S_MIN: c = (sg ? a < b : ua < ub) ? a : b; break;
    default: c = (sg ? a > b : ua > ub) ? a : b; break;
    }
    jx_store_i64(out, dt, o, c);
  }
}

/* scatter and scatter_add of f32/f64 one window at a time, when the
 * update window dims are the updates' trailing dims: each index's window is
 * a contiguous block of the updates, applied along the operand's box with
 * one run per innermost row. Windows apply in the updates' order, as in
 * the element loop, and an f32 add rounds as the double-then-round combine
 * does (the exact sum of two floats is a double). Returns 0 otherwise. */
static int scatter_windows(scatter_op sop, const jx_params *p, const jx_tensor *in, jx_tensor *out,
                           const index_view *v) {
  const jx_tensor *op = &in[0], *up = &in[2];
  const jx_ilist *uwd = &p->l[0], *iwd = &p->l[1], *sdod = &p->l[2];
  jx_dtype dt = op->dtype;
  if (!(sop == S_REPLACE || (sop == S_ADD && (dt == JX_F32 || dt == JX_F64)))) return 0;
  int r = op->shape.rank, urank = up->shape.rank, clip = p->i[1] == 1;
  for (int k = 0; k < uwd->n; k++)
    if (uwd->v[k] != urank - uwd->n + k) return 0;
  size_t es = jx_dtype_size(dt);
  int64_t ostr[JX_MAX_RANK], wst[JX_MAX_RANK], wsize[JX_MAX_RANK], g[JX_MAX_RANK] = {0};
  int64_t start[JX_MAX_RANK];
  jx_shape win = {0, {0}};
  jx_shape_strides(op->shape, ostr);
  for (int d = 0, k = 0; d < r; d++) {
    wsize[d] = contains(iwd, d) ? 1 : up->shape.dims[uwd->v[k++]];
    if (!contains(iwd, d)) {
      win.dims[win.rank] = wsize[d];
      wst[win.rank++] = ostr[d];
    }
  }
  int64_t w = jx_shape_numel(win), nb = jx_shape_numel(v->batch);
  if (w == 0) return 1;
  int last = win.rank - 1;
  int64_t run = last >= 0 ? win.dims[last] : 1, rs = last >= 0 ? wst[last] : 0;
  for (int64_t b = 0; b < nb; b++) {
    int fit = window_start(op, &in[1], v, sdod, wsize, g, start);
    int skip = fit == 2 || (fit == 1 && !clip); /* fits nowhere, or dropped */
    int64_t j = 0;
    for (int d = 0; d < r; d++) j += start[d] * ostr[d];
    for (int64_t q = 0, idx[JX_MAX_RANK] = {0}; !skip && q < w; q += run) {
      int64_t o = j; /* the operand offset of window row q / run */
      for (int d = 0; d < last; d++) o += idx[d] * wst[d];
      const char *u = (const char *)up->data + (size_t)(b * w + q) * es;
      if (sop == S_REPLACE && rs == 1)
        memcpy((char *)out->data + (size_t)o * es, u, (size_t)run * es);
      else if (sop == S_REPLACE)
        for (int64_t t = 0; t < run; t++)
          memcpy((char *)out->data + (size_t)(o + t * rs) * es, u + (size_t)t * es, es);
      else if (dt == JX_F32)
        for (int64_t t = 0; t < run; t++)
          ((float *)out->data)[o + t * rs] += ((const float *)(const void *)u)[t];
      else
        for (int64_t t = 0; t < run; t++)
          ((double *)out->data)[o + t * rs] += ((const double *)(const void *)u)[t];
      for (int d = last - 1; d >= 0; d--) /* the next row of the window */
        if (++idx[d] < win.dims[d])
          break;
        else
          idx[d] = 0;
    }
    for (int d = v->batch.rank - 1; d >= 0; d--) /* the next batch position */
      if (++g[d] < v->batch.dims[d])
        break;
      else
        g[d] = 0;
  }
  return 1;
}

static void eval_scatter_op(scatter_op sop, const jx_params *p, const jx_tensor *in,
                            jx_tensor *out) {
  const jx_tensor *op = &in[0], *up = &in[2];
  const jx_ilist *uwd = &p->l[0], *iwd = &p->l[1], *sdod = &p->l[2];
  jx_aval ia = {in[1].dtype, 0, in[1].shape, 0};
  index_view v;
  view_indices("scatter", &ia, p->i[0], &v);
  int r = op->shape.rank, clip = p->i[1] == 1;
  size_t es = jx_dtype_size(op->dtype);
  int64_t n = jx_shape_numel(op->shape);
  if (n) memcpy(out->data, op->data, (size_t)n * es);
  if (scatter_windows(sop, p, in, out, &v)) return;
  int64_t ostr[JX_MAX_RANK], ui[JX_MAX_RANK], g[JX_MAX_RANK], start[JX_MAX_RANK];
  int64_t wsize[JX_MAX_RANK];
  int win_of[JX_MAX_RANK]; /* operand dim -> updates window dim, or -1 when inserted */
  for (int d = 0, k = 0; d < r; d++) {
    win_of[d] = contains(iwd, d) ? -1 : (int)uwd->v[k++];
    wsize[d] = win_of[d] >= 0 ? up->shape.dims[win_of[d]] : 1;
  }
  jx_shape_strides(op->shape, ostr);
  int64_t m = jx_shape_numel(up->shape);
  for (int64_t u = 0; u < m; u++) {
    unravel(u, up->shape, ui);
    for (int d = 0, b = 0; d < up->shape.rank; d++)
      if (!contains(uwd, d)) g[b++] = ui[d];
    /* fits nowhere (an inserted dim of size 0), or out of range and dropped */
    int fit = window_start(op, &in[1], &v, sdod, wsize, g, start);
    int skip = fit == 2 || (fit == 1 && !clip);
    int64_t j = 0;
    for (int d = 0; d < r; d++) j += (start[d] + (win_of[d] >= 0 ? ui[win_of[d]] : 0)) * ostr[d];
    if (!skip) combine(sop, out->data, j, up->data, u, op->dtype);
  }
}

#define SCATTER_ROW(NAME, SOP, NUMERIC, JVP, TRANSPOSE)                                            \
  static jx_status infer_##NAME(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {         \
    return infer_scatter_named(#NAME, NUMERIC, ctx->params, in, out);                              \
  }                                                                                                \
  static void eval_##NAME(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {           \
    eval_scatter_op(SOP, ctx->params, in, out);                                                    \
  }                                                                                                \
  const jx_prim jx_prim_##NAME = {                                                                 \
      .name = #NAME,                                                                               \
      .id = JX_PRIM_##NAME,                                                                        \
      .nin = 3,                                                                                    \
      .nout = 1,                                                                                   \
      .params = "update_window_dims=l0 inserted_window_dims=l1 "                                   \
                "scatter_dims_to_operand_dims=l2 index_vector_dim=i0 mode=i1",                     \
      .infer = infer_##NAME,                                                                       \
      .eval = eval_##NAME,                                                                         \
      .jvp = JVP,                                                                                  \
      .transpose = TRANSPOSE,                                                                      \
      .batch = jx_batch_scatter};

SCATTER_ROW(scatter, S_REPLACE, 0, jx_jvp_scatter, NULL)
SCATTER_ROW(scatter_add, S_ADD, 1, jx_jvp_scatter_add, jx_transpose_scatter_add)
SCATTER_ROW(scatter_mul, S_MUL, 1, jx_jvp_scatter_mul, jx_transpose_scatter_mul)
SCATTER_ROW(scatter_min, S_MIN, 0, jx_jvp_scatter_extremum, NULL)
SCATTER_ROW(scatter_max, S_MAX, 0, jx_jvp_scatter_extremum, NULL)

const jx_prim jx_prim_gather = {.name = "gather",
                                .id = JX_PRIM_gather,
                                .nin = 2,
                                .nout = 1,
                                .params = "offset_dims=l0 collapsed_slice_dims=l1 "
                                          "start_index_map=l2 slice_sizes=l3 "
                                          "index_vector_dim=i0 mode=i1",
                                .infer = infer_gather,
                                .eval = eval_gather,
                                .jvp = jx_jvp_gather,
                                .transpose = jx_transpose_gather,
                                .batch = jx_batch_gather};
const jx_prim *const jx_prims_gather[] = {&jx_prim_gather,
                                          &jx_prim_scatter,
                                          &jx_prim_scatter_add,
                                          &jx_prim_scatter_mul,
                                          &jx_prim_scatter_min,
                                          &jx_prim_scatter_max,
                                          NULL};
