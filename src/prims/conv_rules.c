/* JVP, transpose and batching rules of conv_general_dilated (the row is in
 * conv.c). They follow JAX's lax/convolution.py:
 *  - the lhs cotangent is a convolution of the output cotangent with the
 *    spatially reversed kernel whose feature dims swap roles, with lhs
 *    dilation = the window strides and the padding of
 *    _conv_general_vjp_lhs_padding; feature groups move into the kernel's
 *    input feature dim, batch groups become feature groups and are moved back
 *    into the batch dim afterwards;
 *  - the rhs cotangent is a convolution of the lhs with the cotangent as the
 *    kernel (batch and feature dims of every spec swapped), rhs dilation = the
 *    window strides; feature groups become batch groups and vice versa;
 *  - batching folds the mapped axis into the batch dim of the lhs, into the
 *    output feature dim of the rhs (with the groups kept outermost), and both
 *    together into the feature groups (or batch groups).
 * JAX converts the other operand to the cotangent's dtype; here both go to the
 * wider of the two (jx_contract_cotangent_type), the same where the preferred
 * type is at least as wide as the operands.
 * Params (conv.c): strides=l0 pad_lo=l1 pad_hi=l2 lhs_dil=l3 rhs_dil=l4
 * lhs_spec=l5 rhs_spec=l6 out_spec=l7 (batch/out-feature dim, feature/in-feature
 * dim, spatial dims) feature_group_count=i0 batch_group_count=i1
 * has_preferred=i2 preferred=dtype. */
#include "../base/error.h"
#include "contract_rules.h"
#include "prims.h"
#include "rules.h"

enum { STRIDES, PAD_LO, PAD_HI, LHS_DIL, RHS_DIL, LHS_SPEC, RHS_SPEC, OUT_SPEC };

static jx_array *conv(jx_array *a, jx_array *b, const jx_params *p) {
  return jx_bind1(&jx_prim_conv_general_dilated, 2, (jx_array *[]){a, b}, p);
}

/* ---- shape helpers ---- */

static jx_array *reshape(jx_array *x, int rank, const int64_t *dims) {
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = rank;
  for (int i = 0; i < rank; i++) p.l[0].v[i] = dims[i];
  return jx_bind1(&jx_prim_reshape, 1, &x, &p);
}

/* JAX's _reshape_axis_into: axis src of x merged into axis dst (numbered with
 * src removed) as its major part. */
static jx_array *axis_into(int src, int dst, jx_array *x) {
  if (x->poisoned) return x;
  int r = x->shape.rank;
  int64_t perm[JX_MAX_RANK], dims[JX_MAX_RANK];
  int n = 0;
  for (int i = 0; i < r; i++)
    if (i != src) {
      if (n == dst) perm[n++] = src;
      perm[n++] = i;
    }
  if (n == dst) perm[n++] = src;
  n = 0;
  for (int i = 0; i < r; i++)
    if (i != src) dims[n++] = x->shape.dims[i];
  dims[dst] *= x->shape.dims[src];
  return reshape(jx_contract_permute(x, r, perm), r - 1, dims);
}

/* JAX's _reshape_axis_out_of: axis src of x split into (size1, rest). */
static jx_array *axis_out_of(int src, int64_t size1, jx_array *x) {
  if (x->poisoned) return x;
  int r = x->shape.rank;
  if (r + 1 > JX_MAX_RANK) {
    jx_error_set(JX_ERR_UNIMPLEMENTED,
                 "conv_general_dilated: this rule needs rank %d, more than the %d dims arrays "
                 "may have",
                 r + 1, JX_MAX_RANK);
    return jx_poison();
  }
  int64_t dims[JX_MAX_RANK];
  int n = 0;
  for (int i = 0; i < r; i++) {
    if (i == src) {
      dims[n++] = size1;
      dims[n++] = size1 ? x->shape.dims[i] / size1 : 0;
    } else {
      dims[n++] = x->shape.dims[i];
    }
  }
  return reshape(x, n, dims);
}

/* The spec with its first two entries (batch and feature) swapped. */
static jx_ilist spec_t(jx_ilist spec) {
  int64_t t = spec.v[0];
  spec.v[0] = spec.v[1];
  spec.v[1] = t;
  return spec;
}

static int64_t entry(const jx_ilist *l, int i, int64_t dflt) { return l->n ? l->v[i] : dflt; }
static int64_t dilate(int64_t d, int64_t dil) { return d <= 0 ? 0 : 1 + dil * (d - 1); }

/* ---- transposes ---- */

/* Params of a conv with the preferred type of p and everything else zero. */
static jx_params base_params(const jx_params *p) {
  jx_params q = JX_PARAMS_INIT;
  q.i[2] = p->i[2];
  q.dtype = p->dtype;
  return q;
}

