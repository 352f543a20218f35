/* jax.numpy's statistics and binning: var/std with ddof, quantile (every
 * method of jnp.quantile, and its weights), percentile, median, histogram,
 * bincount, searchsorted, digitize, interp, and the 1-D convolve and
 * correlate, each written as jax.numpy writes it: quantile sorts and
 * gathers (its gradient flows to the chosen order statistics), searchsorted
 * ranks the merged arrays with a stable argsort (JAX's "sort" method, the
 * same answer as its default), histogram scatters into edges from linspace,
 * convolve is conv_general_dilated. */
#include "ops_util.h"

static char *str(jx_array *a, char *buf) { return jx_aval_str(a->dtype, a->shape, buf); }

static jx_dtype upcast16(jx_dtype dt) { return dt == JX_F16 || dt == JX_BF16 ? JX_F32 : dt; }

/* ---- var, std ---- */

/* over the elements where `where` (NULL: all) holds: the mean of the squared deviations from
 * their mean, divided by their count - ddof; NaN where that is not positive, as JAX gives */
static jx_array *variance(const char *op, jx_array *a, jx_axes ax, double ddof, int keepdims,
                          int root, jx_array *where) {
  if (jx_check_inputs(op, 1, &a) || (where && jx_check_inputs(op, 1, &where))) return jx_poison();
  jx_ilist axes;
  if (jx_ops_axes(op, ax, a->shape.rank, 1, &axes)) return jx_poison();
  jx_dtype res = jx_to_inexact(a->dtype), ct = upcast16(res);
  jx_array *x = jx_ops_convert(a, ct, 0), *sq, *norm;
  jx_array *ddof_a = jx_full(ct, JX_SHAPE(), ddof);
  if (where) {
    jx_array *m = jx_ops_where_mask(op, where, a);
    if (!m) return jx_poison();
    jx_array *c = jx_sub(x, jx_ops_mean_where(x, ax, m, 1));
    sq = jx_where(m, jx_square(c), jx_zeros_like(x));
    norm = jx_sub(jx_sum(jx_astype(m, ct), ax, keepdims), ddof_a);
  } else {
    double n = 1;
    for (int i = 0; i < axes.n; i++) n *= (double)a->shape.dims[axes.v[i]];
    sq = jx_square(jx_sub(x, jx_mean(x, ax, 1)));
    norm = jx_sub(jx_full(ct, JX_SHAPE(), n), ddof_a);
  }
  jx_array *v = jx_div(jx_sum(sq, ax, keepdims), norm);
  v = jx_where(jx_gt(norm, jx_zeros_like(norm)), v, jx_full(ct, JX_SHAPE(), NAN));
  if (root) v = jx_sqrt(v);
  return jx_ops_convert(v, res, 0);
}

jx_array *jx_var_ddof(jx_array *a, jx_axes ax, double ddof, int keepdims) {
  return variance("jx_var_ddof", a, ax, ddof, keepdims, 0, NULL);
}
jx_array *jx_std_ddof(jx_array *a, jx_axes ax, double ddof, int keepdims) {
  return variance("jx_std_ddof", a, ax, ddof, keepdims, 1, NULL);
}
jx_array *jx_var_where(jx_array *a, jx_axes ax, double ddof, int keepdims, jx_array *where) {
  return variance("jx_var_where", a, ax, ddof, keepdims, 0, where);
}
jx_array *jx_std_where(jx_array *a, jx_axes ax, double ddof, int keepdims, jx_array *where) {
  return variance("jx_std_where", a, ax, ddof, keepdims, 1, where);
}

/* ---- quantile ---- */

/* "inverted_cdf" over the sorted x and its weights w (both [kept..., n]): the first value whose
 * cumulative weight reaches q times the total, as jnp.quantile picks it; NaN where a weight is
 * negative or NaN or a value is NaN. q is a scalar or 1-D (its axis leads the result). */
