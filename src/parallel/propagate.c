/* Sharding propagation: forward from the inputs and constraints, backward for
 * what is still unknown, until nothing changes; unknown at the end means
 * replicated. Each equation's rule is its family's plan (propagate.h). */
#include "propagate.h"

#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "constraint.h"

jx_pspec jx_pspec_replicated(int rank) {
  jx_pspec a;
  memset(&a, 0, sizeof a);
  a.rank = rank;
  return a;
}

jx_pspec jx_pspec_of(const jx_sharding *s, int rank) {
  jx_pspec a = jx_pspec_replicated(rank);
  for (int d = 0; s && d < s->ndims && d < rank; d++) {
    a.n[d] = (int8_t)s->naxes[d];
    for (int k = 0; k < s->naxes[d]; k++) a.ax[d][k] = (int8_t)s->axis[d][k];
  }
  return a;
}

int jx_pspec_equal(const jx_pspec *a, const jx_pspec *b) {
  if (a->rank != b->rank) return 0;
  for (int d = 0; d < a->rank; d++) {
    if (a->n[d] != b->n[d]) return 0;
    for (int k = 0; k < a->n[d]; k++)
      if (a->ax[d][k] != b->ax[d][k]) return 0;
  }
  return 1;
}

int jx_pspec_sharded(const jx_pspec *a) {
  for (int d = 0; d < a->rank; d++)
    if (a->n[d]) return 1;
  return 0;
}

int64_t jx_pspec_parts(const jx_mesh *m, const jx_pspec *a, int d) {
  int64_t n = 1;
  for (int k = 0; k < a->n[d]; k++) n *= m->size[a->ax[d][k]];
  return n;
}

jx_shape jx_pspec_local(const jx_mesh *m, const jx_pspec *a, jx_shape g) {
  for (int d = 0; d < g.rank && d < a->rank; d++) g.dims[d] /= jx_pspec_parts(m, a, d);
  return g;
}

int jx_pspec_fits(const jx_mesh *m, const jx_pspec *a, jx_shape g) {
  for (int d = 0; d < a->rank; d++)
    if (a->n[d] && (d >= g.rank || g.dims[d] % jx_pspec_parts(m, a, d) != 0)) return 0;
  return 1;
}

jx_sharding *jx_pspec_sharding(jx_mesh *m, const jx_pspec *a) {
  int naxes[JX_MAX_RANK] = {0}, axis[JX_MAX_RANK][JX_MAX_RANK] = {{0}}, nd = 0;
  for (int d = 0; d < a->rank; d++) {
    naxes[d] = a->n[d];
    for (int k = 0; k < a->n[d]; k++) axis[d][k] = a->ax[d][k];
    if (a->n[d]) nd = d + 1; /* trailing "None" entries are left out */
  }
  return jx_sharding_make(m, nd, naxes, (const int(*)[JX_MAX_RANK])axis, "jx_jit");
}

const char *jx_pspec_str(const jx_mesh *m, const jx_pspec *a, char *buf) {
  size_t len = 0;
  buf[0] = 0;
  for (int d = 0; d < a->rank; d++) {
    len += (size_t)snprintf(buf + len, JX_SPEC_CAP - len, "%s%s", d ? "," : "",
                            a->n[d] == 0  ? "None"
                            : a->n[d] > 1 ? "("
                                          : "");
    for (int k = 0; k < a->n[d] && len < JX_SPEC_CAP; k++)
      len += (size_t)snprintf(buf + len, JX_SPEC_CAP - len, "%s%s", k ? "," : "",
                              m->name[a->ax[d][k]]);
    if (a->n[d] > 1 && len < JX_SPEC_CAP)
      len += (size_t)snprintf(buf + len, JX_SPEC_CAP - len, ")");
    if (len >= JX_SPEC_CAP) break;
  }
  return buf;
}

int jx_pspec_take(jx_pspec *b, int dd, const jx_pspec *a, int sd, uint32_t *used) {
  uint32_t mine = 0;
  for (int k = 0; k < a->n[sd]; k++) mine |= 1u << a->ax[sd][k];
  if (mine & *used) return 0;
  b->n[dd] = a->n[sd];
  memcpy(b->ax[dd], a->ax[sd], sizeof b->ax[dd]);
  *used |= mine;
  return 1;
}

jx_status jx_plan_replicate_all(jx_plan *pl) {
  const jx_eqn *e = pl->e;
  for (int i = 0; i < e->nin; i++)
    pl->req[i] = jx_pspec_replicated(pl->p->avals[e->in[i]].shape.rank);
  for (int o = 0; o < e->nout; o++)
    pl->prod[o] = jx_pspec_replicated(pl->p->avals[e->out[o]].shape.rank);
  return JX_OK;
}

