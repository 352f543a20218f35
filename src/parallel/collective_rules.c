/* Differentiation and batching of the collectives (rows in collective.c).
 *
 * JVP: every collective but pmax/pmin is linear, so its tangent goes through
 * the same collective. pmax/pmin pass the tangent of the chosen element; with
 * ties, the mean of the tied tangents: psum(t * mask) / psum(mask), mask =
 * (x == pmax(x)).
 * Transpose: psum over a shard_map's manual axes -> pvary (trace/vma.h); over
 * pmap's and vmap's axes (each device's copy of a replicated value is its own
 * value) psum -> psum; all_gather <-> psum_scatter, all_to_all -> itself with
 * split and concat swapped, ppermute -> ppermute with the pairs inverted.
 * Batching (jx_vmap_axis): when the vmapped axis is among the collective's
 * axes the collective is computed over the batch dim (as JAX's
 * batched-collective rules); reductions may also name other axes (the batch is
 * reduced first, then the collective runs over the rest); the other
 * collectives, as in JAX, accept only the vmapped axis. Otherwise the batch
 * dim is an ordinary dim of the same collective. */
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../ir/axis_env.h"
#include "../trace/vma.h"
#include "collective_rules.h"

static jx_array *bind(const jx_prim *prim, jx_array *x, const jx_params *p) {
  return jx_bind1(prim, 1, &x, p);
}

jx_status jx_jvp_collective_linear(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                                   jx_array **y, jx_array **ty) {
  const jx_params *p = ctx->params;
  const jx_prim *prim = ctx->prim;
  y[0] = bind(prim, x[0], p);
  ty[0] = t[0] ? bind(prim, t[0], p) : NULL;
  return jx_last_status();
}

jx_status jx_jvp_pmax_pmin(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                           jx_array **y, jx_array **ty) {
  const jx_params *p = ctx->params;
  y[0] = bind(ctx->prim, x[0], p);
  ty[0] = NULL;
  if (!t[0]) return jx_last_status();
  jx_params q = JX_PARAMS_INIT;
  q.l[0] = p->l[0];
  jx_array *mask = jx_astype(jx_eq(x[0], y[0]), t[0]->dtype);
  ty[0] = jx_div(bind(&jx_prim_psum, jx_mul(t[0], mask), &q), bind(&jx_prim_psum, mask, &q));
  return jx_last_status();
}

/* psum over manual axes (shard_map's, trace/vma.h) makes its operand, cast to
 * vary over them, invariant: the cotangent, invariant too, goes back to every
 * device unchanged (pvary, JAX's psum_invariant transpose). Over the other
 * axes (pmap's, vmap's) every device's copy is its own value: psum. */
static jx_status transpose_psum(const jx_params *p, jx_array *ct, jx_array **ct_in) {
  jx_params manual = JX_PARAMS_INIT, other = JX_PARAMS_INIT;
  jx_vma_split_manual(p->l[0].n, p->l[0].v, manual.l[0].v, &manual.l[0].n, other.l[0].v,
                      &other.l[0].n);
  if (other.l[0].n) ct = bind(&jx_prim_psum, ct, &other);
  if (manual.l[0].n) ct = bind(&jx_prim_pvary, ct, &manual);
  ct_in[0] = ct;
  return jx_last_status();
}

jx_status jx_transpose_collective(const jx_rule_ctx *ctx, jx_array *const *in,
                                  const jx_aval *in_avals, const uint8_t *linear,
                                  jx_array *const *ct, jx_array **ct_in) {
  const jx_params *p = ctx->params;
  (void)in;
  (void)in_avals;
  (void)linear;
  ct_in[0] = NULL;
  if (!ct[0]) return JX_OK;
  const jx_prim *prim = ctx->prim, *to = prim;
  jx_params q = *p;
  if (prim == &jx_prim_all_gather) {
    to = &jx_prim_psum_scatter;
  } else if (prim == &jx_prim_psum_scatter) {
    to = &jx_prim_all_gather;
  } else if (prim == &jx_prim_all_to_all) {
    q.i[0] = p->i[1];
    q.i[1] = p->i[0];
  } else if (prim == &jx_prim_ppermute) {
    int len = 0;
    const int64_t *v = jx_interned_ints((int)p->i[0], &len);
    int64_t *inv = malloc(sizeof *inv * (size_t)(len + 1));
    if (!inv) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_ppermute: out of memory");
    for (int k = 0; k + 1 < len; k += 2) {
      inv[k] = v[k + 1];
      inv[k + 1] = v[k];
    }
    q.i[0] = jx_intern_ints(inv, len);
    free(inv);
    if (!q.i[0]) return jx_last_status();
  }
  if (prim == &jx_prim_psum) return transpose_psum(p, ct[0], ct_in);
  ct_in[0] = bind(to, ct[0], &q);
  return jx_last_status();
}