static jx_array *inverted_cdf(jx_array *x, jx_array *w, jx_array *q) {
  int last = x->shape.rank - 1;
  int64_t n = x->shape.dims[last];
  jx_array *zero = jx_zeros_like(w);
  jx_array *bad = jx_logical_or(jx_lt(w, zero), jx_isnan(w));
  jx_array *cw = jx_cumsum(jx_where(jx_logical_or(bad, jx_isnan(x)), zero, w), last);
  jx_array *total = jx_ops_slice_axis(cw, last, n - 1, n, 1); /* [kept..., 1] */
  jx_array *force_nan = jx_any(jx_logical_or(bad, jx_isnan(x)), JX_AXES(last), 0);
  jx_array *target = jx_mul(total, q);
  if (q->shape.rank == 1) { /* a leading axis for q on everything */
    jx_shape qs = {x->shape.rank + 1, {0}};
    qs.dims[0] = q->shape.dims[0];
    for (int d = 1; d < qs.rank; d++) qs.dims[d] = 1;
    target = jx_mul(total, jx_reshape(q, qs));
    cw = jx_expand_dims(cw, 0);
    jx_shape xs = {x->shape.rank + 1, {0}};
    xs.dims[0] = q->shape.dims[0];
    for (int d = 0; d < x->shape.rank; d++) xs.dims[d + 1] = x->shape.dims[d];
    x = jx_broadcast_to(x, xs);
    last++;
  }
  jx_array *idx = jx_sum(jx_astype(jx_lt(cw, target), jx_default_int()), JX_AXES(last), 1);
  idx = jx_clip(idx, 0, (double)(n - 1));
  jx_array *r = jx_squeeze(jx_take_along_axis(x, idx, last), JX_AXES(last));
  return jx_where(force_nan, jx_full(x->dtype, JX_SHAPE(), NAN), r);
}

