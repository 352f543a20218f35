/* Per-equation strategies (strategies.h): the family plans asked with
 * every candidate layout, deduplicated and priced. */
#include "strategies.h"

#include <stdlib.h>
#include <string.h>

#include "../../base/error.h"
#include "../../compile/cost.h"
#include "../../prims/prims.h"
#include "machine_model.h"

/* ---- candidate layouts ---- */

typedef struct {
  const jx_mesh *m;
  jx_shape g;
  int axes[JX_MAX_RANK], naxes; /* the mesh axes of more than one device */
  int dim_of[JX_MAX_RANK];      /* per such axis: the dim it splits, -1 none */
  jx_pspec *out;
  int cap, count;
} enumeration;

static void emit(enumeration *en) {
  jx_pspec a = jx_pspec_replicated(en->g.rank);
  for (int k = 0; k < en->naxes; k++) /* mesh order: major first */
    if (en->dim_of[k] >= 0) {
      int d = en->dim_of[k];
      a.ax[d][a.n[d]++] = (int8_t)en->axes[k];
    }
  if (!jx_pspec_fits(en->m, &a, en->g)) return;
  if (en->count < en->cap) en->out[en->count] = a;
  en->count++;
}

static void assign(enumeration *en, int k) {
  if (k == en->naxes) {
    emit(en);
    return;
  }
  for (int d = -1; d < en->g.rank; d++) { /* -1 first: the replicated layout leads */
    en->dim_of[k] = d;
    assign(en, k + 1);
  }
}

int jx_layout_candidates(const jx_mesh *m, jx_shape g, jx_pspec *out, int cap) {
  enumeration en = {.m = m, .g = g, .out = out, .cap = cap};
  for (int a = 0; a < m->ndim; a++)
    if (m->size[a] > 1) en.axes[en.naxes++] = a;
  assign(&en, 0);
  return en.count;
}

/* ---- resharding ---- */

static double local_bytes(const jx_mesh *m, jx_aval a, const jx_pspec *s) {
  a.shape = jx_pspec_local(m, s, a.shape);
  return jx_aval_bytes(a);
}

static uint32_t dim_mask(const jx_pspec *s, int d) {
  uint32_t mask = 0;
  for (int k = 0; k < s->n[d]; k++) mask |= 1u << s->ax[d][k];
  return mask;
}

static int dim_same(const jx_pspec *a, const jx_pspec *b, int d) {
  return a->n[d] == b->n[d] && memcmp(a->ax[d], b->ax[d], (size_t)a->n[d]) == 0;
}

/* The steps of jx_reshard (partition.c), priced instead of bound. */
double jx_reshard_time(const jx_comm_model *cm, const jx_mesh *m, jx_aval a, const jx_pspec *from,
                       const jx_pspec *to) {
  jx_pspec cur = *from;
  int r = from->rank;
  double t = 0;
  for (int d = 0; d < r; d++) { /* a split moving from dim d to dim b: one all_to_all */
    if (!cur.n[d] || dim_same(&cur, to, d) || to->n[d]) continue;
    for (int b = 0; b < r; b++) {
      if (b == d || cur.n[b] || to->n[b] != cur.n[d]) continue;
      if (memcmp(to->ax[b], cur.ax[d], (size_t)cur.n[d]) != 0) continue;
      if (a.shape.dims[b] % jx_pspec_parts(m, &cur, d) != 0) continue;
      t += jx_comm_model_time(cm, JX_COLL_ALL_TO_ALL, dim_mask(&cur, d), local_bytes(m, a, &cur));
      cur.n[b] = cur.n[d];
      memcpy(cur.ax[b], cur.ax[d], sizeof cur.ax[b]);
      cur.n[d] = 0;
      break;
    }
  }
  for (int d = 0; d < r; d++) { /* splits given up: gathered */
    if (!cur.n[d] || dim_same(&cur, to, d)) continue;
    uint32_t mask = dim_mask(&cur, d);
    cur.n[d] = 0;
    t += jx_comm_model_time(cm, JX_COLL_ALL_GATHER, mask, local_bytes(m, a, &cur));
  }
  return t;
}

/* ---- strategies ---- */

typedef struct {
  const jx_comm_model *cm;
  jx_mesh *m;
  const jx_program *p;
  const jx_eqn *e;
  jx_pspec *in, *out, *req, *prod;
  uint8_t *in_known, *out_known;
  jx_eqn_strategies *res;
  int cap;
} builder;

static int same_strategy(const builder *b, const jx_strategy *s, uint32_t partial) {
  if (s->partial_axes != partial) return 0;
  for (int i = 0; i < b->e->nin; i++)
    if (!jx_pspec_equal(&s->req[i], &b->req[i])) return 0;
  for (int o = 0; o < b->e->nout; o++)
    if (!jx_pspec_equal(&s->prod[o], &b->prod[o])) return 0;
  return 1;
}