/* Each primitive's layout rules. An elementwise row (jx_prim.elementwise)
 * without an entry is the elementwise family's; anything else without one
 * is replicated: control flow, convolutions, windows, random bits, ... */
_Static_assert(JX_PRIM_COUNT == 136, "a new primitive: give it its layout family, or none");
static const jx_pfamily *const family[JX_PRIM_COUNT] = {
    [JX_PRIM_sharding_constraint] = &jx_pfamily_constraint,
    [JX_PRIM_select_n] = &jx_pfamily_elementwise,
    [JX_PRIM_clamp] = &jx_pfamily_elementwise,
    [JX_PRIM_broadcast_in_dim] = &jx_pfamily_shape,
    [JX_PRIM_reshape] = &jx_pfamily_shape,
    [JX_PRIM_squeeze] = &jx_pfamily_shape,
    [JX_PRIM_expand_dims] = &jx_pfamily_shape,
    [JX_PRIM_transpose] = &jx_pfamily_shape,
    [JX_PRIM_reduce_sum] = &jx_pfamily_reduce,
    [JX_PRIM_reduce_prod] = &jx_pfamily_reduce,
    [JX_PRIM_reduce_max] = &jx_pfamily_reduce,
    [JX_PRIM_reduce_min] = &jx_pfamily_reduce,
    [JX_PRIM_reduce_and] = &jx_pfamily_reduce,
    [JX_PRIM_reduce_or] = &jx_pfamily_reduce,
    [JX_PRIM_argmax] = &jx_pfamily_reduce,
    [JX_PRIM_argmin] = &jx_pfamily_reduce,
    [JX_PRIM_dot_general] = &jx_pfamily_dot,
    [JX_PRIM_slice] = &jx_pfamily_slicing,
    [JX_PRIM_pad] = &jx_pfamily_slicing,
    [JX_PRIM_dynamic_slice] = &jx_pfamily_slicing,
    [JX_PRIM_dynamic_update_slice] = &jx_pfamily_slicing,
    [JX_PRIM_concatenate] = &jx_pfamily_slicing,
    [JX_PRIM_rev] = &jx_pfamily_slicing,
    [JX_PRIM_cumsum] = &jx_pfamily_slicing,
    [JX_PRIM_cumprod] = &jx_pfamily_slicing,
    [JX_PRIM_cummax] = &jx_pfamily_slicing,
    [JX_PRIM_cummin] = &jx_pfamily_slicing,
    [JX_PRIM_sort] = &jx_pfamily_slicing,
    [JX_PRIM_top_k] = &jx_pfamily_slicing,
    [JX_PRIM_fft] = &jx_pfamily_slicing,
    [JX_PRIM_gather] = &jx_pfamily_gather,
    [JX_PRIM_scatter] = &jx_pfamily_gather,
    [JX_PRIM_scatter_add] = &jx_pfamily_gather,
    [JX_PRIM_scatter_mul] = &jx_pfamily_gather,
    [JX_PRIM_scatter_min] = &jx_pfamily_gather,
    [JX_PRIM_scatter_max] = &jx_pfamily_gather,
    [JX_PRIM_shard_map] = &jx_pfamily_manual,
};

const jx_pfamily *jx_pfamily_of(const jx_eqn *e) {
  if (family[e->prim->id]) return family[e->prim->id];
  return e->prim->elementwise ? &jx_pfamily_elementwise : &jx_pfamily_replicated;
}

/* The fallback: every operand and result whole. */
const jx_pfamily jx_pfamily_replicated = {.name = "replicated", .plan = jx_plan_replicate_all};

/* ---- the driver ---- */
enum { UNKNOWN = 0, KNOWN = 1 };

typedef struct {
  jx_mesh *mesh;
  const jx_program *p;
  jx_pspec *spec;
  uint8_t *known;
  /* scratch, sized for the widest equation */
  jx_pspec *in, *out, *req, *prod;
  uint8_t *in_known, *out_known;
  /* forward sweeps leave wholly replicated partial sums to their readers
   * (a gradient summed over the batch, read by a sharded parameter's
   * update): a sum its readers want split becomes a psum_scatter, not a
   * psum and a slice */
  int defer_partial;
} prop;

static jx_status run_plan(prop *s, const jx_eqn *e, jx_plan *pl) {
  for (int i = 0; i < e->nin; i++) {
    s->in[i] = s->spec[e->in[i]];
    s->in_known[i] = s->known[e->in[i]];
  }
  for (int o = 0; o < e->nout; o++) {
    s->out[o] = s->spec[e->out[o]];
    s->out_known[o] = s->known[e->out[o]];
  }
  *pl = (jx_plan){.mesh = s->mesh,
                  .p = s->p,
                  .e = e,
                  .in = s->in,
                  .in_known = s->in_known,
                  .out = s->out,
                  .out_known = s->out_known,
                  .req = s->req,
                  .prod = s->prod};
  return jx_pfamily_of(e)->plan(pl);
}