static jx_array *quantile(const char *op, jx_array *a, jx_array *q, jx_axes ax, jx_array *weights,
                          const char *method, int keepdims) {
  if (jx_check_inputs(op, 2, (jx_array *[]){a, q}) || (weights && jx_check_inputs(op, 1, &weights)))
    return jx_poison();
  static const char *const methods[] = {"linear",  "lower",    "higher",
                                        "nearest", "midpoint", "inverted_cdf"};
  int m = method ? -1 : 0;
  for (int i = 0; method && i < 6; i++)
    if (!strcmp(method, methods[i])) m = i;
  char s[JX_AVAL_STR_CAP], sw[JX_AVAL_STR_CAP];
  if (m < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: method \"%s\" is not one of linear, lower, higher, nearest, midpoint, "
                 "inverted_cdf",
                 op, method);
    return jx_poison();
  }
  if (weights && m != 5) {
    jx_error_set(JX_ERR_UNIMPLEMENTED,
                 "%s: method \"%s\" takes no weights; only \"inverted_cdf\" does", op, methods[m]);
    return jx_poison();
  }
  if (q->shape.rank > 1) {
    jx_error_set(JX_ERR_SHAPE, "%s: q must be a scalar or 1-D, got %s", op, str(q, s));
    return jx_poison();
  }
  if (a->shape.rank + 1 > JX_MAX_RANK) {
    jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: arrays of rank %d are not supported", op,
                 a->shape.rank);
    return jx_poison();
  }
  jx_ilist axes;
  if (jx_ops_axes(op, ax, a->shape.rank, 1, &axes)) return jx_poison();
  /* the kept axes first, the reduced ones merged into the last */
  int reduced[JX_MAX_RANK] = {0};
  for (int i = 0; i < axes.n; i++) reduced[axes.v[i]] = 1;
  jx_axes perm = {0, {0}};
  jx_shape flat = {0, {0}}, kept_dims = a->shape, reduced_dims = {0, {0}};
  jx_axes reduced_axes = {0, {0}};
  int64_t n = 1;
  for (int d = 0; d < a->shape.rank; d++)
    if (!reduced[d]) {
      perm.v[perm.n++] = d;
      flat.dims[flat.rank++] = a->shape.dims[d];
    }
  for (int d = 0; d < a->shape.rank; d++)
    if (reduced[d]) {
      perm.v[perm.n++] = d;
      n *= a->shape.dims[d];
      kept_dims.dims[d] = 1;
      reduced_dims.dims[reduced_dims.rank++] = a->shape.dims[d];
      reduced_axes.v[reduced_axes.n++] = d;
    }
  flat.dims[flat.rank++] = n;
  /* weights: a's shape, or the reduced axes' shape (in order), broadcast along the kept ones */
  if (weights && !jx_shape_equal(weights->shape, a->shape) &&
      !jx_shape_equal(weights->shape, reduced_dims)) {
    jx_error_set(JX_ERR_SHAPE, "%s: weights %s must have the shape of a %s or of its reduced axes",
                 op, str(weights, sw), str(a, s));
    return jx_poison();
  }
  if (n == 0) {
    jx_error_set(JX_ERR_SHAPE, "%s: cannot take a quantile over no elements (%s)", op, str(a, s));
    return jx_poison();
  }
  int weak;
  jx_dtype dt =
      jx_to_inexact(jx_promote_weak(jx_to_inexact(a->dtype), a->weak, q->dtype, q->weak, &weak));
  if (weights) dt = jx_to_inexact(jx_promote_weak(dt, 0, weights->dtype, weights->weak, &weak));
  jx_array *x = jx_reshape(jx_transpose(jx_ops_convert(a, dt, 0), perm), flat);
  int last = flat.rank - 1;
  jx_array *nan = jx_full(dt, JX_SHAPE(), NAN);
  x = jx_where(jx_any(jx_isnan(x), JX_AXES(last), 1), nan, x);
  jx_array *r;
  if (m == 5) {
    jx_array *w = jx_ones_like(x);
    if (weights) {
      w = jx_ops_convert(weights, dt, 0);
      if (!jx_shape_equal(w->shape, a->shape)) w = jx_broadcast_in_dim(w, a->shape, reduced_axes);
      w = jx_reshape(jx_transpose(w, perm), flat);
    }
    jx_array *sorted[2], *in[2] = {x, w};
    if (jx_sort_multi(2, in, last, 1, sorted)) return jx_poison();
    r = inverted_cdf(sorted[0], sorted[1], jx_ops_convert(q, dt, 0));
  } else {
    x = jx_sort(x, last);
    jx_array *qq = jx_mul(jx_ops_convert(q, dt, 0), jx_full(dt, JX_SHAPE(), (double)(n - 1)));
    jx_array *lo = jx_floor(qq), *hi = jx_ceil(qq);
    jx_array *hw = jx_sub(qq, lo), *lw = jx_sub(jx_full(dt, JX_SHAPE(), 1), hw);
    jx_array *zero = jx_full(dt, JX_SHAPE(), 0), *top = jx_full(dt, JX_SHAPE(), (double)(n - 1));
    lo = jx_astype(jx_clamp(zero, lo, top), JX_I32);
    hi = jx_astype(jx_clamp(zero, hi, top), JX_I32);
    jx_array *lv = jx_take(x, lo, last), *hv = jx_take(x, hi, last);
    if (q->shape.rank == 1) { /* q's axis, last after take, leads */
      jx_shape ws = {flat.rank, {0}};
      ws.dims[0] = q->shape.dims[0];
      for (int d = 1; d < ws.rank; d++) ws.dims[d] = 1;
      lv = jx_moveaxis(lv, JX_AXES(-1), JX_AXES(0));
      hv = jx_moveaxis(hv, JX_AXES(-1), JX_AXES(0));
      lw = jx_reshape(lw, ws);
      hw = jx_reshape(hw, ws);
    }
    switch (m) {
    case 0: r = jx_add(jx_mul(lv, lw), jx_mul(hv, hw)); break;
    case 1: r = lv; break;
    case 2: r = hv; break;
    case 3: r = jx_where(jx_le(hw, jx_full(dt, JX_SHAPE(), 0.5)), lv, hv); break;
    default: r = jx_mul(jx_add(lv, hv), jx_full(dt, JX_SHAPE(), 0.5)); break;
    }
  }
  if (!keepdims) return r;
  jx_shape ks = {0, {0}};
  if (q->shape.rank == 1) ks.dims[ks.rank++] = q->shape.dims[0];
  for (int d = 0; d < kept_dims.rank; d++) ks.dims[ks.rank++] = kept_dims.dims[d];
  return jx_reshape(r, ks);
}

