/* Layout rules: gather and the scatters. An operand dim the indices never
 * address and whose window is the whole dim (a "passthrough" dim: not in
 * start_index_map / scatter_dims_to_operand_dims, not collapsed / inserted)
 * keeps its split, in the result's matching offset dim (gather) or in the
 * updates' matching window dim and the result (scatter); every other dim,
 * and the indices, are whole. */
#include "../prims/prims.h"
#include "propagate.h"

static int listed(const jx_ilist *l, int d) {
  for (int k = 0; k < l->n; k++)
    if (l->v[k] == d) return 1;
  return 0;
}

/* For each operand dim: the dim of `other` (gather: the result; scatter:
 * the updates) its window maps to, or -1 when it is not passthrough. */
static void passthrough(const jx_eqn *e, const jx_program *p, int *map) {
  const jx_params *q = &e->params;
  int gather = e->prim == &jx_prim_gather;
  jx_shape op = p->avals[e->in[0]].shape;
  jx_shape other = p->avals[gather ? e->out[0] : e->in[2]].shape;
  for (int d = 0, k = 0; d < op.rank; d++) {
    map[d] = -1;
    if (listed(&q->l[1], d)) continue; /* collapsed / inserted: no window dim */
    int od = (int)q->l[0].v[k++];      /* offset_dims / update_window_dims */
    if (listed(&q->l[2], d)) continue; /* addressed by the indices */
    if (other.dims[od] != op.dims[d]) continue;
    if (gather && q->l[3].v[d] != op.dims[d]) continue;
    map[d] = od;
  }
}

static jx_status plan_gather(jx_plan *pl) {
  const jx_eqn *e = pl->e;
  const jx_program *p = pl->p;
  int gather = e->prim == &jx_prim_gather;
  int map[JX_MAX_RANK];
  passthrough(e, p, map);
  jx_plan_replicate_all(pl);
  uint32_t used = 0;
  int r = p->avals[e->in[0]].shape.rank;
  for (int d = 0; d < r; d++) {
    if (map[d] < 0) continue;
    jx_pspec *req = &pl->req[0];
    if (pl->in_known[0] && pl->in[0].n[d])
      jx_pspec_take(req, d, &pl->in[0], d, &used);
    else if (!gather && pl->in_known[2] && pl->in[2].n[map[d]])
      jx_pspec_take(req, d, &pl->in[2], map[d], &used);
    else if (pl->out_known[0])
      jx_pspec_take(req, d, &pl->out[0], gather ? map[d] : d, &used);
    if (gather) {
      jx_pspec_take(&pl->prod[0], map[d], req, d, &(uint32_t){0});
    } else {
      jx_pspec_take(&pl->req[2], map[d], req, d, &(uint32_t){0});
      jx_pspec_take(&pl->prod[0], d, req, d, &(uint32_t){0});
    }
  }
  return JX_OK;
}

static void local_gather(const jx_plan *pl, const jx_aval *in, const jx_aval *out, jx_params *q) {
  (void)out;
  if (pl->e->prim != &jx_prim_gather) return;
  for (int d = 0; d < in[0].shape.rank; d++) /* slice_sizes of split dims: the block's */
    if (pl->req[0].n[d]) q->l[3].v[d] = in[0].shape.dims[d];
}

const jx_pfamily jx_pfamily_gather = {
    .name = "gather", .plan = plan_gather, .local_params = local_gather};
