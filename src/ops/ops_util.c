#include "ops_util.h"

jx_array *jx_ops_wrap_negative(jx_array *idx, int64_t n) {
  if (!jx_is_signed_int(idx->dtype)) return idx;
  /* constants of idx's own dtype: a weak i32 index stays i32 (weak i64
   * literals would promote it and the cases of the select would differ) */
  jx_array *neg = jx_lt(idx, jx_full(idx->dtype, (jx_shape){0, {0}}, 0));
  jx_array *up = jx_add(idx, jx_full(idx->dtype, (jx_shape){0, {0}}, (double)n));
  return jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){neg, idx, up}, NULL);
}

jx_array *jx_ops_convert(jx_array *a, jx_dtype dt, int weak) {
  if (!a || a->poisoned) return jx_bind1(&jx_prim_convert_element_type, 1, &a, NULL);
  if (a->dtype == dt && a->weak == (weak != 0)) return a;
  jx_params p = JX_PARAMS_INIT;
  p.dtype = dt;
  p.i[0] = weak != 0;
  return jx_bind1(&jx_prim_convert_element_type, 1, &a, &p);
}

jx_status jx_ops_broadcast_shapes(const char *op, jx_shape a, jx_shape b, jx_shape *out) {
  int r = a.rank > b.rank ? a.rank : b.rank;
  jx_shape s = {r, {0}};
  for (int i = 0; i < r; i++) {
    int ia = a.rank - r + i, ib = b.rank - r + i;
    int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
      jx_aval_str(JX_F32, a, sa);
      jx_aval_str(JX_F32, b, sb);
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: shapes %s and %s do not broadcast (axis %d: %lld vs %lld)", op,
                          sa + 3, sb + 3, i - r, (long long)da, (long long)db);
    }
    s.dims[i] = da == 1 ? db : da;
  }
  *out = s;
  return JX_OK;
}

jx_array *jx_ops_broadcast(jx_array *a, jx_shape s) {
  if (!a || a->poisoned || jx_shape_equal(a->shape, s)) return a;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = s.rank;
  for (int i = 0; i < s.rank; i++) p.l[0].v[i] = s.dims[i];
  p.l[1].n = a->shape.rank;
  for (int i = 0; i < a->shape.rank; i++) p.l[1].v[i] = s.rank - a->shape.rank + i;
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &a, &p);
}

jx_status jx_ops_promote_broadcast(const char *op, jx_array **a, jx_array **b) {
  jx_array *in[2] = {*a, *b};
  jx_status st = jx_check_inputs(op, 2, in);
  if (st) return st;
  int weak;
  jx_dtype dt = jx_promote_weak((*a)->dtype, (*a)->weak, (*b)->dtype, (*b)->weak, &weak);
  jx_shape s;
  st = jx_ops_broadcast_shapes(op, (*a)->shape, (*b)->shape, &s);
  if (st) return st;
  *a = jx_ops_broadcast(jx_ops_convert(*a, dt, weak), s);
  *b = jx_ops_broadcast(jx_ops_convert(*b, dt, weak), s);
  return jx_check_inputs(op, 2, (jx_array *[]){*a, *b});
}

jx_array *jx_ops_binary(const char *op, const jx_prim *p, jx_array *a, jx_array *b) {
  if (jx_ops_promote_broadcast(op, &a, &b)) return jx_poison();
  return jx_bind1(p, 2, (jx_array *[]){a, b}, NULL);
}

jx_status jx_ops_axes(const char *op, jx_axes ax, int rank, int empty_is_all, jx_ilist *out) {
  if (ax.n < 0) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: too many axes", op);
  out->n = 0;
  if (ax.n == 0 && empty_is_all) {
    for (int i = 0; i < rank; i++) out->v[out->n++] = i;
    return JX_OK;
  }
  int seen[JX_MAX_RANK] = {0};
  for (int i = 0; i < ax.n; i++) {
    int a = jx_normalize_axis(ax.v[i], rank, op);
    if (a < 0) return JX_ERR_INVALID_ARGUMENT;
    if (seen[a])
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: axis %d appears twice", op, ax.v[i]);
    seen[a] = 1;
  }
  for (int i = 0; i < rank; i++)
    if (seen[i]) out->v[out->n++] = i;
  return JX_OK;
}