jx_array *jx_quantile(jx_array *a, jx_array *q, jx_axes ax, const char *method, int keepdims) {
  return quantile("jx_quantile", a, q, ax, NULL, method, keepdims);
}

jx_array *jx_quantile_weighted(jx_array *a, jx_array *q, jx_axes ax, jx_array *weights,
                               const char *method, int keepdims) {
  return quantile("jx_quantile_weighted", a, q, ax, weights, method, keepdims);
}

static jx_array *percentile(const char *op, jx_array *a, jx_array *q, jx_axes ax, jx_array *weights,
                            const char *method, int keepdims) {
  if (jx_check_inputs(op, 2, (jx_array *[]){a, q})) return jx_poison();
  jx_array *qf = jx_div(jx_ops_inexact(q), jx_scalar(JX_F64, 100));
  return quantile(op, a, qf, ax, weights, method, keepdims);
}

jx_array *jx_percentile(jx_array *a, jx_array *q, jx_axes ax, const char *method, int keepdims) {
  return percentile("jx_percentile", a, q, ax, NULL, method, keepdims);
}

jx_array *jx_percentile_weighted(jx_array *a, jx_array *q, jx_axes ax, jx_array *weights,
                                 const char *method, int keepdims) {
  return percentile("jx_percentile_weighted", a, q, ax, weights, method, keepdims);
}

jx_array *jx_median(jx_array *a, jx_axes ax, int keepdims) {
  return jx_quantile(a, jx_scalar(JX_F32, 0.5), ax, "midpoint", keepdims);
}

/* ---- searchsorted, digitize ---- */

/* each element's position in a stable sort of the 1-D x */
static jx_array *rank(jx_array *x) { return jx_argsort(jx_argsort(x, 0), 0); }

static jx_array *searchsorted(jx_array *a, jx_array *v, int right) {
  int weak;
  jx_dtype dt = jx_promote_weak(a->dtype, a->weak, v->dtype, v->weak, &weak);
  jx_array *qa = jx_ops_convert(jx_reshape(v, JX_SHAPE(-1)), dt, weak);
  jx_array *sa = jx_ops_convert(a, dt, weak);
  int64_t na = a->shape.dims[0], nq = jx_size(v);
  jx_array *both = right ? jx_concatenate(2, (jx_array *[]){sa, qa}, 0)
                         : jx_concatenate(2, (jx_array *[]){qa, sa}, 0);
  jx_array *r = rank(both);
  r = right ? jx_ops_slice_axis(r, 0, na, na + nq, 1) : jx_ops_slice_axis(r, 0, 0, nq, 1);
  return jx_reshape(jx_astype(jx_sub(r, rank(qa)), JX_I32), v->shape);
}

static int side_right(const char *op, const char *side) {
  if (!side || !strcmp(side, "left")) return 0;
  if (!strcmp(side, "right")) return 1;
  jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: side \"%s\" is not \"left\" or \"right\"", op, side);
  return -1;
}