/* One device's share of the work: the smallest share of any operand or
 * result it holds (a contraction split over its contracting dim holds
 * 1/n of each operand and computes 1/n of the products, though its
 * partial result is whole). */
static double work_share(const jx_mesh *m, const jx_program *p, const jx_eqn *e,
                         const jx_pspec *req, const jx_pspec *prod) {
  double share = 1;
  for (int k = 0; k < e->nin + e->nout; k++) {
    int in = k < e->nin;
    jx_shape g = p->avals[in ? e->in[k] : e->out[k - e->nin]].shape;
    const jx_pspec *s = in ? &req[k] : &prod[k - e->nin];
    double whole = (double)jx_shape_numel(g);
    if (whole > 0) {
      double part = (double)jx_shape_numel(jx_pspec_local(m, s, g)) / whole;
      if (part < share) share = part;
    }
  }
  return share;
}

/* Seconds of e's compute on one device at the estimate's roofline
 * (machine_model.h's jx_roofline_time): its share of the flops, and the
 * bytes of its operands and results in their local layouts. A new shape of
 * the same bytes costs nothing, as in the estimate. */
static double eqn_compute_time(const jx_comm_model *cm, const jx_mesh *m, const jx_program *p,
                               const jx_eqn *e, const jx_pspec *req, const jx_pspec *prod,
                               double share) {
  if (e->prim == &jx_prim_reshape || e->prim == &jx_prim_squeeze || e->prim == &jx_prim_expand_dims)
    return 0;
  double bytes = 0;
  for (int i = 0; i < e->nin; i++) bytes += local_bytes(m, p->avals[e->in[i]], &req[i]);
  for (int o = 0; o < e->nout; o++) bytes += local_bytes(m, p->avals[e->out[o]], &prod[o]);
  return jx_roofline_time(cm, jx_eqn_flops(p, e) * share, bytes);
}

double jx_eqn_local_time(const jx_comm_model *cm, jx_mesh *m, const jx_program *p, const jx_eqn *e,
                         const jx_pspec *req, const jx_pspec *prod, uint32_t partial,
                         double *flops) {
  double share = work_share(m, p, e, req, prod);
  *flops = jx_eqn_flops(p, e) * share;
  double t = eqn_compute_time(cm, m, p, e, req, prod, share);
  for (int o = 0; o < e->nout && partial; o++)
    t += jx_comm_model_time(cm, JX_COLL_ALL_REDUCE, partial,
                            local_bytes(m, p->avals[e->out[o]], &prod[o]));
  return t;
}

/* Asks the family's plan with the layouts marked known; keeps a new,
 * fitting answer. */
static jx_status try_plan(builder *b) {
  const jx_eqn *e = b->e;
  jx_plan pl = {.mesh = b->m,
                .p = b->p,
                .e = e,
                .in = b->in,
                .in_known = b->in_known,
                .out = b->out,
                .out_known = b->out_known,
                .req = b->req,
                .prod = b->prod};
  if (jx_pfamily_of(e)->plan(&pl)) { /* a layout this op cannot take: not a strategy */
    jx_clear_error();
    return JX_OK;
  }
  for (int i = 0; i < e->nin; i++)
    if (!jx_pspec_fits(b->m, &b->req[i], b->p->avals[e->in[i]].shape)) return JX_OK;
  for (int o = 0; o < e->nout; o++)
    if (!jx_pspec_fits(b->m, &b->prod[o], b->p->avals[e->out[o]].shape)) return JX_OK;
  uint32_t partial = 0;
  for (int k = 0; k < pl.npartial; k++) partial |= 1u << pl.partial_axes[k];
  jx_eqn_strategies *r = b->res;
  for (int k = 0; k < r->n; k++)
    if (same_strategy(b, &r->s[k], partial)) return JX_OK;
  if (r->n == b->cap) {
    int cap = b->cap ? 2 * b->cap : 16;
    jx_strategy *grown = realloc(r->s, sizeof *grown * (size_t)cap);
    if (!grown) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_eqn_strategies: out of memory");
    r->s = grown;
    b->cap = cap;
  }
  jx_strategy *s = &r->s[r->n];
  memset(s, 0, sizeof *s);
  s->req = malloc(sizeof *s->req * (size_t)(e->nin + e->nout + 1));
  if (!s->req) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_eqn_strategies: out of memory");
  r->n++;
  s->prod = s->req + e->nin;
  memcpy(s->req, b->req, sizeof *s->req * (size_t)e->nin);
  memcpy(s->prod, b->prod, sizeof *s->prod * (size_t)e->nout);
  s->partial_axes = partial;
  double total = jx_eqn_local_time(b->cm, b->m, b->p, e, s->req, s->prod, partial, &s->flops);
  s->compute_s = eqn_compute_time(b->cm, b->m, b->p, e, s->req, s->prod,
                                  work_share(b->m, b->p, e, s->req, s->prod));
  s->comm_s = total - s->compute_s;
  return JX_OK;
}

