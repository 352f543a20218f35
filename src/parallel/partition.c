/* The partitioner: re-traces the global program equation by equation on
 * tracers of local shapes (as transformations re-trace programs), each
 * equation's operands resharded into the layout its family's plan reads,
 * the op bound with parameters for local blocks, its partial results
 * combined (psum/pmax/pmin, or psum_scatter when the result is wanted split
 * along the reduced axes), and its results resharded into the layouts that
 * propagation chose. */
#include "partition.h"

#include <jx/jx.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../ir/axis_env.h"
#include "../trace/dispatch.h"
#include "../transform/build.h"

/* A collective's row, by name: engineer B's rows register in the parallel
 * family; looked up at run time so this file does not depend on them
 * being linked. */
static const jx_prim *collective(const char *name) {
  const jx_prim *p = jx_prim_lookup(name);
  if (!p)
    jx_error_set(JX_ERR_UNIMPLEMENTED,
                 "jx_jit: this sharding needs the collective '%s', which is not available", name);
  return p;
}

static jx_array *bind_collective(const char *name, jx_mesh *m, jx_array *x, const int *axes, int n,
                                 int64_t i0, int64_t i1) {
  const jx_prim *p = collective(name);
  if (!p) return jx_poison();
  jx_params q = JX_PARAMS_INIT;
  q.l[0].n = n;
  for (int k = 0; k < n; k++) q.l[0].v[k] = jx_axis_id(m->name[axes[k]]);
  q.i[0] = i0;
  q.i[1] = i1;
  return jx_bind1(p, 1, &x, &q);
}

static int dim_same(const jx_pspec *a, const jx_pspec *b, int d) {
  if (a->n[d] != b->n[d]) return 0;
  for (int k = 0; k < a->n[d]; k++)
    if (a->ax[d][k] != b->ax[d][k]) return 0;
  return 1;
}

/* The block index along the axes of dim d of s (row-major, major first),
 * as an i32 scalar. */
static jx_array *block_index(jx_mesh *m, const jx_pspec *s, int d) {
  jx_array *idx = NULL;
  for (int k = 0; k < s->n[d]; k++) {
    int a = s->ax[d][k];
    jx_array *i = jx_axis_index(m->name[a]);
    idx = idx ? jx_add(jx_mul(idx, jx_scalar(JX_I32, (double)m->size[a])), i) : i;
  }
  return idx;
}

jx_array *jx_reshard(jx_mesh *m, jx_array *x, const jx_pspec *from, const jx_pspec *to) {
  if (jx_pspec_equal(from, to) || x->poisoned) return x;
  jx_pspec cur = *from;
  int r = from->rank;
  /* dim a split over S becoming whole while dim b becomes split over S: one
   * all_to_all (split b, concatenate a) */
  for (int a = 0; a < r; a++) {
    if (!cur.n[a] || dim_same(&cur, to, a) || to->n[a]) continue;
    for (int b = 0; b < r; b++) {
      if (b == a || cur.n[b] || to->n[b] != cur.n[a]) continue;
      if (memcmp(to->ax[b], cur.ax[a], (size_t)cur.n[a]) != 0) continue;
      if (x->shape.dims[b] % jx_pspec_parts(m, &cur, a) != 0) continue;
      int axes[JX_MAX_RANK];
      for (int k = 0; k < cur.n[a]; k++) axes[k] = cur.ax[a][k];
      x = bind_collective("all_to_all", m, x, axes, cur.n[a], b, a);
      cur.n[b] = cur.n[a];
      memcpy(cur.ax[b], cur.ax[a], sizeof cur.ax[b]);
      cur.n[a] = 0;
      break;
    }
  }
  /* splits that go away: gathered */
  for (int d = 0; d < r; d++) {
    if (!cur.n[d] || dim_same(&cur, to, d)) continue;
    int axes[JX_MAX_RANK];
    for (int k = 0; k < cur.n[d]; k++) axes[k] = cur.ax[d][k];
    x = bind_collective("all_gather", m, x, axes, cur.n[d], d, 1);
    cur.n[d] = 0;
  }
  /* splits that appear: each device slices its own block, no communication */
  int slice = 0;
  jx_array *in[1 + JX_MAX_RANK] = {x};
  jx_params q = JX_PARAMS_INIT;
  q.l[0].n = r;
  for (int d = 0; d < r; d++) {
    q.l[0].v[d] = x->shape.dims[d];
    in[1 + d] = jx_zeros(JX_I32, (jx_shape){0, {0}});
    if (!to->n[d] || cur.n[d]) continue;
    q.l[0].v[d] = x->shape.dims[d] / jx_pspec_parts(m, to, d);
    in[1 + d] = jx_mul(block_index(m, to, d), jx_scalar(JX_I32, (double)q.l[0].v[d]));
    slice = 1;
  }
  /* the row itself: starts are in range, nothing to wrap */
  if (slice) x = jx_bind1(&jx_prim_dynamic_slice, 1 + r, in, &q);
  return x;
}