jx_array *jx_searchsorted(jx_array *a, jx_array *v, const char *side) {
  const char *op = "jx_searchsorted";
  if (jx_check_inputs(op, 2, (jx_array *[]){a, v}) ||
      jx_ops_need_rank(op, "the sorted array", a, 1))
    return jx_poison();
  int right = side_right(op, side);
  return right < 0 ? jx_poison() : searchsorted(a, v, right);
}

jx_array *jx_searchsorted_sorter(jx_array *a, jx_array *v, const char *side, jx_array *sorter) {
  const char *op = "jx_searchsorted_sorter";
  if (jx_check_inputs(op, 3, (jx_array *[]){a, v, sorter}) ||
      jx_ops_need_rank(op, "the array", a, 1))
    return jx_poison();
  char s1[JX_AVAL_STR_CAP], s2[JX_AVAL_STR_CAP];
  if (!jx_is_int(sorter->dtype) || !jx_shape_equal(sorter->shape, a->shape)) {
    jx_error_set(JX_ERR_SHAPE, "%s: sorter %s must be integer indices of a's shape %s", op,
                 str(sorter, s1), str(a, s2));
    return jx_poison();
  }
  int right = side_right(op, side);
  return right < 0 ? jx_poison() : searchsorted(jx_take(a, sorter, 0), v, right);
}

jx_array *jx_digitize(jx_array *x, jx_array *bins, int right) {
  const char *op = "jx_digitize";
  if (jx_check_inputs(op, 2, (jx_array *[]){x, bins}) || jx_ops_need_rank(op, "bins", bins, 1))
    return jx_poison();
  int64_t n = bins->shape.dims[0];
  if (n == 0) return jx_zeros(JX_I32, x->shape);
  int side = !right; /* right-closed bins search on the left */
  jx_array *up =
      jx_ge(jx_ops_slice_axis(bins, 0, n - 1, n, 1), jx_ops_slice_axis(bins, 0, 0, 1, 1));
  jx_array *fwd = searchsorted(bins, x, side);
  jx_array *rev = jx_sub(jx_full(JX_I32, JX_SHAPE(), (double)n),
                         searchsorted(jx_flip(bins, JX_AXES()), x, side));
  return jx_where(jx_reshape(up, JX_SHAPE()), fwd, rev);
}

/* ---- interp ---- */

/* numpy.spacing(numpy.finfo(dt).eps) */
static double eps_spacing(jx_dtype dt) {
  int mant = dt == JX_F64 ? 52 : dt == JX_F16 ? 10 : dt == JX_BF16 ? 7 : 23;
  return ldexp(1, -2 * mant);
}

/* x % p for a positive p, as jnp.remainder takes it (the result has p's sign) */
static jx_array *floor_mod(jx_array *x, jx_array *p) {
  jx_array *r = jx_rem(x, p);
  return jx_where(jx_lt(r, jx_zeros_like(r)), jx_add(r, p), r);
}