/* The candidate layouts of variable v (a new array, *n of them). */
static jx_pspec *candidates(const builder *b, int v, int *n) {
  jx_shape g = b->p->avals[v].shape;
  *n = jx_layout_candidates(b->m, g, NULL, 0);
  jx_pspec *c = malloc(sizeof *c * (size_t)*n);
  if (!c) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_eqn_strategies: out of memory");
    return NULL;
  }
  jx_layout_candidates(b->m, g, c, *n);
  return c;
}

static void forget_all(builder *b) {
  memset(b->in_known, 0, (size_t)b->e->nin + 1);
  memset(b->out_known, 0, (size_t)b->e->nout + 1);
}

jx_status jx_eqn_strategies_make(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                 const jx_eqn *e, jx_eqn_strategies *out) {
  memset(out, 0, sizeof *out);
  out->e = e;
  if (cm->naxes != m->ndim)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_eqn_strategies: the model has %d mesh axes, the mesh %d", cm->naxes,
                        m->ndim);
  int nin = e->nin, nout = e->nout;
  builder b = {.cm = cm, .m = m, .p = p, .e = e, .res = out};
  b.in = calloc((size_t)nin + 1, sizeof *b.in);
  b.req = calloc((size_t)nin + 1, sizeof *b.req);
  b.out = calloc((size_t)nout + 1, sizeof *b.out);
  b.prod = calloc((size_t)nout + 1, sizeof *b.prod);
  b.in_known = calloc((size_t)nin + 1, 1);
  b.out_known = calloc((size_t)nout + 1, 1);
  jx_pspec **cand = calloc((size_t)(nin + nout) + 1, sizeof *cand);
  int *ncand = calloc((size_t)(nin + nout) + 1, sizeof *ncand);
  jx_status st = JX_OK;
  if (!b.in || !b.req || !b.out || !b.prod || !b.in_known || !b.out_known || !cand || !ncand)
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_eqn_strategies: out of memory");
  for (int k = 0; k < nin + nout && !st; k++) {
    cand[k] = candidates(&b, k < nin ? e->in[k] : e->out[k - nin], &ncand[k]);
    if (!cand[k]) st = jx_last_status();
  }
  for (int i = 0; i < nin && !st; i++) b.in[i] = cand[i][0];
  for (int o = 0; o < nout && !st; o++) b.out[o] = cand[nin + o][0];
  /* nothing known first: with every layout unknown the plans give the
   * replicated strategy (s[0]) */
  if (!st) st = try_plan(&b);
  for (int i = 0; i < nin && !st; i++) /* one operand known */
    for (int c = 0; c < ncand[i] && !st; c++) {
      forget_all(&b);
      b.in[i] = cand[i][c];
      b.in_known[i] = 1;
      st = try_plan(&b);
    }
  for (int i = 0; i < nin && !st; i++) /* two operands known */
    for (int j = i + 1; j < nin && !st; j++)
      for (int c = 0; c < ncand[i] && !st; c++)
        for (int d = 0; d < ncand[j] && !st; d++) {
          forget_all(&b);
          b.in[i] = cand[i][c];
          b.in[j] = cand[j][d];
          b.in_known[i] = b.in_known[j] = 1;
          st = try_plan(&b);
        }
  for (int o = 0; o < nout && !st; o++) /* one result wanted */
    for (int c = 0; c < ncand[nin + o] && !st; c++) {
      forget_all(&b);
      for (int i = 0; i < nin; i++) b.in[i] = cand[i][0];
      b.out[o] = cand[nin + o][c];
      b.out_known[o] = 1;
      st = try_plan(&b);
    }
  for (int k = 0; k < nin + nout && cand; k++) free(cand[k]);
  free(cand);
  free(ncand);
  free(b.in);
  free(b.req);
  free(b.out);
  free(b.prod);
  free(b.in_known);
  free(b.out_known);
  if (st) jx_eqn_strategies_free(out);
  return st;
}

void jx_eqn_strategies_free(jx_eqn_strategies *s) {
  for (int k = 0; k < s->n; k++) free(s->s[k].req);
  free(s->s);
  s->s = NULL;
  s->n = 0;
}