static jx_array *transpose_lhs(const jx_rule_ctx *ctx, jx_array *g, const jx_aval *lhs_aval,
                               jx_array *rhs) {
  const jx_params *p = ctx->params;
  jx_aval lhs = *lhs_aval;
  int nsp = lhs.shape.rank - 2;
  const jx_ilist *ls = &p->l[LHS_SPEC], *rs = &p->l[RHS_SPEC], *os = &p->l[OUT_SPEC];
  int64_t G = p->i[0], BG = p->i[1];
  jx_shape rshape = rhs->shape;
  jx_params q = base_params(p);
  if (G > 1 || BG > 1) {
    /* the groups move from the kernel's output features into its input features */
    rhs = axis_out_of((int)rs->v[0], G > 1 ? G : BG, rhs);
    rhs = axis_into((int)rs->v[0], (int)rs->v[1], rhs);
  }
  q.i[0] = G > 1 ? G : BG;
  q.i[1] = 1;
  q.l[LHS_SPEC] = *os;
  q.l[RHS_SPEC] = spec_t(*rs);
  q.l[OUT_SPEC] = *ls;
  jx_params rv = JX_PARAMS_INIT;
  for (int i = 0; i < nsp; i++) {
    int64_t in = lhs.shape.dims[ls->v[2 + i]], k = rshape.dims[rs->v[2 + i]];
    int64_t o = g->shape.dims[os->v[2 + i]];
    int64_t stride = entry(&p->l[STRIDES], i, 1), ldil = entry(&p->l[LHS_DIL], i, 1);
    int64_t rdil = entry(&p->l[RHS_DIL], i, 1);
    int64_t lhs_d = dilate(in, ldil), rhs_d = dilate(k, rdil), out_d = dilate(o, stride);
    int64_t before = rhs_d - entry(&p->l[PAD_LO], i, 0) - 1;
    q.l[PAD_LO].v[i] = before;
    q.l[PAD_HI].v[i] = lhs_d + rhs_d - 1 - out_d - before;
    q.l[STRIDES].v[i] = ldil;
    q.l[LHS_DIL].v[i] = stride;
    q.l[RHS_DIL].v[i] = rdil;
    rv.l[0].v[i] = rs->v[2 + i];
  }
  for (int k = STRIDES; k <= RHS_DIL; k++) q.l[k].n = nsp;
  rv.l[0].n = nsp;
  jx_array *rev = nsp ? jx_bind1(&jx_prim_rev, 1, &rhs, &rv) : rhs;
  jx_dtype common = jx_contract_cotangent_type(g->dtype, rev->dtype, &q.i[2], q.dtype);
  jx_array *out = conv(jx_contract_convert(g, common), jx_contract_convert(rev, common), &q);
  out = jx_contract_convert(out, lhs.dtype);
  if (BG > 1) {
    /* the output features hold (batch group, feature): the groups go back into the batch */
    out = axis_out_of((int)ls->v[1], BG, out);
    out = axis_into((int)ls->v[1], (int)ls->v[0], out);
  }
  return out;
}

static jx_array *transpose_rhs(const jx_rule_ctx *ctx, jx_array *g, const jx_aval *rhs_aval,
                               jx_array *lhs) {
  const jx_params *p = ctx->params;
  jx_aval rhs = *rhs_aval;
  if (jx_shape_numel(g->shape) == 0) return jx_rule_zeros(rhs);
  int nsp = rhs.shape.rank - 2;
  const jx_ilist *ls = &p->l[LHS_SPEC], *rs = &p->l[RHS_SPEC], *os = &p->l[OUT_SPEC];
  jx_params q = base_params(p);
  /* feature groups of the forward conv are batch groups here, and vice versa */
  q.i[0] = p->i[1];
  q.i[1] = p->i[0];
  q.l[LHS_SPEC] = spec_t(*ls);
  q.l[RHS_SPEC] = spec_t(*os);
  q.l[OUT_SPEC] = spec_t(*rs);
  for (int i = 0; i < nsp; i++) {
    int64_t in = lhs->shape.dims[ls->v[2 + i]], k = rhs.shape.dims[rs->v[2 + i]];
    int64_t o = g->shape.dims[os->v[2 + i]];
    int64_t stride = entry(&p->l[STRIDES], i, 1), ldil = entry(&p->l[LHS_DIL], i, 1);
    int64_t rdil = entry(&p->l[RHS_DIL], i, 1), lo = entry(&p->l[PAD_LO], i, 0);
    int64_t lhs_d = dilate(in, ldil), rhs_d = dilate(k, rdil), out_d = dilate(o, stride);
    q.l[PAD_LO].v[i] = lo;
    q.l[PAD_HI].v[i] = (out_d - lhs_d) + (rhs_d - lo - 1);
    q.l[STRIDES].v[i] = rdil;
    q.l[LHS_DIL].v[i] = ldil;
    q.l[RHS_DIL].v[i] = stride;
  }
  for (int k = STRIDES; k <= RHS_DIL; k++) q.l[k].n = nsp;
  jx_dtype common = jx_contract_cotangent_type(g->dtype, lhs->dtype, &q.i[2], q.dtype);
  jx_array *out = conv(jx_contract_convert(lhs, common), jx_contract_convert(g, common), &q);
  return jx_contract_convert(out, rhs.dtype);
}

