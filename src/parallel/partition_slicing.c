/* Layout rules: ops that move data along some dims only (slice, pad,
 * dynamic_slice, dynamic_update_slice, concatenate, rev, cumulative scans,
 * sort, top_k, fft). The dims they touch are gathered whole; every other dim
 * keeps its split (the first sharded operand's, as for elementwise ops), and
 * the local op runs on the local block with the untouched dims' sizes
 * made local. */
#include "propagate.h"

static void touched_dims(const jx_eqn *e, const jx_program *p, uint8_t *t) {
  const jx_params *pp = &e->params;
  jx_shape g = p->avals[e->in[0]].shape;
  for (int d = 0; d < g.rank; d++) {
    switch (e->prim->id) {
    case JX_PRIM_slice:
      t[d] = pp->l[0].v[d] != 0 || pp->l[1].v[d] != g.dims[d] || (pp->l[2].n && pp->l[2].v[d] != 1);
      break;
    case JX_PRIM_pad: t[d] = pp->l[0].v[d] || pp->l[1].v[d] || pp->l[2].v[d]; break;
    case JX_PRIM_dynamic_slice: t[d] = pp->l[0].v[d] != g.dims[d]; break;
    case JX_PRIM_dynamic_update_slice: t[d] = p->avals[e->in[1]].shape.dims[d] != g.dims[d]; break;
    case JX_PRIM_rev:
      for (int k = 0; k < pp->l[0].n; k++) t[d] |= pp->l[0].v[k] == d;
      break;
    case JX_PRIM_top_k: t[d] = d == g.rank - 1; break;
    case JX_PRIM_fft: t[d] = d >= g.rank - pp->l[0].n; break; /* the transformed trailing dims */
    default: /* concatenate, cumulative, sort: one dim, i0 */ t[d] = pp->i[0] == d;
    }
  }
}

static jx_status plan_slicing(jx_plan *pl) {
  const jx_eqn *e = pl->e;
  int r = pl->p->avals[e->out[0]].shape.rank;
  uint8_t touched[JX_MAX_RANK] = {0};
  touched_dims(e, pl->p, touched);
  jx_pspec base = jx_pspec_replicated(r);
  uint32_t used = 0;
  int have = 0;
  for (int i = 0; i < e->nin; i++) {
    if (!pl->in_known[i] || pl->in[i].rank != r) continue;
    for (int d = 0; d < r; d++)
      if (!touched[d] && !base.n[d] && pl->in[i].n[d]) {
        jx_pspec_take(&base, d, &pl->in[i], d, &used);
        have = 1;
      }
  }
  for (int d = 0; d < r && !have && pl->out_known[0]; d++)
    if (!touched[d]) jx_pspec_take(&base, d, &pl->out[0], d, &used);
  for (int i = 0; i < e->nin; i++) {
    int ri = pl->p->avals[e->in[i]].shape.rank;
    pl->req[i] = ri == r ? base : jx_pspec_replicated(ri);
  }
  for (int o = 0; o < e->nout; o++) pl->prod[o] = base;
  return JX_OK;
}

static void local_slicing(const jx_plan *pl, const jx_aval *in, const jx_aval *out, jx_params *q) {
  (void)out;
  const jx_prim_id id = pl->e->prim->id;
  int slot = id == JX_PRIM_slice ? 1 : id == JX_PRIM_dynamic_slice ? 0 : -1;
  if (slot < 0) return; /* limit_indices / slice_sizes of split (untouched) dims: the block's */
  for (int d = 0; d < in[0].shape.rank; d++)
    if (pl->req[0].n[d]) q->l[slot].v[d] = in[0].shape.dims[d];
}

const jx_pfamily jx_pfamily_slicing = {
    .name = "slicing", .plan = plan_slicing, .local_params = local_slicing};