/* One sweep; *changed is set when some variable became known. */
static jx_status sweep(prop *s, int backward, int *changed) {
  const jx_program *p = s->p;
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[backward ? p->neqns - 1 - k : k];
    int any_in = 0, any_out = 0, all_in = 1, all_out = 1;
    for (int i = 0; i < e->nin; i++) {
      any_in |= s->known[e->in[i]];
      all_in &= s->known[e->in[i]];
    }
    for (int o = 0; o < e->nout; o++) {
      any_out |= s->known[e->out[o]];
      all_out &= s->known[e->out[o]];
    }
    if (backward ? (all_in || !any_out) : (all_out || (!any_in && e->nin > 0))) continue;
    jx_plan pl;
    jx_status st = run_plan(s, e, &pl);
    if (st) return st;
    if (backward) {
      for (int i = 0; i < e->nin; i++)
        if (!s->known[e->in[i]]) {
          s->spec[e->in[i]] = pl.req[i];
          s->known[e->in[i]] = KNOWN;
          *changed = 1;
        }
    } else if (e->nin > 0 && !(s->defer_partial && pl.npartial && !jx_pspec_sharded(&pl.prod[0]))) {
      /* an op without operands (iota) follows its users */
      for (int o = 0; o < e->nout; o++)
        if (!s->known[e->out[o]]) {
          s->spec[e->out[o]] = pl.prod[o];
          s->known[e->out[o]] = KNOWN;
          *changed = 1;
        }
    }
  }
  return JX_OK;
}

jx_status jx_propagate(jx_mesh *m, const jx_program *p, jx_sharding *const *in,
                       jx_sharding *const *out, jx_pspec *spec) {
  int wide = 1;
  for (int k = 0; k < p->neqns; k++) {
    if (p->eqns[k].nin > wide) wide = p->eqns[k].nin;
    if (p->eqns[k].nout > wide) wide = p->eqns[k].nout;
  }
  prop s = {.mesh = m, .p = p, .spec = spec};
  s.known = calloc((size_t)p->nvars + 1, 1);
  s.in = malloc(sizeof *s.in * (size_t)wide);
  s.out = malloc(sizeof *s.out * (size_t)wide);
  s.req = malloc(sizeof *s.req * (size_t)wide);
  s.prod = malloc(sizeof *s.prod * (size_t)wide);
  s.in_known = malloc((size_t)wide);
  s.out_known = malloc((size_t)wide);
  jx_status st = JX_OK;
  if (!s.known || !s.in || !s.out || !s.req || !s.prod || !s.in_known || !s.out_known)
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory propagating shardings");
  for (int v = 0; v < p->nvars && !st; v++) spec[v] = jx_pspec_replicated(p->avals[v].shape.rank);
  for (int i = 0; i < p->nin && !st; i++)
    if (in[i]) {
      spec[p->in[i]] = jx_pspec_of(in[i], p->avals[p->in[i]].shape.rank);
      s.known[p->in[i]] = KNOWN;
    }
  /* constants are left unknown: replicated values that any layout can slice
   * locally, so their users decide (a broadcast scalar takes its user's
   * layout instead of being built whole and sliced) */
  for (int k = 0; k < p->neqns && !st; k++) /* a constraint pins its result (JX_AUTO's: no) */
    if (p->eqns[k].prim == &jx_prim_sharding_constraint && jx_constraint_sharding(&p->eqns[k])) {
      int v = p->eqns[k].out[0];
      spec[v] = jx_pspec_of(jx_constraint_sharding(&p->eqns[k]), p->avals[v].shape.rank);
      s.known[v] = KNOWN;
    }
  /* out_shardings pin the results that equations compute, as constraints
   * do (a partial sum wanted split then becomes a psum_scatter) */
  for (int o = 0; o < p->nout && !st && out; o++)
    if (out[o] && !s.known[p->out[o]] && jx_program_defines(p, p->out[o])) {
      spec[p->out[o]] = jx_pspec_of(out[o], p->avals[p->out[o]].shape.rank);
      s.known[p->out[o]] = KNOWN;
    }
  /* forward, then backward for what is still unknown; repeat until stable;
   * then once more forward for the partial sums no reader decided */
  s.defer_partial = 1;
  for (int pass = 0; pass < 2 && !st; pass++) {
    for (int round = 0; round < 4 && !st; round++) {
      int changed = 0;
      st = sweep(&s, 0, &changed);
      if (!st) st = sweep(&s, 1, &changed);
      if (!changed) break;
    }
    s.defer_partial = 0;
  }
  /* whatever is left unknown is replicated (spec[] already says so) */
  free(s.known);
  free(s.in);
  free(s.out);
  free(s.req);
  free(s.prod);
  free(s.in_known);
  free(s.out_known);
  return st;
}