JX_DEFBILINEAR_TRANSPOSE(jx_transpose_conv_general_dilated, transpose_lhs, transpose_rhs)

/* ---- batching ---- */

/* The unbatched operand shape of x mapped along bd (or x's shape). */
static jx_aval unbatched(jx_array *x, int bd) {
  jx_aval a = {x->dtype, x->weak, x->shape, 0};
  if (bd == JX_NOT_MAPPED) return a;
  for (int i = bd; i + 1 < a.shape.rank; i++) a.shape.dims[i] = a.shape.dims[i + 1];
  a.shape.rank--;
  return a;
}

JX_BATCH_RULE(jx_batch_conv_general_dilated) {
  const jx_params *p = ctx->params;
  int lbd = bdim[0], rbd = bdim[1];
  jx_array *lhs = in[0], *rhs = in[1];
  const jx_ilist *ls = &p->l[LHS_SPEC], *rs = &p->l[RHS_SPEC], *os = &p->l[OUT_SPEC];
  int64_t G = p->i[0], BG = p->i[1], B = axis_size;
  jx_params q = *p;
  if (lbd == JX_NOT_MAPPED && rbd == JX_NOT_MAPPED) {
    out[0] = conv(lhs, rhs, p);
    out_bdim[0] = JX_NOT_MAPPED;
    return jx_last_status();
  }
  if (B == 0) {
    /* the reshapes below cannot fold a size-0 axis: zeros of the batched shape */
    jx_aval av[2] = {unbatched(lhs, lbd), unbatched(rhs, rbd)}, o;
    jx_status st = jx_prim_conv_general_dilated.infer(ctx, av, &o);
    if (st) return st;
    for (int i = o.shape.rank; i > 0; i--) o.shape.dims[i] = o.shape.dims[i - 1];
    o.shape.dims[0] = 0;
    o.shape.rank++;
    o.weak = 0;
    out[0] = jx_rule_zeros(o);
    out_bdim[0] = 0;
    return jx_last_status();
  }
  int ls0 = (int)ls->v[0], ls1 = (int)ls->v[1], rs0 = (int)rs->v[0];
  int os0 = (int)os->v[0], os1 = (int)os->v[1];
  if (lbd != JX_NOT_MAPPED && rbd != JX_NOT_MAPPED) {
    /* each batch member is its own group of features (or of batch) */
    if (BG > 1) {
      lhs = axis_into(lbd, ls0, lhs);
      q.i[1] = BG * B;
    } else {
      lhs = axis_into(lbd, ls1, lhs);
      q.i[0] = G * B;
    }
    rhs = axis_into(rbd, rs0, rhs);
    out[0] = axis_out_of(os1, B, conv(lhs, rhs, &q));
    out_bdim[0] = os1;
  } else if (lbd != JX_NOT_MAPPED) {
    if (BG == 1) {
      lhs = axis_into(lbd, ls0, lhs);
    } else {
      /* batch groups stay outermost in the batch dim: (BG, B, N / BG) */
      lhs = axis_out_of(ls0 + (lbd <= ls0), BG, lhs);
      lhs = axis_into(lbd + (ls0 < lbd), ls0 + 1, lhs);
      lhs = axis_into(ls0, ls0, lhs);
    }
    out[0] = axis_out_of(os0, B, conv(lhs, rhs, &q));
    out_bdim[0] = os0;
  } else {
    if (G == 1 && BG == 1) {
      rhs = axis_into(rbd, rs0, rhs);
      out[0] = axis_out_of(os1, B, conv(lhs, rhs, &q));
    } else {
      /* groups stay outermost in the output features: (groups, B, O / groups) */
      int64_t gc = G > 1 ? G : BG;
      rhs = axis_out_of(rs0 + (rbd <= rs0), gc, rhs);
      rhs = axis_into(rbd + (rs0 < rbd), rs0 + 1, rhs);
      rhs = axis_into(rs0, rs0, rhs);
      jx_array *r = axis_out_of(os1, gc, conv(lhs, rhs, &q));
      r = axis_out_of(os1 + 1, B, r);
      out[0] = axis_into(os1, os1 + 1, r);
    }
    out_bdim[0] = os1;
  }
  return jx_last_status();
}