static jx_custom_jvp_maker custom_jvp;

void jx_ops_custom_jvp_install(jx_custom_jvp_maker make) { custom_jvp = make; }

jx_fn *jx_ops_custom_jvp_once(_Atomic(jx_fn *) *slot, const char *name, int nin, int nout,
                              jx_body f, jx_body jvp, void *ctx) {
  jx_fn *made = atomic_load(slot);
  if (made) return made;
  if (!custom_jvp) {
    jx_error_set(JX_ERR_INTERNAL, "%s: no custom JVP maker is installed (transform/install.c)",
                 name);
    return NULL;
  }
  char jvp_name[128];
  snprintf(jvp_name, sizeof jvp_name, "%s_jvp", name);
  jx_fn *primal = jx_fn_create(name, nin, nout, f, ctx);
  jx_fn *rule = jx_fn_create(jvp_name, 2 * nin, 2 * nout, jvp, ctx);
  jx_fn *c = primal && rule ? custom_jvp(primal, rule) : NULL;
  jx_fn_release(primal); /* c holds its own references */
  jx_fn_release(rule);
  if (!c) return NULL;
  if (!atomic_compare_exchange_strong(slot, &made, c)) jx_fn_release(c); /* lost a race */
  return atomic_load(slot);
}

jx_array *jx_ops_call1(jx_fn *f, jx_array *x) {
  jx_array *y = NULL;
  if (!f || jx_call(f, &x, &y)) return jx_poison();
  return y;
}

jx_array *jx_ops_const_like(jx_array *a, double v) {
  return jx_ops_convert(jx_scalar(JX_F64, v), a->dtype, a->weak);
}

jx_array *jx_ops_slice_axis(jx_array *a, int axis, int64_t start, int64_t stop, int64_t step) {
  if (!a || a->poisoned) return a;
  jx_shape lo = a->shape, hi = a->shape, st = a->shape;
  for (int d = 0; d < a->shape.rank; d++) {
    lo.dims[d] = 0;
    st.dims[d] = 1;
  }
  lo.dims[axis] = start;
  hi.dims[axis] = stop;
  st.dims[axis] = step;
  return jx_slice(a, lo, hi, st);
}

jx_status jx_ops_need_rank(const char *op, const char *what, jx_array *a, int rank) {
  if (a->shape.rank == rank) return JX_OK;
  char s[JX_AVAL_STR_CAP];
  return jx_error_set(JX_ERR_SHAPE, "%s: %s must be %d-D, got %s", op, what, rank,
                      jx_aval_str(a->dtype, a->shape, s));
}

jx_array *jx_ops_inexact(jx_array *a) {
  if (!a || a->poisoned) return a;
  return jx_ops_convert(a, jx_to_inexact(a->dtype), a->weak);
}

jx_array *jx_ops_where_mask(const char *op, jx_array *where, jx_array *a) {
  char sw[JX_AVAL_STR_CAP], sa[JX_AVAL_STR_CAP];
  if (where->dtype != JX_BOOL) {
    jx_error_set(JX_ERR_DTYPE, "%s: where %s must be a bool array", op,
                 jx_aval_str(where->dtype, where->shape, sw));
    return NULL;
  }
  jx_shape b;
  if (jx_ops_broadcast_shapes(op, where->shape, a->shape, &b) || !jx_shape_equal(b, a->shape)) {
    jx_clear_error();
    jx_error_set(JX_ERR_SHAPE, "%s: where %s must broadcast to a %s", op,
                 jx_aval_str(where->dtype, where->shape, sw), jx_aval_str(a->dtype, a->shape, sa));
    return NULL;
  }
  return jx_broadcast_to(where, a->shape);
}

jx_array *jx_ops_mean_where(jx_array *x, jx_axes ax, jx_array *mask, int keepdims) {
  jx_array *count = jx_sum(jx_astype(mask, x->dtype), ax, keepdims);
  return jx_div(jx_sum(jx_where(mask, x, jx_zeros_like(x)), ax, keepdims), count);
}