static jx_array *interp(const char *op, jx_array *x, jx_array *xp, jx_array *fp,
                        const jx_interp_options *o) {
  if (jx_check_inputs(op, 3, (jx_array *[]){x, xp, fp})) return jx_poison();
  jx_array *opt[3] = {o->left, o->right, o->period};
  for (int i = 0; i < 3; i++)
    if (opt[i] && jx_check_inputs(op, 1, &opt[i])) return jx_poison();
  char s1[JX_AVAL_STR_CAP], s2[JX_AVAL_STR_CAP];
  if (xp->shape.rank != 1 || !jx_shape_equal(xp->shape, fp->shape)) {
    jx_error_set(JX_ERR_SHAPE, "%s: xp %s and fp %s must be 1-D arrays of one size", op,
                 str(xp, s1), str(fp, s2));
    return jx_poison();
  }
  if (o->period && o->period->shape.rank != 0) {
    jx_error_set(JX_ERR_SHAPE, "%s: period must be a scalar, got %s", op, str(o->period, s1));
    return jx_poison();
  }
  int64_t n = xp->shape.dims[0];
  if (n == 0) {
    jx_error_set(JX_ERR_SHAPE, "%s: xp and fp are empty", op);
    return jx_poison();
  }
  int weak;
  jx_dtype dt = jx_to_inexact(jx_promote_weak(x->dtype, x->weak, xp->dtype, xp->weak, &weak));
  x = jx_ops_convert(x, dt, weak);
  xp = jx_ops_convert(xp, dt, weak);
  fp = jx_ops_inexact(fp);
  if (o->period) { /* both onto [0, period), xp sorted and extended by one point each way */
    jx_array *p = jx_abs(o->period), *sorted[2];
    x = floor_mod(x, p);
    if (jx_sort_multi(2, (jx_array *[]){floor_mod(xp, p), fp}, 0, 1, sorted)) return jx_poison();
    jx_array *first = jx_ops_slice_axis(sorted[0], 0, 0, 1, 1);
    jx_array *last = jx_ops_slice_axis(sorted[0], 0, n - 1, n, 1);
    xp = jx_concatenate(3, (jx_array *[]){jx_sub(last, p), sorted[0], jx_add(first, p)}, 0);
    fp = jx_concatenate(3,
                        (jx_array *[]){jx_ops_slice_axis(sorted[1], 0, n - 1, n, 1), sorted[1],
                                       jx_ops_slice_axis(sorted[1], 0, 0, 1, 1)},
                        0);
    xp = jx_ops_convert(xp, dt, weak);
    n += 2;
  }
  jx_array *i = jx_clip(jx_searchsorted(xp, x, "right"), 1, (double)(n - 1));
  jx_array *im1 = jx_sub(i, jx_scalar(JX_I64, 1));
  jx_array *f0 = jx_take(fp, im1, 0), *x0 = jx_take(xp, im1, 0);
  jx_array *df = jx_sub(jx_take(fp, i, 0), f0), *dx = jx_sub(jx_take(xp, i, 0), x0);
  jx_array *dx0 = jx_le(jx_abs(dx), jx_full(dt, JX_SHAPE(), eps_spacing(dt)));
  jx_array *safe = jx_where(dx0, jx_scalar(JX_I64, 1), dx);
  jx_array *f = jx_where(dx0, f0, jx_add(f0, jx_mul(jx_div(jx_sub(x, x0), safe), df)));
  if (o->period) return f;
  if (!o->extrapolate_left) {
    jx_array *lv = o->left ? o->left : jx_reshape(jx_ops_slice_axis(fp, 0, 0, 1, 1), JX_SHAPE());
    f = jx_where(jx_lt(x, jx_reshape(jx_ops_slice_axis(xp, 0, 0, 1, 1), JX_SHAPE())), lv, f);
  }
  if (!o->extrapolate_right) {
    jx_array *rv =
        o->right ? o->right : jx_reshape(jx_ops_slice_axis(fp, 0, n - 1, n, 1), JX_SHAPE());
    f = jx_where(jx_gt(x, jx_reshape(jx_ops_slice_axis(xp, 0, n - 1, n, 1), JX_SHAPE())), rv, f);
  }
  return f;
}

jx_array *jx_interp(jx_array *x, jx_array *xp, jx_array *fp, const double *left,
                    const double *right) {
  jx_interp_options o = {.left = left ? jx_scalar(JX_F64, *left) : NULL,
                         .right = right ? jx_scalar(JX_F64, *right) : NULL};
  return interp("jx_interp", x, xp, fp, &o);
}

jx_array *jx_interp_with(jx_array *x, jx_array *xp, jx_array *fp, const jx_interp_options *o) {
  const jx_interp_options none = {0};
  return interp("jx_interp_with", x, xp, fp, o ? o : &none);
}

/* ---- histogram, bincount ---- */

