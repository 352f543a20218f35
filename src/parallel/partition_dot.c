/* Layout rules: dot_general. A batch dim pair takes one split (the lhs's,
 * else the rhs's, else the wanted result's) on both sides and in the
 * result; a contracting pair likewise on both sides, and the local products
 * are then partial sums over those axes (psum, or psum_scatter when the
 * result is wanted split along them); free dims keep their operand's split.
 * A mesh axis splits one dim at most: later claims on a used axis are
 * dropped (that dim is gathered). Result dims: batch, lhs free, rhs free. */
#include "propagate.h"

/* Candidate sources for one dim, tried in order; the first that is known,
 * split and free of used axes wins. */
typedef struct {
  const jx_pspec *spec;
  int dim;
} source;

static void choose(jx_pspec *dst, int dd, const source *src, int n, uint32_t *used) {
  for (int k = 0; k < n; k++)
    if (src[k].spec && src[k].spec->n[src[k].dim] &&
        jx_pspec_take(dst, dd, src[k].spec, src[k].dim, used))
      return;
}

/* One way to lay the dot out: claims on mesh axes are made in order (batch
 * pairs, then contracting pairs before or after the free dims); what is
 * claimed first keeps its split, later claims on the same axis give way. */
typedef struct {
  jx_pspec rl, rq, prod;
  int npartial, partial_axes[JX_MAX_RANK];
} dot_layout;

static void layout_dot(const jx_plan *pl, int contract_first, dot_layout *o) {
  const jx_eqn *e = pl->e;
  const jx_params *q = &e->params;
  int lr = pl->p->avals[e->in[0]].shape.rank, rr = pl->p->avals[e->in[1]].shape.rank;
  const jx_pspec *L = pl->in_known[0] ? &pl->in[0] : NULL, *R = pl->in_known[1] ? &pl->in[1] : NULL,
                 *O = pl->out_known[0] ? &pl->out[0] : NULL;
  o->rl = jx_pspec_replicated(lr);
  o->rq = jx_pspec_replicated(rr);
  o->prod = jx_pspec_replicated(pl->p->avals[e->out[0]].shape.rank);
  o->npartial = 0;
  uint8_t role_l[JX_MAX_RANK] = {0}, role_r[JX_MAX_RANK] = {0};
  uint32_t used = 0;
  int od = 0;
  for (int k = 0; k < q->l[2].n; k++, od++) { /* batch */
    int a = (int)q->l[2].v[k], b = (int)q->l[3].v[k];
    role_l[a] = role_r[b] = 1;
    jx_pspec t = jx_pspec_replicated(1);
    source s[3] = {{L, a}, {R, b}, {O, od}};
    choose(&t, 0, s, 3, &used);
    jx_pspec_take(&o->rl, a, &t, 0, &(uint32_t){0});
    jx_pspec_take(&o->rq, b, &t, 0, &(uint32_t){0});
    jx_pspec_take(&o->prod, od, &t, 0, &(uint32_t){0});
  }
  for (int k = 0; k < q->l[0].n; k++) role_l[q->l[0].v[k]] = role_r[q->l[1].v[k]] = 2;
  for (int pass = 0; pass < 2; pass++) {
    if ((pass == 0) == (contract_first != 0)) {
      for (int k = 0; k < q->l[0].n; k++) { /* contracting */
        int a = (int)q->l[0].v[k], b = (int)q->l[1].v[k];
        jx_pspec t = jx_pspec_replicated(1);
        source s[2] = {{L, a}, {R, b}};
        choose(&t, 0, s, 2, &used);
        jx_pspec_take(&o->rl, a, &t, 0, &(uint32_t){0});
        jx_pspec_take(&o->rq, b, &t, 0, &(uint32_t){0});
        for (int j = 0; j < t.n[0]; j++) o->partial_axes[o->npartial++] = t.ax[0][j];
      }
    } else {
      int fd = od;
      for (int a = 0; a < lr; a++) /* lhs free */
        if (!role_l[a]) {
          source s[2] = {{L, a}, {O, fd++}};
          choose(&o->rl, a, s, 2, &used);
        }
      for (int b = 0; b < rr; b++) /* rhs free */
        if (!role_r[b]) {
          source s[2] = {{R, b}, {O, fd++}};
          choose(&o->rq, b, s, 2, &used);
        }
    }
  }
  for (int a = 0; a < lr; a++)
    if (!role_l[a]) jx_pspec_take(&o->prod, od++, &o->rl, a, &(uint32_t){0});
  for (int b = 0; b < rr; b++)
    if (!role_r[b]) jx_pspec_take(&o->prod, od++, &o->rq, b, &(uint32_t){0});
}

/* Elements moved to lay an operand of global shape g out as `want` from
 * `have` (unknown: nothing): a split given up costs a gather of the whole
 * array; new splits are local slices and cost nothing. */
static double reshard_cost(const jx_pspec *have, const jx_pspec *want, jx_shape g) {
  if (!have) return 0;
  for (int d = 0; d < g.rank; d++)
    for (int j = 0; j < have->n[d]; j++) {
      int kept = 0;
      for (int k = 0; k < want->n[d]; k++) kept |= want->ax[d][k] == have->ax[d][j];
      if (!kept) return (double)jx_shape_numel(g);
    }
  return 0;
}

static double layout_cost(const jx_plan *pl, const dot_layout *o) {
  const jx_program *p = pl->p;
  const jx_eqn *e = pl->e;
  double c = reshard_cost(pl->in_known[0] ? &pl->in[0] : NULL, &o->rl, p->avals[e->in[0]].shape) +
             reshard_cost(pl->in_known[1] ? &pl->in[1] : NULL, &o->rq, p->avals[e->in[1]].shape);
  if (o->npartial) c += 2.0 * (double)jx_shape_numel(p->avals[e->out[0]].shape); /* an all-reduce */
  return c;
}

/* Both orders of claims are laid out and the one that moves fewer elements
 * wins: with the batch split over "data" and a weight split over "data"
 * along its contracting dim (FSDP), gathering the weight beats reducing
 * the product; with the contracting dims split on both sides (Megatron's
 * row-parallel layer), the partial sums win. */
static jx_status plan_dot(jx_plan *pl) {
  dot_layout a, b;
  layout_dot(pl, 1, &a);
  layout_dot(pl, 0, &b);
  const dot_layout *best = layout_cost(pl, &b) < layout_cost(pl, &a) ? &b : &a;
  pl->req[0] = best->rl;
  pl->req[1] = best->rq;
  pl->prod[0] = best->prod;
  pl->npartial = best->npartial;
  for (int k = 0; k < best->npartial; k++) pl->partial_axes[k] = best->partial_axes[k];
  pl->partial = best->npartial ? JX_PARTIAL_SUM : JX_PARTIAL_NONE;
  return JX_OK;
}

const jx_pfamily jx_pfamily_dot = {.name = "dot", .plan = plan_dot};
