#include "rules.h"

#include "../base/error.h"
#include "prims.h"

_Thread_local const jx_prim *jx_rule_current_prim;

jx_array *jx_rule_bind1(const jx_prim *p, int nin, jx_array *const *x, const jx_params *params) {
  return jx_bind1(p, nin, x, params);
}

int jx_rule_no_tangent(jx_dtype dt) { return !jx_is_float(dt); }

static jx_array *literal(jx_dtype dt, double v) {
  jx_array *s = jx_scalar(dt, v);
  if (s->poisoned) return s;
  s->weak = 0; /* the rule's constants take the operand's exact dtype */
  return s;
}

jx_array *jx_rule_zeros(jx_aval a) {
  jx_array *s = literal(a.dtype, 0);
  if (a.shape.rank == 0) return s;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = a.shape.rank;
  for (int i = 0; i < a.shape.rank; i++) p.l[0].v[i] = a.shape.dims[i];
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &s, &p);
}

jx_array *jx_rule_zeros_like(jx_array *x) {
  return jx_rule_zeros((jx_aval){x->dtype, 0, x->shape, 0});
}

jx_array *jx_rule_full_like(jx_array *x, double v) {
  jx_array *s = literal(x->dtype, v);
  if (x->shape.rank == 0) return s;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = x->shape.rank;
  for (int i = 0; i < x->shape.rank; i++) p.l[0].v[i] = x->shape.dims[i];
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &s, &p);
}

jx_array *jx_rule_add(jx_array *a, jx_array *b) {
  if (!a) return b;
  if (!b) return a;
  return jx_bind1(&jx_prim_add, 2, (jx_array *[]){a, b}, NULL);
}

jx_array *jx_rule_neg(jx_array *a) { return a ? jx_bind1(&jx_prim_neg, 1, &a, NULL) : NULL; }

jx_array *jx_rule_sub(jx_array *a, jx_array *b) {
  if (!b) return a;
  if (!a) return jx_rule_neg(b);
  return jx_bind1(&jx_prim_sub, 2, (jx_array *[]){a, b}, NULL);
}

jx_array *jx_rule_scale(jx_array *t, jx_array *c) {
  if (!t) return NULL;
  return jx_bind1(&jx_prim_mul, 2, (jx_array *[]){t, c}, NULL);
}

jx_status jx_jvp_zero(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,
                      jx_array **y, jx_array **ty, int nsub, struct jx_program *const *subs) {
  (void)t;
  jx_status st = jx_bind_sub(jx_rule_current_prim, nin, x, p, nsub, subs, y);
  for (int o = 0; o < nout; o++) ty[o] = NULL;
  return st;
}

jx_array *jx_rule_moveaxis(jx_array *x, int from, int to) {
  if (from == to) return x;
  int r = x->shape.rank;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = r;
  int k = 0;
  for (int i = 0; i < r; i++) {
    if (i == from) continue;
    if (k == to) p.l[0].v[k++] = from;
    p.l[0].v[k++] = i;
  }
  if (k == to) p.l[0].v[k++] = from;
  return jx_bind1(&jx_prim_transpose, 1, &x, &p);
}

jx_array *jx_rule_batch_to_front(jx_array *x, int bdim, int64_t n) {
  if (bdim != JX_NOT_MAPPED) return jx_rule_moveaxis(x, bdim, 0);
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = x->shape.rank + 1;
  p.l[0].v[0] = n;
  for (int i = 0; i < x->shape.rank; i++) p.l[0].v[i + 1] = x->shape.dims[i];
  p.l[1].n = x->shape.rank;
  for (int i = 0; i < x->shape.rank; i++) p.l[1].v[i] = i + 1;
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &x, &p);
}

/* The full operand index of every output position (the iota of each other
 * dim and idx along axis), gathering single elements. */
jx_array *jx_rule_take_along_axis(jx_array *x, jx_array *idx, int axis) {
  int r = x->shape.rank;
  jx_array *parts[JX_MAX_RANK] = {0};
  for (int d = 0; d < r; d++) {
    jx_array *c = idx;
    if (d != axis) {
      jx_params q = JX_PARAMS_INIT;
      q.dtype = JX_I64;
      q.l[0].n = idx->shape.rank;
      for (int k = 0; k < idx->shape.rank; k++) q.l[0].v[k] = idx->shape.dims[k];
      q.i[0] = d;
      c = jx_bind1(&jx_prim_iota, 0, NULL, &q);
    }
    jx_params e = JX_PARAMS_INIT;
    e.l[0].n = 1;
    e.l[0].v[0] = r;
    parts[d] = jx_bind1(&jx_prim_expand_dims, 1, &c, &e);
  }
  jx_params cp = JX_PARAMS_INIT;
  cp.i[0] = r;
  jx_array *full = jx_bind1(&jx_prim_concatenate, r, parts, &cp);
  jx_params p = JX_PARAMS_INIT;
  p.l[1].n = p.l[2].n = p.l[3].n = r;
  for (int d = 0; d < r; d++) {
    p.l[1].v[d] = p.l[2].v[d] = d;
    p.l[3].v[d] = 1;
  }
  p.i[0] = r;
  p.i[1] = JX_GATHER_FILL;
  return jx_bind1(&jx_prim_gather, 2, (jx_array *[]){x, full}, &p);
}

jx_status jx_batch_elementwise(const jx_params *p, int nin, jx_array *const *in, const int *bdim,
                               int64_t axis_size, int nout, jx_array **out, int *out_bdim, int nsub,
                               struct jx_program *const *subs) {
  jx_array *small[16];
  if (nin > 16) return jx_error_set(JX_ERR_UNIMPLEMENTED, "vmap: too many operands");
  for (int i = 0; i < nin; i++) {
    /* rank-0 operands of elementwise prims that allow scalars stay as they are */
    small[i] = jx_rule_batch_to_front(in[i], bdim[i], axis_size);
  }
  jx_status st = jx_bind_sub(jx_rule_current_prim, nin, small, p, nsub, subs, out);
  for (int o = 0; o < nout; o++) out_bdim[o] = 0;
  return st;
}