/* The local op's partial results combined; psum_scatter when the wanted
 * layout splits one whole dim over exactly the partial axes. */
static jx_array *combine(jx_mesh *m, const jx_plan *pl, jx_array *y, jx_pspec *prod,
                         const jx_pspec *want) {
  if (pl->partial == JX_PARTIAL_SUM) {
    for (int d = 0; d < prod->rank; d++) {
      if (prod->n[d] || want->n[d] != pl->npartial) continue;
      int same = 1;
      for (int k = 0; k < pl->npartial; k++) same &= want->ax[d][k] == pl->partial_axes[k];
      for (int e = 0; e < prod->rank && same; e++)
        if (e != d && !dim_same(prod, want, e)) same = 0;
      if (!same || y->shape.dims[d] % jx_pspec_parts(m, want, d) != 0) continue;
      prod->n[d] = want->n[d];
      memcpy(prod->ax[d], want->ax[d], sizeof prod->ax[d]);
      return bind_collective("psum_scatter", m, y, pl->partial_axes, pl->npartial, d, 1);
    }
    return bind_collective("psum", m, y, pl->partial_axes, pl->npartial, 0, 0);
  }
  const char *name = pl->partial == JX_PARTIAL_MAX ? "pmax" : "pmin";
  return bind_collective(name, m, y, pl->partial_axes, pl->npartial, 0, 0);
}

typedef struct {
  jx_mesh *mesh;
  const jx_program *p;
  const jx_pspec *spec;
  const jx_pspec *out_spec;
} part_ctx;

enum { SMALL = 16 };

