/* Layout rules: broadcast_in_dim, reshape (and squeeze, expand_dims),
 * transpose.
 *
 * broadcast_in_dim: an operand dim keeps its split in the result dim it
 * maps to; broadcast dims (new, or 1 -> n) take the wanted layout for free,
 * since the local op broadcasts straight to the local block.
 * reshape: dims are matched in groups of equal size products; a group keeps
 * the split of its major (first non-1) dim when the other side's major dim
 * is divisible by the parts (the blocks are then contiguous runs of the
 * flattened group on both sides); otherwise the group is replicated.
 * transpose: the spec is permuted. */
#include "../prims/prims.h"
#include "propagate.h"

static jx_status plan_broadcast(jx_plan *pl) {
  const jx_eqn *e = pl->e;
  jx_shape gi = pl->p->avals[e->in[0]].shape, go = pl->p->avals[e->out[0]].shape;
  const jx_ilist *bd = &e->params.l[1];
  jx_pspec req = jx_pspec_replicated(gi.rank), prod = jx_pspec_replicated(go.rank);
  uint32_t used = 0;
  uint8_t mapped[JX_MAX_RANK] = {0};
  for (int i = 0; i < gi.rank; i++) {
    int od = (int)bd->v[i];
    if (gi.dims[i] != go.dims[od]) continue; /* 1 -> n: broadcast */
    mapped[od] = 1;
    if (pl->in_known[0])
      jx_pspec_take(&req, i, &pl->in[0], i, &used);
    else if (pl->out_known[0])
      jx_pspec_take(&req, i, &pl->out[0], od, &used);
    jx_pspec_take(&prod, od, &req, i, &(uint32_t){0});
  }
  for (int d = 0; d < go.rank && pl->out_known[0]; d++)
    if (!mapped[d]) jx_pspec_take(&prod, d, &pl->out[0], d, &used);
  pl->req[0] = req;
  pl->prod[0] = prod;
  return JX_OK;
}

static int first_big(jx_shape s, int from, int to) {
  for (int d = from; d < to; d++)
    if (s.dims[d] > 1) return d;
  return -1;
}

static jx_status plan_reshape(jx_plan *pl) {
  const jx_eqn *e = pl->e;
  jx_shape gi = pl->p->avals[e->in[0]].shape, go = pl->p->avals[e->out[0]].shape;
  jx_pspec req = jx_pspec_replicated(gi.rank), prod = jx_pspec_replicated(go.rank);
  pl->req[0] = req;
  pl->prod[0] = prod;
  if (jx_shape_numel(gi) == 0) return JX_OK;
  int i = 0, j = 0;
  while (i < gi.rank || j < go.rank) {
    int i0 = i, j0 = j;
    int64_t pi = i < gi.rank ? gi.dims[i++] : 1, pj = j < go.rank ? go.dims[j++] : 1;
    while (pi != pj) {
      if (pi < pj && i < gi.rank)
        pi *= gi.dims[i++];
      else if (pj < pi && j < go.rank)
        pj *= go.dims[j++];
      else
        return JX_OK; /* not a reshape of equal sizes: leave it replicated */
    }
    int fi = first_big(gi, i0, i), fo = first_big(go, j0, j);
    if (fi < 0 || fo < 0) continue;
    uint32_t used = 0;
    if (pl->in_known[0] && pl->in[0].n[fi]) {
      if (go.dims[fo] % jx_pspec_parts(pl->mesh, &pl->in[0], fi) == 0) {
        jx_pspec_take(&req, fi, &pl->in[0], fi, &used);
        jx_pspec_take(&prod, fo, &pl->in[0], fi, &(uint32_t){0});
      }
    } else if (!pl->in_known[0] && pl->out_known[0] && pl->out[0].n[fo]) {
      if (gi.dims[fi] % jx_pspec_parts(pl->mesh, &pl->out[0], fo) == 0) {
        jx_pspec_take(&req, fi, &pl->out[0], fo, &used);
        jx_pspec_take(&prod, fo, &pl->out[0], fo, &(uint32_t){0});
      }
    }
  }
  pl->req[0] = req;
  pl->prod[0] = prod;
  return JX_OK;
}

static jx_status plan_transpose(jx_plan *pl) {
  const jx_ilist *perm = &pl->e->params.l[0];
  int r = perm->n;
  jx_pspec req = jx_pspec_replicated(r), prod = jx_pspec_replicated(r);
  for (int d = 0; d < r; d++) {
    int s = (int)perm->v[d];
    if (pl->in_known[0])
      jx_pspec_take(&req, s, &pl->in[0], s, &(uint32_t){0});
    else if (pl->out_known[0])
      jx_pspec_take(&req, s, &pl->out[0], d, &(uint32_t){0});
    jx_pspec_take(&prod, d, &req, s, &(uint32_t){0});
  }
  pl->req[0] = req;
  pl->prod[0] = prod;
  return JX_OK;
}

static jx_status plan_shape(jx_plan *pl) {
  switch (pl->e->prim->id) {
  case JX_PRIM_broadcast_in_dim: return plan_broadcast(pl);
  case JX_PRIM_transpose: return plan_transpose(pl);
  default: /* reshape, squeeze, expand_dims */ return plan_reshape(pl);
  }
}

static void local_shape(const jx_plan *pl, const jx_aval *in, const jx_aval *out, jx_params *q) {
  (void)in;
  const jx_prim *p = pl->e->prim;
  if (p != &jx_prim_broadcast_in_dim && p != &jx_prim_reshape) return;
  q->l[0].n = out[0].shape.rank; /* shape / new_sizes: the local block's */
  for (int d = 0; d < out[0].shape.rank; d++) q->l[0].v[d] = out[0].shape.dims[d];
}

const jx_pfamily jx_pfamily_shape = {
    .name = "shape", .plan = plan_shape, .local_params = local_shape};
