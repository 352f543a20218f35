/* Layout rules: reductions. Kept dims keep their split; a reduced dim that
 * is split is reduced locally and the partial results are combined across
 * its axes afterwards (psum for sums, pmax/pmin for max/min); products,
 * logical and/or and argmax/argmin gather the reduced dim first. */
#include "propagate.h"

static jx_status plan_reduce(jx_plan *pl) {
  const jx_eqn *e = pl->e;
  const jx_prim *q = e->prim;
  int r = pl->p->avals[e->in[0]].shape.rank;
  jx_dtype dt = pl->p->avals[e->in[0]].dtype;
  uint8_t reduced[JX_MAX_RANK] = {0};
  if (q->id == JX_PRIM_argmax || q->id == JX_PRIM_argmin)
    reduced[e->params.i[0]] = 1;
  else
    for (int k = 0; k < e->params.l[0].n; k++) reduced[e->params.l[0].v[k]] = 1;
  jx_partial_op op = JX_PARTIAL_NONE;
  switch (q->id) {
  case JX_PRIM_reduce_sum: op = JX_PARTIAL_SUM; break;
  case JX_PRIM_reduce_max: op = dt != JX_BOOL ? JX_PARTIAL_MAX : JX_PARTIAL_NONE; break;
  case JX_PRIM_reduce_min: op = dt != JX_BOOL ? JX_PARTIAL_MIN : JX_PARTIAL_NONE; break;
  default: /* products, and/or, argmax/argmin: the reduced dims are gathered */ break;
  }
  jx_pspec req = jx_pspec_replicated(r),
           prod = jx_pspec_replicated(pl->p->avals[e->out[0]].shape.rank);
  uint32_t used = 0;
  pl->npartial = 0;
  for (int d = 0, od = 0; d < r; d++) {
    if (reduced[d]) {
      if (op == JX_PARTIAL_NONE || !pl->in_known[0] || !pl->in[0].n[d]) continue;
      if (!jx_pspec_take(&req, d, &pl->in[0], d, &used)) continue;
      for (int k = 0; k < req.n[d]; k++) pl->partial_axes[pl->npartial++] = req.ax[d][k];
      pl->partial = op;
      continue;
    }
    if (pl->in_known[0])
      jx_pspec_take(&req, d, &pl->in[0], d, &used);
    else if (pl->out_known[0])
      jx_pspec_take(&req, d, &pl->out[0], od, &used);
    jx_pspec_take(&prod, od, &req, d, &(uint32_t){0});
    od++;
  }
  pl->req[0] = req;
  pl->prod[0] = prod;
  return JX_OK;
}

const jx_pfamily jx_pfamily_reduce = {.name = "reduce", .plan = plan_reduce};
