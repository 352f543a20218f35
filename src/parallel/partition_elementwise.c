/* Layout rules: elementwise primitives and sharding constraints.
 *
 * Elementwise: operands of the result's shape are merged (the first sharded
 * operand's layout wins; later ones fill dims it leaves whole, with axes it
 * does not use) and every such operand is read in that layout; scalar
 * operands (select_n's which, clamp's bounds) stay whole. With no sharded
 * operand the wanted result layout is taken: a replicated operand is then
 * sliced locally, which costs no communication. */
#include "constraint.h"
#include "propagate.h"

static jx_status plan_elementwise(jx_plan *pl) {
  const jx_eqn *e = pl->e;
  int r = pl->p->avals[e->out[0]].shape.rank;
  jx_pspec base = jx_pspec_replicated(r);
  uint32_t used = 0;
  int have = 0;
  for (int i = 0; i < e->nin; i++) {
    if (!pl->in_known[i] || pl->in[i].rank != r || !jx_pspec_sharded(&pl->in[i])) continue;
    for (int d = 0; d < r; d++)
      if (!base.n[d]) jx_pspec_take(&base, d, &pl->in[i], d, &used);
    have = 1;
  }
  for (int o = 0; o < e->nout && !have; o++)
    if (pl->out_known[o]) {
      base = pl->out[o];
      have = 1;
    }
  for (int i = 0; i < e->nin; i++) {
    int ri = pl->p->avals[e->in[i]].shape.rank;
    pl->req[i] = ri == r ? base : jx_pspec_replicated(ri);
  }
  for (int o = 0; o < e->nout; o++) pl->prod[o] = base;
  return JX_OK;
}

const jx_pfamily jx_pfamily_elementwise = {.name = "elementwise", .plan = plan_elementwise};

/* sharding_constraint: the value laid out as it says; locally nothing but
 * the resharding into that layout. JX_AUTO's passes layouts through as an
 * elementwise op does (a plan pins its result). */
static jx_status plan_constraint(jx_plan *pl) {
  const jx_sharding *s = jx_constraint_sharding(pl->e);
  if (!s) return plan_elementwise(pl);
  int r = pl->p->avals[pl->e->out[0]].shape.rank;
  pl->req[0] = pl->prod[0] = jx_pspec_of(s, r);
  return JX_OK;
}

const jx_pfamily jx_pfamily_constraint = {
    .name = "constraint", .plan = plan_constraint, .identity = 1};