jx_array *jx_bincount(jx_array *x, jx_array *weights, int64_t length) {
  const char *op = "jx_bincount";
  if (jx_check_inputs(op, 1, &x) || jx_ops_need_rank(op, "x", x, 1)) return jx_poison();
  char s[JX_AVAL_STR_CAP], sw[JX_AVAL_STR_CAP];
  if (!jx_is_int(x->dtype)) {
    jx_error_set(JX_ERR_DTYPE, "%s: x %s must have an integer dtype", op, str(x, s));
    return jx_poison();
  }
  if (length < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: length %lld must be >= 0", op, (long long)length);
    return jx_poison();
  }
  if (weights && (jx_check_inputs(op, 1, &weights) || !jx_shape_equal(weights->shape, x->shape))) {
    if (!jx_is_poisoned(weights))
      jx_error_set(JX_ERR_SHAPE, "%s: weights %s must have the shape of x %s", op, str(weights, sw),
                   str(x, s));
    return jx_poison();
  }
  jx_array *w = weights ? weights : jx_full(jx_default_int(), x->shape, 1);
  jx_array *idx = jx_maximum(x, jx_full(x->dtype, JX_SHAPE(), 0));
  return jx_segment_sum(w, idx, length);
}

/* counts of the flattened x in the bins of the 1-D edges e, as jnp.histogram counts them */
static jx_status histogram_in(const char *op, jx_array *a, jx_array *e, jx_array *weights,
                              int density, jx_array **hist, jx_array **edges) {
  char s[JX_AVAL_STR_CAP], sw[JX_AVAL_STR_CAP];
  jx_status st;
  if (weights) {
    if ((st = jx_check_inputs(op, 1, &weights))) return st;
    if (!jx_shape_equal(weights->shape, a->shape))
      return jx_error_set(JX_ERR_SHAPE, "%s: weights %s must have the shape of a %s", op,
                          str(weights, sw), str(a, s));
  }
  int64_t bins = e->shape.dims[0] - 1;
  jx_array *x = jx_reshape(jx_ops_inexact(a), JX_SHAPE(-1));
  jx_array *w = weights ? jx_reshape(weights, JX_SHAPE(-1)) : jx_ones_like(x);
  jx_array *idx = jx_searchsorted(e, x, "right");
  jx_array *last = jx_reshape(jx_ops_slice_axis(e, 0, bins, bins + 1, 1), JX_SHAPE());
  idx = jx_where(jx_eq(x, last), jx_full(JX_I32, JX_SHAPE(), (double)bins), idx);
  jx_array *counts = jx_ops_slice_axis(jx_segment_sum(w, idx, bins + 1), 0, 1, bins + 1, 1);
  if (density) counts = jx_div(jx_div(counts, jx_diff(e, 1, 0)), jx_sum(counts, JX_AXES(), 0));
  *hist = counts;
  *edges = e;
  return jx_check_inputs(op, 2, (jx_array *[]){counts, e});
}