/* ---- batching ---- */

/* x reduced over dim d in its own dtype (bool sums are ors, as the engine's). */
static jx_array *reduce_dim(const jx_prim *prim, jx_array *x, int d) {
  jx_params r = JX_PARAMS_INIT;
  r.l[0] = (jx_ilist){1, {d}};
  const jx_prim *red = prim == &jx_prim_pmax   ? &jx_prim_reduce_max
                       : prim == &jx_prim_pmin ? &jx_prim_reduce_min
                       : x->dtype == JX_BOOL   ? &jx_prim_reduce_or
                                               : &jx_prim_reduce_sum;
  return bind(red, x, &r);
}

/* The vmapped axis is not among the collective's: the batch dim (moved to the
 * front) is an ordinary dim of the same collective. */
static jx_status batch_other_axes(const jx_prim *prim, const jx_params *p, jx_array *x, int b,
                                  jx_array **out, int *out_bdim) {
  if (b == JX_NOT_MAPPED) {
    out[0] = bind(prim, x, p);
    out_bdim[0] = JX_NOT_MAPPED;
    return jx_last_status();
  }
  jx_params q = *p;
  if (prim == &jx_prim_all_gather || prim == &jx_prim_psum_scatter) q.i[0]++;
  if (prim == &jx_prim_all_to_all) {
    q.i[0]++;
    q.i[1]++;
  }
  out[0] = bind(prim, jx_rule_moveaxis(x, b, 0), &q);
  out_bdim[0] = 0;
  return jx_last_status();
}

/* all_to_all over the vmapped axis, X = [n(u), unbatched dims...]: element v
 * of the result is the concatenation along concat of chunk v (along split) of
 * every x_u. Split's dim becomes (v, k); v goes to the front and u just
 * before concat, which it then joins. */
static jx_array *batched_all_to_all(jx_array *X, int64_t n, int s, int c) {
  int r = X->shape.rank - 1;
  if (r + 2 > JX_MAX_RANK) {
    jx_error_set(JX_ERR_UNIMPLEMENTED,
                 "jx_all_to_all under jx_vmap_axis: operands of rank %d are not supported "
                 "(at most %d)",
                 r, JX_MAX_RANK - 2);
    return jx_poison();
  }
  jx_shape split = {r + 2, {n}}, res = {r + 1, {n}};
  jx_axes perm = {r + 2, {1 + s}};
  int np = 1;
  for (int j = 0; j < r; j++) {
    int64_t len = X->shape.dims[1 + j];
    if (j < s) split.dims[1 + j] = len;
    if (j == s) {
      split.dims[1 + s] = n;
      split.dims[2 + s] = len / n;
    }
    if (j > s) split.dims[2 + j] = len;
    res.dims[1 + j] = len / (j == s ? n : 1) * (j == c ? n : 1);
    if (j == c) perm.v[np++] = 0;
    perm.v[np++] = j < s ? 1 + j : j == s ? 2 + s : 2 + j;
  }
  return jx_reshape(jx_transpose(jx_reshape(X, split), perm), res);
}