static jx_status partition_eqn(part_ctx *c, const jx_eqn *e, jx_array **env) {
  const jx_program *p = c->p;
  int n = e->nin > e->nout ? e->nin : e->nout;
  jx_pspec *in = malloc(sizeof *in * (size_t)(4 * n + 1));
  jx_array **ins = malloc(sizeof *ins * (size_t)(2 * n + 1));
  jx_aval *av = malloc(sizeof *av * (size_t)(2 * n + 1));
  uint8_t *known = malloc((size_t)n + 1);
  if (!in || !ins || !av || !known) {
    free(in);
    free(ins);
    free(av);
    free(known);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory partitioning");
  }
  jx_pspec *out = in + n, *req = in + 2 * n, *prod = in + 3 * n;
  jx_array **outs = ins + n;
  memset(known, 1, (size_t)n);
  for (int i = 0; i < e->nin; i++) in[i] = c->spec[e->in[i]];
  for (int o = 0; o < e->nout; o++) out[o] = c->spec[e->out[o]];
  jx_plan pl = {.mesh = c->mesh,
                .p = p,
                .e = e,
                .in = in,
                .in_known = known,
                .out = out,
                .out_known = known,
                .req = req,
                .prod = prod};
  const jx_pfamily *fam = jx_pfamily_of(e);
  jx_status st = fam->plan(&pl);
  for (int i = 0; i < e->nin && !st; i++) {
    ins[i] = jx_reshard(c->mesh, env[e->in[i]], &in[i], &req[i]);
    if (ins[i]->poisoned) st = jx_last_status();
  }
  if (!st && fam->identity) {
    for (int o = 0; o < e->nout; o++) outs[o] = ins[o];
  } else if (!st && fam->local_apply) {
    st = fam->local_apply(&pl, ins, outs);
  } else if (!st) {
    jx_params q = e->params;
    if (fam->local_params) {
      for (int i = 0; i < e->nin; i++)
        av[i] = (jx_aval){ins[i]->dtype, ins[i]->weak, ins[i]->shape, 0};
      for (int o = 0; o < e->nout; o++) {
        jx_aval g = p->avals[e->out[o]];
        av[n + o] = (jx_aval){g.dtype, g.weak, jx_pspec_local(c->mesh, &prod[o], g.shape), 0};
      }
      fam->local_params(&pl, av, av + n, &q);
    }
    st = jx_bind_sub(e->prim, e->nin, ins, &q, e->nsub, e->sub, outs);
    if (!st && pl.npartial) {
      outs[0] = combine(c->mesh, &pl, outs[0], &prod[0], &out[0]);
      if (outs[0]->poisoned) st = jx_last_status();
    }
  }
  for (int o = 0; o < e->nout && !st; o++) {
    env[e->out[o]] = jx_reshard(c->mesh, outs[o], &prod[o], &out[o]);
    if (env[e->out[o]]->poisoned) st = jx_last_status();
  }
  free(in);
  free(ins);
  free(av);
  free(known);
  return st;
}

static jx_status partition_body(void *ctx, jx_array *const *in, jx_array **out) {
  part_ctx *c = ctx;
  const jx_program *p = c->p;
  jx_array **env = calloc((size_t)p->nvars + 1, sizeof *env);
  if (!env) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory partitioning");
  for (int i = 0; i < p->nin; i++) env[p->in[i]] = in[i];
  jx_status st = JX_OK;
  for (int k = 0; k < p->nconst && !st; k++) { /* whole values: each device slices its block */
    int v = p->constvar[k];
    jx_pspec whole = jx_pspec_replicated(p->avals[v].shape.rank);
    env[v] = jx_reshard(c->mesh, p->constval[k], &whole, &c->spec[v]);
    if (env[v]->poisoned) st = jx_last_status();
  }
  for (int k = 0; k < p->neqns && !st; k++) st = partition_eqn(c, &p->eqns[k], env);
  for (int o = 0; o < p->nout && !st; o++) {
    out[o] = jx_reshard(c->mesh, env[p->out[o]], &c->spec[p->out[o]], &c->out_spec[o]);
    if (out[o]->poisoned) st = jx_last_status();
  }
  free(env);
  return st;
}

jx_program *jx_partition(jx_mesh *m, const jx_program *p, const jx_pspec *spec,
                         const jx_pspec *out_spec) {
  jx_aval *av = malloc(sizeof *av * (size_t)(p->nin + 1));
  if (!av) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory partitioning");
    return NULL;
  }
  for (int i = 0; i < p->nin; i++) {
    jx_aval g = p->avals[p->in[i]];
    av[i] = (jx_aval){g.dtype, g.weak, jx_pspec_local(m, &spec[p->in[i]], g.shape), 0};
  }
  int pushed = 0;
  jx_status st = JX_OK;
  for (; pushed < m->ndim && !st; pushed++) st = jx_axis_push(m->name[pushed], m->size[pushed]);
  if (st) pushed--;
  part_ctx c = {m, p, spec, out_spec};
  jx_program *d = st ? NULL : jx_program_build(p->name, p->nin, av, p->nout, partition_body, &c);
  for (int k = 0; k < pushed; k++) jx_axis_pop();
  free(av);
  return d;
}