jx_status jx_histogram(jx_array *a, int64_t bins, double lo, double hi, jx_array *weights,
                       int density, jx_array **hist, jx_array **edges) {
  const char *op = "jx_histogram";
  if (!hist || !edges) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: an output is NULL", op);
  *hist = *edges = jx_poison();
  jx_status st = jx_check_inputs(op, 1, &a);
  if (st) return st;
  if (bins < 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: bins %lld < 1", op, (long long)bins);
  if (isnan(lo) != isnan(hi) || lo > hi)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: the range [%g, %g] must be ordered (or both NaN for a's min and max)",
                        op, lo, hi);
  jx_dtype dt = jx_to_inexact(a->dtype);
  jx_array *rlo, *rhi;
  if (isnan(lo)) {
    jx_array *x = jx_ops_convert(a, dt, 0);
    rlo = jx_min(x, JX_AXES(), 0);
    rhi = jx_max(x, JX_AXES(), 0);
  } else {
    rlo = jx_full(dt, JX_SHAPE(), lo);
    rhi = jx_full(dt, JX_SHAPE(), hi);
  }
  jx_array *flat = jx_eq(jx_sub(rhi, rlo), jx_scalar(JX_I64, 0));
  rlo = jx_where(flat, jx_sub(rlo, jx_scalar(JX_F64, 0.5)), rlo);
  rhi = jx_where(flat, jx_add(rhi, jx_scalar(JX_F64, 0.5)), rhi);
  return histogram_in(op, a, jx_linspace(rlo, rhi, bins + 1, 1, 0), weights, density, hist, edges);
}

jx_status jx_histogram_edges(jx_array *a, jx_array *bin_edges, jx_array *weights, int density,
                             jx_array **hist) {
  const char *op = "jx_histogram_edges";
  if (!hist) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: hist is NULL", op);
  *hist = jx_poison();
  jx_status st = jx_check_inputs(op, 2, (jx_array *[]){a, bin_edges});
  if (st || (st = jx_ops_need_rank(op, "bin_edges", bin_edges, 1))) return st;
  if (bin_edges->shape.dims[0] < 2)
    return jx_error_set(JX_ERR_SHAPE, "%s: bin_edges needs at least 2 edges, got %lld", op,
                        (long long)bin_edges->shape.dims[0]);
  jx_array *e = jx_ops_convert(bin_edges, jx_to_inexact(a->dtype), 0), *edges;
  return histogram_in(op, a, e, weights, density, hist, &edges);
}

/* ---- convolve, correlate ---- */

static jx_array *conv1d(const char *op, jx_array *a, jx_array *v, const char *mode, int flip) {
  if (jx_check_inputs(op, 2, (jx_array *[]){a, v}) || jx_ops_need_rank(op, "a", a, 1) ||
      jx_ops_need_rank(op, "v", v, 1))
    return jx_poison();
  int weak;
  jx_dtype dt = jx_to_inexact(jx_promote_weak(a->dtype, a->weak, v->dtype, v->weak, &weak));
  jx_array *x = jx_ops_convert(a, dt, weak), *y = jx_ops_convert(v, dt, weak);
  if (x->shape.dims[0] == 0 || y->shape.dims[0] == 0) {
    char s1[JX_AVAL_STR_CAP], s2[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE, "%s: inputs cannot be empty, got %s and %s", op, str(a, s1),
                 str(v, s2));
    return jx_poison();
  }
  int reverse = 0;
  if (x->shape.dims[0] < y->shape.dims[0]) {
    jx_array *t = x;
    x = y;
    y = t;
    reverse = !flip; /* correlate's output runs backwards when swapped */
  }
  if (flip) y = jx_flip(y, JX_AXES());
  int64_t k = y->shape.dims[0], lo, hi;
  if (!mode || !strcmp(mode, "full")) {
    lo = hi = k - 1;
  } else if (!strcmp(mode, "same")) {
    lo = k / 2;
    hi = k - k / 2 - 1;
  } else if (!strcmp(mode, "valid")) {
    lo = hi = 0;
  } else {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: mode \"%s\" is not full, same or valid", op, mode);
    return jx_poison();
  }
  jx_array *r = jx_conv_general_dilated(jx_reshape(x, JX_SHAPE(1, 1, -1)),
                                        jx_reshape(y, JX_SHAPE(1, 1, -1)), JX_SHAPE(), JX_SHAPE(lo),
                                        JX_SHAPE(hi), JX_SHAPE(), JX_SHAPE(), "NCH,OIH,NCH", 1);
  r = jx_reshape(r, JX_SHAPE(-1));
  return reverse ? jx_flip(r, JX_AXES()) : r;
}

jx_array *jx_convolve(jx_array *a, jx_array *v, const char *mode) {
  return conv1d("jx_convolve", a, v, mode, 1);
}
jx_array *jx_correlate(jx_array *a, jx_array *v, const char *mode) {
  return conv1d("jx_correlate", a, v, mode, 0);
}