/* ppermute over the vmapped axis: element v takes x_src(v), or zeros. */
static jx_array *batched_ppermute(const jx_params *p, jx_array *X, int64_t n) {
  const int64_t *pairs;
  int npairs, missing = 0;
  if (jx_ppermute_pairs(p, n, "jx_ppermute", &pairs, &npairs)) return jx_poison();
  int32_t *idx = calloc((size_t)n + 1, sizeof *idx);
  uint8_t *has = calloc((size_t)n + 1, 1);
  if (!idx || !has) {
    free(idx);
    free(has);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_ppermute: out of memory");
    return jx_poison();
  }
  for (int q = 0; q < npairs; q++) {
    idx[pairs[2 * q + 1]] = (int32_t)pairs[2 * q];
    has[pairs[2 * q + 1]] = 1;
  }
  for (int64_t v = 0; v < n; v++) missing |= !has[v];
  jx_array *y = jx_take(X, jx_array_from(JX_I32, (jx_shape){1, {n}}, idx), 0);
  if (missing) {
    jx_shape ms = {X->shape.rank, {n}};
    for (int k = 1; k < ms.rank; k++) ms.dims[k] = 1;
    jx_array *mask = jx_array_from(JX_BOOL, ms, has);
    y = jx_where(mask, y, jx_rule_zeros_like(y));
  }
  free(idx);
  free(has);
  return y;
}

jx_status jx_batch_collective(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                              int64_t n, jx_array **out, int *out_bdim) {
  const jx_params *p = ctx->params;
  const jx_prim *prim = ctx->prim;
  const char *op = jx_collective_public_name(prim->name);
  jx_array *x = in[0];
  int b = bdim[0], vmapped = jx_axis_innermost_id(), pos = -1;
  for (int k = 0; k < p->l[0].n && vmapped; k++)
    if (p->l[0].v[k] == vmapped) pos = k;
  if (pos < 0) return batch_other_axes(prim, p, x, b, out, out_bdim);

  /* validate the unbatched application first: its errors name the user's call */
  jx_aval a = {x->dtype, x->weak, x->shape, 0}, o;
  if (b != JX_NOT_MAPPED) {
    a.shape.rank--;
    for (int k = b; k < a.shape.rank; k++) a.shape.dims[k] = x->shape.dims[k + 1];
  }
  jx_status st = prim->infer(ctx, &a, &o);
  if (st) return st;
  jx_params rest = *p; /* the other axes */
  rest.l[0].n = 0;
  for (int k = 0; k < p->l[0].n; k++)
    if (k != pos) rest.l[0].v[rest.l[0].n++] = p->l[0].v[k];
  for (int k = rest.l[0].n; k < JX_MAX_RANK; k++) rest.l[0].v[k] = 0;

  out_bdim[0] = JX_NOT_MAPPED;
  if (prim == &jx_prim_psum || prim == &jx_prim_pmax || prim == &jx_prim_pmin) {
    jx_array *r = x;
    if (b != JX_NOT_MAPPED)
      r = reduce_dim(prim, x, b);
    else if (prim == &jx_prim_psum && x->dtype != JX_BOOL)
      r = jx_mul(x, jx_rule_full_like(x, (double)n));
    out[0] = rest.l[0].n ? bind(prim, r, &rest) : r;
    return jx_last_status();
  }
  if (rest.l[0].n)
    return jx_error_set(JX_ERR_UNIMPLEMENTED,
                        "%s under jx_vmap_axis: naming the vmapped axis '%s' together with other "
                        "axes is not supported (as in JAX); only psum, pmax and pmin allow it",
                        op, jx_axis_name(vmapped));
  jx_array *X = jx_rule_batch_to_front(x, b, n);
  int d = (int)p->i[0];
  if (prim == &jx_prim_all_gather) { /* every element gets the whole batch */
    jx_array *y = jx_rule_moveaxis(X, 0, d);
    out[0] = p->i[1] ? jx_reshape(y, o.shape) : y;
  } else if (prim == &jx_prim_psum_scatter) { /* element v gets block v of the sum */
    jx_array *s = reduce_dim(prim, X, 0);
    if (p->i[1]) {
      jx_shape sh = s->shape;
      sh.rank++;
      for (int k = sh.rank - 1; k > d + 1; k--) sh.dims[k] = s->shape.dims[k - 1];
      sh.dims[d] = n;
      sh.dims[d + 1] = s->shape.dims[d] / n;
      s = jx_reshape(s, sh);
    }
    out[0] = s;
    out_bdim[0] = d;
  } else if (prim == &jx_prim_all_to_all) {
    out[0] = batched_all_to_all(X, n, d, (int)p->i[1]);
    out_bdim[0] = 0;
  } else {
    out[0] = batched_ppermute(p, X, n);
    out_bdim[0] = 0;
  }
  return jx_last_status();
}
