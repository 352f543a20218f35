/* The planner's integer linear program (plan.h), built as triplets and
 * handed to GLPK's branch and cut. */
#include "plan.h"

#include <float.h>
#include <math.h>
#include <limits.h>
#include <glpk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/env.h"
#include "../../base/error.h"
#include "../../base/hash.h"
#include "../../compile/cost.h"
#include "../../compile/simplify.h"
#include "../../prims/prims.h"
#include "../partition.h"
#include "ties.h"

/* Times go to the solver in microseconds, so its tolerances see figures
 * near one rather than near 1e-6. */
#define US 1e6
/* The tie-breaker: every array's bytes, summed, join the objective at a
 * thousandth of the time a byte takes over the fastest link of the mesh,
 * so that of plans equally fast the one holding least wins (an input its
 * readers slice locally anyway then arrives split) in the same solve,
 * and memory is never bought with more time than a thousandth of sending
 * it. */
#define MEMORY_PER_LINK_BYTE 1e-3

/* Microseconds per byte held: the tie-breaker's weight for cm on m. */
static double memory_weight(const jx_comm_model *cm, const jx_mesh *m) {
  double fastest = 0;
  for (int a = 0; a < m->ndim; a++) {
    double beta = cm->link[a].beta[JX_COLL_ALL_REDUCE].s_per_byte;
    if (m->size[a] > 1 && beta > 0 && (!fastest || beta < fastest)) fastest = beta;
  }
  return MEMORY_PER_LINK_BYTE * fastest * US;
}

typedef struct {
  glp_prob *lp;
  int *ia, *ja;
  double *ar;
  int nnz, cap;
} model_builder;

/* The planner's out-of-memory error. */
static jx_status out_of_memory(void) {
  return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_plan: out of memory");
}

/* Reallocates the array whose pointer is at pp (any object pointer type) to
 * bytes: 1 when it did; 0 leaves the old array in place. The planner's
 * scratch grows several parallel arrays together, each through this. */
static int grow(void *pp, size_t bytes) {
  void *old, *grown;
  memcpy(&old, pp, sizeof old);
  if (!(grown = realloc(old, bytes))) return 0;
  memcpy(pp, &grown, sizeof grown);
  return 1;
}

static jx_status entry(model_builder *b, int row, int col, double v) {
  if (b->nnz + 1 >= b->cap) {
    int cap = b->cap ? 2 * b->cap : 1024;
    if (!grow(&b->ia, sizeof *b->ia * (size_t)cap) || !grow(&b->ja, sizeof *b->ja * (size_t)cap) ||
        !grow(&b->ar, sizeof *b->ar * (size_t)cap))
      return out_of_memory();
    b->cap = cap;
  }
  b->nnz++; /* GLPK counts from 1 */
  b->ia[b->nnz] = row;
  b->ja[b->nnz] = col;
  b->ar[b->nnz] = v;
  return JX_OK;
}

/* Which choice group decides each variable's layout (an input's candidates,
 * an equation's strategies, or the group a following equation follows:
 * first column, count) and the layout it has under each of the group's
 * columns. */
typedef struct {
  int first_col, count; /* 0 count: a constant, free */
  int eqn;              /* the equation making it, -1: an input */
  jx_pspec *layout;     /* count entries */
} producer;

/* An edge's pair columns, which another edge between the same two groups,
 * with the same classes of layouts on each side, shares: tied layers'
 * edges add their costs to the same columns. */
typedef struct {
  int pcol, pn, rcol, rn; /* the two groups: first column, count */
  int np, nr, col;        /* the classes and the first pair column */
  int *cls;               /* pn producer classes then rn reader classes */
  uint64_t key;
  int next; /* in the bucket's chain, -1: the last */
} shared_edge;

#define EDGE_BUCKETS 4096

typedef struct {
  const jx_comm_model *cm;
  jx_mesh *m;
  const jx_program *p;
  jx_eqn_strategies *st; /* per equation */
  int *eqn_rep, *in_rep; /* ties.h: the equation or input whose columns each shares */
  jx_pspec **cand;       /* per input: its candidate layouts */
  int *ncand;
  producer *def;    /* per variable */
  int *eqn_col;     /* per equation: the first column of its strategies, -1 when it follows */
  int mem_row;      /* every variable's bytes summed: the tie-breaker's measure */
  double *mem_coef; /* per column: its entry in the memory row (summed as built) */
  int mem_cap;
  /* liveness: a variable is held from the equation that makes it (-1: an
   * input, held by the caller throughout) to its last reader (p->neqns: an
   * output) */
  int *made_at, *last_use;
  double limit;
  double *coef; /* scratch per column, for a peak row */
  int *cols;
  double *scratch;       /* per equation, twice: peak_held's */
  int *peak_rows, npeak; /* the rows added for the limit */
  uint8_t *has_row;      /* per equation: whether it has a peak row */
  /* the planning time limit (JX_PLAN_TIME_LIMIT): when the search began (glp_time, ms),
   * its seconds, and whether the plan kept is the best found when they ran
   * out; the last solve's gap (solve's) */
  double started, time_limit_s, gap;
  int stopped;
  /* of the plans over the limit found: the smallest peak, its equation and
   * what is held there (-1: none found) */
  double found_peak;
  int found_at;
  char found_held[1024];
  /* the current solution's partitioned peak, when plan_peak costed it
   * (partitioned_peak's result, -1 included); NAN: not costed */
  double solution_peak;
  /* scratch for an edge: each side's distinct layouts, each column's
   * class among them, the pair costs; and a follower's per-column layouts */
  jx_pspec *p_rep, *r_rep, *req, *prod, *in, *out;
  uint8_t *in_known, *out_known;
  int *p_cls, *r_cls;
  double *cost;
  int scratch_cap, wide_cap;
  shared_edge *edges; /* the edges with pair columns, found by their groups */
  int nedges, edges_cap, *edge_bucket;
  /* what the partitioned program holds beyond the arrays' blocks in their
   * layouts: the copy an operand is relaid into when a reader takes it in
   * another layout, and the summed copy of a result partial over mesh axes
   * (its all_reduce's output beside its input, held while its equation
   * runs); each a term: bytes held from equation term_from to term_to when
   * column term_col is chosen. A relaid copy is one array for all the
   * readers taking that layout (the program's common subexpression, made
   * for the first and kept for the last: a weight gathered for the forward
   * product and again for the backward one), so each reader's copy is held
   * from the operand's reader before it: with every reader in one layout
   * the terms cover the copy's life once */
  int *term_from, *term_to, *term_col, nterms, terms_cap;
  double *term_bytes;
  int *read_before; /* per variable: its last reader built so far, -1 none */
  const int *alias; /* per output: the input whose layout it is given back in, -1 none (NULL) */
} problem;

static const jx_pspec *produced(const problem *pb, const producer *d, int k) {
  (void)pb;
  return &d->layout[k];
}

static double block_bytes(const problem *pb, int v, const jx_pspec *s) {
  jx_aval a = pb->p->avals[v];
  a.shape = jx_pspec_local(pb->m, s, a.shape);
  return jx_aval_bytes(a);
}

/* When each variable is made and last read. */
static void liveness(problem *pb) {
  const jx_program *p = pb->p;
  for (int v = 0; v < p->nvars; v++) pb->made_at[v] = pb->last_use[v] = pb->read_before[v] = -1;
  for (int e = 0; e < p->neqns; e++) {
    for (int o = 0; o < p->eqns[e].nout; o++)
      pb->made_at[p->eqns[e].out[o]] = pb->last_use[p->eqns[e].out[o]] = e;
    for (int i = 0; i < p->eqns[e].nin; i++) pb->last_use[p->eqns[e].in[i]] = e;
  }
  for (int i = 0; i < p->nin; i++) pb->last_use[p->in[i]] = p->neqns;
  for (int o = 0; o < p->nout; o++) pb->last_use[p->out[o]] = p->neqns;
}

static int held_at(const problem *pb, int v, int t) {
  return pb->def[v].count && pb->made_at[v] <= t && pb->last_use[v] >= t;
}

/* The most bytes per device held while any equation runs, for the layouts
 * the solution chose; *at gets that equation. made (p->neqns + 1 entries)
 * is scratch. */
static double peak_held(const problem *pb, glp_prob *lp, double *made, int *at) {
  const jx_program *p = pb->p;
  double *freed = made + p->neqns + 1, base = 0;
  memset(made, 0, sizeof *made * 2 * (size_t)(p->neqns + 1));
  for (int v = 0; v < p->nvars; v++) {
    const producer *d = &pb->def[v];
    double b = 0;
    for (int k = 0; k < d->count && !b; k++)
      if (glp_mip_col_val(lp, d->first_col + k) > 0.5) b = block_bytes(pb, v, produced(pb, d, k));
    if (!b) continue;
    if (pb->made_at[v] < 0)
      base += b;
    else {
      made[pb->made_at[v]] += b;
      freed[pb->last_use[v]] += b;
    }
  }
  for (int k = 0; k < pb->nterms; k++)
    if (glp_mip_col_val(lp, pb->term_col[k]) > 0.5) {
      made[pb->term_from[k]] += pb->term_bytes[k];
      freed[pb->term_to[k]] += pb->term_bytes[k];
    }
  double live = base, peak = base;
  *at = 0;
  for (int u = 0; u < p->neqns; u++) {
    live += made[u];
    if (live > peak) {
      peak = live;
      *at = u;
    }
    live -= freed[u];
  }
  return peak;
}

/* Under a limit of GiBs the peak rows count bytes in MiB: a cluster's
 * 1e10-byte arrays beside the choice rows' ones left the simplex
 * ill-conditioned (GLPK's primal simplex failed an assertion on a
 * 512-device plan); in bytes below. */
#define ROW_BYTES (pb->limit > 1073741824.0 ? 1048576.0 : 1.0)

/* A row bounding the bytes held while equation t runs: by the limit, or
 * (z_col > 0) by the peak column z_col (in ROW_BYTES). */
static void add_peak_row(problem *pb, glp_prob *lp, int t, int z_col) {
  const jx_program *p = pb->p;
  int n = 0;
  for (int v = 0; v < p->nvars; v++) {
    if (!held_at(pb, v, t)) continue;
    const producer *d = &pb->def[v];
    for (int k = 0; k < d->count; k++) {
      int c = d->first_col + k;
      if (pb->coef[c] == 0) pb->cols[++n] = c;
      pb->coef[c] += block_bytes(pb, v, produced(pb, d, k));
    }
  }
  for (int k = 0; k < pb->nterms; k++) {
    if (pb->term_from[k] > t || pb->term_to[k] < t) continue;
    int c = pb->term_col[k];
    if (pb->coef[c] == 0) pb->cols[++n] = c;
    pb->coef[c] += pb->term_bytes[k];
  }
  double *val = pb->coef + glp_get_num_cols(lp) + 1; /* scratch past the columns */
  for (int j = 1; j <= n; j++) {
    val[j] = pb->coef[pb->cols[j]] / ROW_BYTES;
    pb->coef[pb->cols[j]] = 0;
  }
  if (z_col) {
    pb->cols[++n] = z_col;
    val[n] = -1;
  }
  int row = glp_add_rows(lp, 1);
  glp_set_mat_row(lp, row, n, pb->cols, val);
  glp_set_row_bnds(lp, row, GLP_UP, 0, z_col ? 0 : pb->limit / ROW_BYTES);
  pb->peak_rows[pb->npeak++] = row;
  pb->has_row[t] = 1;
}

/* Room for groups of n columns in the edge scratch. */
static jx_status edge_room(problem *pb, int n) {
  if (n <= pb->scratch_cap) return JX_OK;
  int cap = n < 64 ? 64 : 2 * n;
  if (!grow(&pb->p_rep, sizeof *pb->p_rep * (size_t)cap) ||
      !grow(&pb->r_rep, sizeof *pb->r_rep * (size_t)cap) ||
      !grow(&pb->p_cls, sizeof *pb->p_cls * (size_t)cap) ||
      !grow(&pb->r_cls, sizeof *pb->r_cls * (size_t)cap) ||
      !grow(&pb->cost, sizeof *pb->cost * (size_t)cap * (size_t)cap))
    return out_of_memory();
  pb->scratch_cap = cap;
  return JX_OK;
}

/* Adds t microseconds to column c's objective. */
static void add_cost(glp_prob *lp, int c, double t) {
  if (t != 0) glp_set_obj_coef(lp, c, glp_get_obj_coef(lp, c) + t);
}

/* Adds bytes to column c's entry in the memory row. */
static jx_status add_memory(problem *pb, int c, double bytes) {
  if (c >= pb->mem_cap) {
    int cap = 2 * c + 1024;
    double *m = realloc(pb->mem_coef, sizeof *m * (size_t)cap);
    if (!m) return out_of_memory();
    memset(m + pb->mem_cap, 0, sizeof *m * (size_t)(cap - pb->mem_cap));
    pb->mem_coef = m;
    pb->mem_cap = cap;
  }
  pb->mem_coef[c] += bytes;
  return JX_OK;
}

/* The partitioned program holds bytes more from equation `from` to `to`
 * when column c is chosen. */
static jx_status add_term(problem *pb, int from, int to, int c, double bytes) {
  if (bytes <= 0) return JX_OK;
  if (pb->nterms == pb->terms_cap) {
    int cap = pb->terms_cap ? 2 * pb->terms_cap : 1024;
    if (!grow(&pb->term_from, sizeof *pb->term_from * (size_t)cap) ||
        !grow(&pb->term_to, sizeof *pb->term_to * (size_t)cap) ||
        !grow(&pb->term_col, sizeof *pb->term_col * (size_t)cap) ||
        !grow(&pb->term_bytes, sizeof *pb->term_bytes * (size_t)cap))
      return out_of_memory();
    pb->terms_cap = cap;
  }
  pb->term_from[pb->nterms] = from;
  pb->term_to[pb->nterms] = to;
  pb->term_col[pb->nterms] = c;
  pb->term_bytes[pb->nterms++] = bytes;
  return JX_OK;
}

/* Whether v is a scalar's broadcast (free to lay out: no group of its
 * own, but an array its readers hold). */
static int is_scalar_broadcast(const problem *pb, int v) {
  int e = pb->made_at[v];
  const jx_eqn *q = e >= 0 ? &pb->p->eqns[e] : NULL;
  return q && q->prim == &jx_prim_broadcast_in_dim && q->nin == 1 &&
         pb->p->avals[q->in[0]].shape.rank == 0;
}

/* A copy of v relaid for reader t under column c: held since v's reader
 * before t (problem's terms). */
static jx_status copy_term(problem *pb, int t, int v, int c, const jx_pspec *layout) {
  int from = pb->read_before[v] >= 0 ? pb->read_before[v] : t;
  return add_term(pb, from, t, c, block_bytes(pb, v, layout));
}

/* Files an edge's pair columns for the edges after it between the same
 * groups (the classes are pb's p_cls and r_cls). */
static jx_status remember_edge(problem *pb, uint64_t key, int pcol, int pn, int rcol, int rn,
                               int np, int nr, int col) {
  if (pb->nedges == pb->edges_cap) {
    int cap = pb->edges_cap ? 2 * pb->edges_cap : 256;
    shared_edge *grown = realloc(pb->edges, sizeof *grown * (size_t)cap);
    if (!grown) return out_of_memory();
    pb->edges = grown;
    pb->edges_cap = cap;
  }
  int *cls = malloc(sizeof *cls * (size_t)(pn + rn));
  if (!cls) return out_of_memory();
  memcpy(cls, pb->p_cls, sizeof *cls * (size_t)pn);
  memcpy(cls + pn, pb->r_cls, sizeof *cls * (size_t)rn);
  pb->edges[pb->nedges] =
      (shared_edge){pcol, pn, rcol, rn, np, nr, col, cls, key, pb->edge_bucket[key % EDGE_BUCKETS]};
  pb->edge_bucket[key % EDGE_BUCKETS] = pb->nedges++;
  return JX_OK;
}

/* The edge from variable v's producer group to a reader group (first
 * column rcol, n columns, reading v as req[k] under column k): the
 * resharding between them is Alpa's linearised product, over the distinct
 * layouts of each side rather than every column (columns of one layout
 * cost the same to relay): a continuous e_{P,R} per pair, summing over R to
 * the producer columns of layout P and over P to the reader columns of
 * layout R. When one side has one layout the edge costs what the other
 * side's choice says: that goes on its columns, no pair needed; an edge
 * that costs nothing whatever the choices is left out. */
static jx_status add_edge(problem *pb, model_builder *b, int t, int v, int rcol, int n,
                          const jx_pspec *req) {
  glp_prob *lp = b->lp;
  const producer *d = &pb->def[v];
  jx_status st = JX_OK;
  if (!d->count) { /* a scalar's broadcast, made in the layout each reader takes */
    /* one elementwise reader fuses it into its kernel: never an array */
    int fused = pb->read_before[v] < 0 && pb->last_use[v] == t &&
                jx_pfamily_of(&pb->p->eqns[t]) == &jx_pfamily_elementwise;
    for (int k = 0; k < n && !st && !fused && is_scalar_broadcast(pb, v); k++)
      st = copy_term(pb, t, v, rcol + k, &req[k]);
    return st;
  }
  if (d->first_col == rcol) { /* one group: each column relays on its own */
    for (int k = 0; k < n && !st; k++) {
      add_cost(lp, rcol + k,
               jx_reshard_time(pb->cm, pb->m, pb->p->avals[v], &d->layout[k], &req[k]) * US);
      if (!jx_pspec_equal(&d->layout[k], &req[k])) st = copy_term(pb, t, v, rcol + k, &req[k]);
    }
    return st;
  }
  st = edge_room(pb, d->count > n ? d->count : n);
  if (st) return st;
  int np = 0, nr = 0;
  for (int a = 0; a < d->count; a++) {
    int c = 0;
    while (c < np && !jx_pspec_equal(&pb->p_rep[c], &d->layout[a])) c++;
    if (c == np) pb->p_rep[np++] = d->layout[a];
    pb->p_cls[a] = c;
  }
  for (int k = 0; k < n; k++) {
    int c = 0;
    while (c < nr && !jx_pspec_equal(&pb->r_rep[c], &req[k])) c++;
    if (c == nr) pb->r_rep[nr++] = req[k];
    pb->r_cls[k] = c;
  }
  int differ = 0; /* a pair of layouts apart: the reader then holds a copy */
  for (int a = 0; a < np; a++)
    for (int r = 0; r < nr; r++) {
      double dt =
          jx_reshard_time(pb->cm, pb->m, pb->p->avals[v], &pb->p_rep[a], &pb->r_rep[r]) * US;
      pb->cost[a * nr + r] = dt;
      differ |= !jx_pspec_equal(&pb->p_rep[a], &pb->r_rep[r]);
    }
  if (!differ) return JX_OK;
  if (np == 1 || nr == 1) {
    int first = np == 1 ? rcol : d->first_col, count = np == 1 ? n : d->count;
    for (int k = 0; k < count && !st; k++) {
      int a = np == 1 ? 0 : pb->p_cls[k], r = np == 1 ? pb->r_cls[k] : 0;
      add_cost(lp, first + k, pb->cost[a * nr + r]);
      if (!jx_pspec_equal(&pb->p_rep[a], &pb->r_rep[r]))
        st = copy_term(pb, t, v, first + k, &pb->r_rep[r]);
    }
    return st;
  }
  uint64_t key = jx_hash_u64(jx_hash_u64(JX_HASH_SEED, (uint64_t)d->first_col), (uint64_t)rcol);
  key = jx_hash_bytes(key, pb->p_cls, sizeof *pb->p_cls * (size_t)d->count);
  key = jx_hash_bytes(key, pb->r_cls, sizeof *pb->r_cls * (size_t)n);
  for (int k = pb->edge_bucket[key % EDGE_BUCKETS]; k >= 0; k = pb->edges[k].next) {
    const shared_edge *x = &pb->edges[k];
    if (x->key == key && x->pcol == d->first_col && x->pn == d->count && x->rcol == rcol &&
        x->rn == n && !memcmp(x->cls, pb->p_cls, sizeof *x->cls * (size_t)x->pn) &&
        !memcmp(x->cls + x->pn, pb->r_cls, sizeof *x->cls * (size_t)n)) {
      for (int a = 0; a < np && !st; a++)
        for (int r = 0; r < nr && !st; r++) {
          add_cost(lp, x->col + a * nr + r, pb->cost[a * nr + r]);
          if (!jx_pspec_equal(&pb->p_rep[a], &pb->r_rep[r]))
            st = copy_term(pb, t, v, x->col + a * nr + r, &pb->r_rep[r]);
        }
      return st;
    }
  }
  int col = glp_add_cols(lp, np * nr);
  st = remember_edge(pb, key, d->first_col, d->count, rcol, n, np, nr, col);
  if (st) return st;
  int by_producer = glp_add_rows(lp, np), by_reader = glp_add_rows(lp, nr);
  for (int a = 0; a < np; a++) glp_set_row_bnds(lp, by_producer + a, GLP_FX, 0, 0);
  for (int r = 0; r < nr; r++) glp_set_row_bnds(lp, by_reader + r, GLP_FX, 0, 0);
  for (int a = 0; a < d->count && !st; a++)
    st = entry(b, by_producer + pb->p_cls[a], d->first_col + a, -1);
  for (int k = 0; k < n && !st; k++) st = entry(b, by_reader + pb->r_cls[k], rcol + k, -1);
  for (int a = 0; a < np && !st; a++)
    for (int r = 0; r < nr && !st; r++) {
      int c = col + a * nr + r;
      glp_set_col_bnds(lp, c, GLP_DB, 0, 1);
      glp_set_obj_coef(lp, c, pb->cost[a * nr + r]);
      st = entry(b, by_producer + a, c, 1);
      if (!st) st = entry(b, by_reader + r, c, 1);
      if (!st && !jx_pspec_equal(&pb->p_rep[a], &pb->r_rep[r]))
        st = copy_term(pb, t, v, c, &pb->r_rep[r]);
    }
  return st;
}

/* Gives variable v the group (first column, count) and its layouts (n
 * entries), counting its bytes in the memory row. */
static jx_status define(problem *pb, int v, int eqn, int first_col, int n, const jx_pspec *layout,
                        size_t stride) {
  jx_pspec *l = malloc(sizeof *l * (size_t)(n + 1));
  if (!l) return out_of_memory();
  jx_status st = JX_OK;
  for (int k = 0; k < n && !st; k++) {
    l[k] = *(const jx_pspec *)((const char *)layout + stride * (size_t)k);
    st = add_memory(pb, first_col + k, block_bytes(pb, v, &l[k]));
  }
  pb->def[v] = (producer){first_col, n, eqn, l};
  return st;
}

/* A result partial over mesh axes is summed into a copy of its own (the
 * all_reduce's output beside its input): equation t, under column c,
 * holds each result's block once more. */
static jx_status partial_terms(problem *pb, int t, int c, uint32_t partial, const jx_pspec *prod) {
  const jx_eqn *e = &pb->p->eqns[t];
  jx_status st = JX_OK;
  for (int o = 0; o < e->nout && partial && !st; o++)
    st = add_term(pb, t, t, c, block_bytes(pb, e->out[o], &prod[o]));
  return st;
}

/* Equations that follow their largest operand instead of choosing:
 * elementwise, shape, reduction, slicing and constraint equations (Alpa's
 * following operators). Their layouts are what their family's plan gives
 * with that operand as its producer lays it out, under each of the
 * producer's columns; other operands are relaid as the plan reads them. */
static int follows(const jx_eqn *e) {
  const jx_pfamily *f = jx_pfamily_of(e);
  return f == &jx_pfamily_elementwise || f == &jx_pfamily_shape || f == &jx_pfamily_reduce ||
         f == &jx_pfamily_slicing || f == &jx_pfamily_constraint;
}

/* Room for an equation of `wide` operands or results, n columns each. */
static jx_status follow_room(problem *pb, int wide, int n) {
  size_t need = (size_t)wide * (size_t)n;
  if ((int)need <= pb->wide_cap) return JX_OK;
  size_t cap = 2 * need + 16;
  if (!grow(&pb->req, sizeof *pb->req * cap) || !grow(&pb->prod, sizeof *pb->prod * cap) ||
      !grow(&pb->in, sizeof *pb->in * cap) || !grow(&pb->out, sizeof *pb->out * cap) ||
      !grow(&pb->in_known, cap) || !grow(&pb->out_known, cap))
    return out_of_memory();
  pb->wide_cap = (int)cap;
  return JX_OK;
}

/* Equation e following operand `lead` (a variable with a group): its
 * layouts per column of lead's group; 0 (and nothing defined) when some
 * column gives a layout the op cannot take. */
static jx_status follow(problem *pb, model_builder *b, int e_idx, int lead, int *followed) {
  const jx_program *p = pb->p;
  const jx_eqn *e = &p->eqns[e_idx];
  const producer *g = &pb->def[e->in[lead]];
  int n = g->count, nin = e->nin, nout = e->nout;
  *followed = 0;
  jx_status st = follow_room(pb, nin > nout ? nin : nout, n);
  if (st) return st;
  /* req[k*nin + i], prod[k*nout + o] */
  uint32_t *partial = malloc(sizeof *partial * (size_t)(n + 1));
  if (!partial) return out_of_memory();
  for (int k = 0; k < n; k++) {
    memset(pb->in_known, 0, (size_t)nin);
    memset(pb->out_known, 0, (size_t)nout);
    for (int i = 0; i < nin; i++) pb->in[i] = jx_pspec_replicated(p->avals[e->in[i]].shape.rank);
    for (int o = 0; o < nout; o++) pb->out[o] = jx_pspec_replicated(p->avals[e->out[o]].shape.rank);
    pb->in[lead] = g->layout[k];
    pb->in_known[lead] = 1;
    jx_plan pl = {.mesh = pb->m,
                  .p = p,
                  .e = e,
                  .in = pb->in,
                  .in_known = pb->in_known,
                  .out = pb->out,
                  .out_known = pb->out_known,
                  .req = pb->req + (size_t)k * nin,
                  .prod = pb->prod + (size_t)k * nout};
    if (jx_pfamily_of(e)->plan(&pl)) {
      jx_clear_error();
      free(partial);
      return JX_OK;
    }
    for (int i = 0; i < nin; i++)
      if (!jx_pspec_fits(pb->m, &pl.req[i], p->avals[e->in[i]].shape)) {
        free(partial);
        return JX_OK;
      }
    for (int o = 0; o < nout; o++)
      if (!jx_pspec_fits(pb->m, &pl.prod[o], p->avals[e->out[o]].shape)) {
        free(partial);
        return JX_OK;
      }
    partial[k] = 0;
    for (int a = 0; a < pl.npartial; a++) partial[k] |= 1u << pl.partial_axes[a];
  }
  *followed = 1;
  pb->eqn_col[e_idx] = -1;
  for (int k = 0; k < n && !st; k++) {
    double flops;
    add_cost(b->lp, g->first_col + k,
             jx_eqn_local_time(pb->cm, pb->m, p, e, pb->req + (size_t)k * nin,
                               pb->prod + (size_t)k * nout, partial[k], &flops) *
                 US);
    st = partial_terms(pb, e_idx, g->first_col + k, partial[k], pb->prod + (size_t)k * nout);
  }
  free(partial);
  /* operands: relaid from their producers as read (req copied out: the
   * scratch is reused by define below) */
  jx_pspec *req = malloc(sizeof *req * (size_t)(n + 1));
  if (!req) return out_of_memory();
  for (int i = 0; i < nin && !st; i++) {
    for (int k = 0; k < n; k++) req[k] = pb->req[(size_t)k * nin + i];
    st = add_edge(pb, b, e_idx, e->in[i], g->first_col, n, req);
  }
  free(req);
  for (int o = 0; o < nout && !st; o++)
    st = define(pb, e->out[o], e_idx, g->first_col, n, pb->prod + o,
                sizeof *pb->prod * (size_t)nout);
  return st;
}

/* Equation e choosing among its strategies: a group of its own. */
static jx_status choose(problem *pb, model_builder *b, int e_idx) {
  const jx_program *p = pb->p;
  const jx_eqn *e = &p->eqns[e_idx];
  glp_prob *lp = b->lp;
  jx_eqn_strategies *s = &pb->st[e_idx];
  jx_status st = jx_eqn_strategies_make(pb->cm, pb->m, p, e, s);
  if (st) return st;
  int rep = pb->eqn_rep[e_idx], col;
  if (rep != e_idx && pb->eqn_col[rep] >= 0 && pb->st[rep].n == s->n)
    col = pb->eqn_col[rep]; /* tied: the same strategies, the same columns */
  else {
    col = glp_add_cols(lp, s->n);
    int r = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, r, GLP_FX, 1, 1);
    for (int k = 0; k < s->n && !st; k++) {
      glp_set_col_kind(lp, col + k, GLP_BV);
      st = entry(b, r, col + k, 1);
    }
  }
  pb->eqn_col[e_idx] = col;
  for (int k = 0; k < s->n && !st; k++) {
    add_cost(lp, col + k, (s->s[k].compute_s + s->s[k].comm_s) * US);
    st = partial_terms(pb, e_idx, col + k, s->s[k].partial_axes, s->s[k].prod);
  }
  jx_pspec *req = malloc(sizeof *req * (size_t)(s->n + 1));
  if (!st && !req) st = out_of_memory();
  for (int i = 0; i < e->nin && !st; i++) {
    for (int k = 0; k < s->n; k++) req[k] = s->s[k].req[i];
    st = add_edge(pb, b, e_idx, e->in[i], col, s->n, req);
  }
  for (int o = 0; o < e->nout && !st; o++) { /* req's room holds the results' layouts now */
    for (int k = 0; k < s->n; k++) req[k] = s->s[k].prod[o];
    st = define(pb, e->out[o], e_idx, col, s->n, req, sizeof *req);
  }
  free(req);
  return st;
}

/* Columns and rows: the choice groups, the memory row, the edges. */
static jx_status build(problem *pb, model_builder *b) {
  const jx_program *p = pb->p;
  glp_prob *lp = b->lp;
  pb->mem_row = glp_add_rows(lp, 1);
  jx_status st = JX_OK;
  for (int i = 0; i < p->nin && !st; i++) { /* inputs: a layout each, tied ones together */
    int v = p->in[i], rep = pb->in_rep[i], col;
    if (rep != i)
      col = pb->def[p->in[rep]].first_col;
    else {
      col = glp_add_cols(lp, pb->ncand[i]);
      int r = glp_add_rows(lp, 1);
      glp_set_row_bnds(lp, r, GLP_FX, 1, 1);
      for (int k = 0; k < pb->ncand[i] && !st; k++) {
        glp_set_col_kind(lp, col + k, GLP_BV);
        st = entry(b, r, col + k, 1);
      }
    }
    if (!st) st = define(pb, v, -1, col, pb->ncand[i], pb->cand[i], sizeof *pb->cand[i]);
  }
  for (int e = 0; e < p->neqns && !st; e++) {
    const jx_eqn *q = &p->eqns[e];
    /* a scalar's broadcast is made locally in any layout its readers want,
     * from the scalar every device holds: free, as a constant is, and so
     * never a lead (a follower of it would take the scalar's one layout:
     * each AdamW update, reading the gradient clipping's factor so
     * broadcast, was held whole) */
    if (is_scalar_broadcast(pb, q->out[0])) {
      pb->eqn_col[e] = -1;
      continue;
    }
    int lead = -1;
    double lead_bytes = -1;
    for (int i = 0; i < q->nin; i++) { /* the largest; of equals, the freest */
      const producer *d = &pb->def[q->in[i]];
      double bytes = jx_aval_bytes(p->avals[q->in[i]]);
      if (d->count &&
          (bytes > lead_bytes || (bytes == lead_bytes && d->count > pb->def[q->in[lead]].count))) {
        lead = i;
        lead_bytes = bytes;
      }
    }
    if (lead < 0 && follows(q)) { /* made from constants only: a constant too */
      pb->eqn_col[e] = -1;
      continue;
    }
    int followed = 0;
    /* an operand with one layout (a replicated-only op's result) would pin
     * every follower after it: such an equation chooses */
    if (lead >= 0 && follows(q) && pb->def[q->in[lead]].count > 1)
      st = follow(pb, b, e, lead, &followed);
    if (!st && !followed) st = choose(pb, b, e);
    for (int i = 0; i < q->nin; i++) pb->read_before[q->in[i]] = e;
  }
  /* an output given back in an input's layout: read there by the next
   * call, relaid after the last equation (the copy held there) */
  for (int o = 0; pb->alias && o < p->nout && !st; o++) {
    int i = pb->alias[o], v = p->out[o], last = p->neqns - 1;
    if (i < 0 || i >= p->nin || !pb->def[v].count || last < 0) continue;
    pb->read_before[v] = last;
    st = add_edge(pb, b, last, v, pb->def[p->in[i]].first_col, pb->ncand[i], pb->cand[i]);
  }
  /* the memory row, its entries summed per column */
  int ncols = glp_get_num_cols(lp);
  for (int c = 1; c <= ncols && c < pb->mem_cap && !st; c++)
    if (pb->mem_coef[c] != 0) {
      st = entry(b, pb->mem_row, c, pb->mem_coef[c]);
      add_cost(lp, c, memory_weight(pb->cm, pb->m) * pb->mem_coef[c]);
    }
  return st;
}

/* Branch and cut stops within MIP_GAP of the optimum's bound; or at
 * `deadline` (glp_time's clock, 0: none) once it holds a plan, with the
 * best plan found (*stopped set); or after limit_ms with whatever it found
 * (the error path's searches: none found is -1). The relaxation is solved
 * by the dual simplex first, from the basis of the last solve: the primal
 * simplex GLPK's branch and cut starts with stalls on this program's
 * degenerate vertices (the GPT's step: 9 s against 0.5 s), and a solve
 * after a memory row is added starts from a basis still dual feasible.
 * The relaxation is most often integral, so branching rarely follows;
 * under a binding memory limit it is not, and branch and cut took 15-26 s
 * of CPU on a 1-layer GPT before the deadline. *gap (when not NULL) gets
 * the plan's distance from the best bound branch and cut proved, a
 * fraction of its objective (0: proved optimal). */
#define MIP_GAP 0.01
/* The planning time limit's default, in seconds (JX_PLAN_TIME_LIMIT). */
#define PLAN_TIME_LIMIT_S 10

typedef struct {
  double gap, deadline; /* the gap so far; the deadline (glp_time, ms), 0: none */
  int stopped;
} search;

/* GLPK's callback: keeps the gap as branch and cut goes, and ends the
 * search at the deadline once it holds a plan. */
static void watch_search(glp_tree *tree, void *info) {
  search *s = info;
  int r = glp_ios_reason(tree);
  if (r != GLP_IBINGO && r != GLP_ISELECT && r != GLP_IBRANCH) return;
  double g = glp_ios_mip_gap(tree); /* DBL_MAX until a plan is found */
  if (g < s->gap) s->gap = g;
  if (s->deadline > 0 && g < DBL_MAX && glp_time() > s->deadline && !s->stopped) {
    s->stopped = 1;
    glp_ios_terminate(tree);
  }
}

static int solve(glp_prob *lp, int limit_ms, double deadline, double *gap, int *stopped) {
  if (limit_ms <= 0) return -1;
  glp_smcp sp;
  glp_init_smcp(&sp);
  sp.msg_lev = GLP_MSG_OFF;
  sp.meth = GLP_DUALP;
  sp.tm_lim = limit_ms;
  double start = glp_time();
  int rc = glp_simplex(lp, &sp);
  if (rc == GLP_ETMLIM) return -1;
  int relaxed = !rc && glp_get_status(lp) == GLP_OPT;
  int spent_ms = (int)(1000 * glp_difftime(glp_time(), start));
  if (spent_ms >= limit_ms) return -1;
  search watch = {DBL_MAX, deadline, 0};
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = relaxed ? GLP_OFF : GLP_ON; /* GLPK's own path decides otherwise */
  parm.msg_lev = GLP_MSG_OFF;
  parm.mip_gap = MIP_GAP;
  parm.tm_lim = limit_ms - spent_ms; /* the two share the limit */
  parm.cb_func = watch_search;
  parm.cb_info = &watch;
  rc = glp_intopt(lp, &parm);
  int st = glp_mip_status(lp);
  if (stopped) *stopped = watch.stopped;
  if (gap) *gap = st == GLP_OPT ? 0 : watch.gap;
  if (st == GLP_OPT || st == GLP_FEAS) return 1;
  return rc == GLP_ETMLIM ? -1 : 0;
}

/* Makes the objective the peak: a column z bounding each peak row (the
 * rows added so far, now bounded by z instead of the limit), z alone in
 * the objective. z's column, or 0 when out of memory. */
static int objective_to_peak(problem *pb, glp_prob *lp) {
  int ncols = glp_get_num_cols(lp);
  int *ind = malloc(sizeof *ind * (size_t)(ncols + 2));
  double *val = malloc(sizeof *val * (size_t)(ncols + 2));
  if (!ind || !val) {
    free(ind);
    free(val);
    return 0;
  }
  int z = glp_add_cols(lp, 1);
  glp_set_col_bnds(lp, z, GLP_LO, 0, 0);
  for (int c = 1; c <= ncols; c++) glp_set_obj_coef(lp, c, 0);
  glp_set_obj_coef(lp, z, 1);
  for (int r = 0; r < pb->npeak; r++) {
    int len = glp_get_mat_row(lp, pb->peak_rows[r], ind, val);
    ind[++len] = z;
    val[len] = -1;
    glp_set_mat_row(lp, pb->peak_rows[r], len, ind, val);
    glp_set_row_bnds(lp, pb->peak_rows[r], GLP_UP, 0, 0);
  }
  free(ind);
  free(val);
  return z;
}

/* Where equation e comes from: " at file:line" when its trace recorded the
 * user's call, else nothing. */
static const char *eqn_where(const jx_eqn *e, char *buf, size_t cap) {
  snprintf(buf, cap, "%s%s", e->loc ? " at " : "", e->loc ? e->loc : "");
  return buf;
}

/* What the plan found holds while equation `at` runs: its three largest
 * arrays per device, each as what makes it (an input by index, else the
 * equation's primitive and its source location), its type and its layout,
 * as text. */
static void describe_held(const problem *pb, glp_prob *lp, int at, char *text, size_t cap) {
  const jx_program *p = pb->p;
  int top[3] = {-1, -1, -1}, top_k[3] = {0, 0, 0};
  double top_b[3] = {0, 0, 0};
  for (int v = 0; v < p->nvars; v++) {
    if (!held_at(pb, v, at)) continue;
    const producer *d = &pb->def[v];
    double b = 0;
    int chosen = 0;
    for (int k = 0; k < d->count && !b; k++)
      if (glp_mip_col_val(lp, d->first_col + k) > 0.5) {
        b = block_bytes(pb, v, produced(pb, d, k));
        chosen = k;
      }
    for (int j = 0; j < 3; j++)
      if (b > top_b[j]) {
        for (int i = 2; i > j; i--) {
          top[i] = top[i - 1];
          top_k[i] = top_k[i - 1];
          top_b[i] = top_b[i - 1];
        }
        top[j] = v;
        top_k[j] = chosen;
        top_b[j] = b;
        break;
      }
  }
  char av[JX_AVAL_STR_CAP], spec[JX_SPEC_CAP], what[64], where[256];
  size_t len = 0;
  text[0] = '\0';
  for (int j = 0; j < 3 && top[j] >= 0 && len < cap; j++) {
    const producer *d = &pb->def[top[j]];
    const jx_pspec *l = produced(pb, d, top_k[j]);
    where[0] = '\0';
    if (d->eqn < 0) {
      int i = 0;
      while (i < p->nin && p->in[i] != top[j]) i++;
      snprintf(what, sizeof what, "input %d", i);
    } else {
      snprintf(what, sizeof what, "%s", p->eqns[d->eqn].prim->name);
      eqn_where(&p->eqns[d->eqn], where, sizeof where);
    }
    len += (size_t)snprintf(text + len, cap - len, "%s%s %s %s%s%s%s (%.0f bytes)", j ? ", " : "",
                            what, jx_aval_str(p->avals[top[j]].dtype, p->avals[top[j]].shape, av),
                            jx_pspec_sharded(l) ? "split (" : "whole",
                            jx_pspec_sharded(l) ? jx_pspec_str(pb->m, l, spec) : "",
                            jx_pspec_sharded(l) ? ")" : "", where, top_b[j]);
  }
}

static double partitioned_peak(const problem *pb, glp_prob *lp);

/* How far over the limit the rows may put a plan that is still partitioned
 * and costed (solve_within_limit). */
#define NEAR_OVER 1.25

/* Solves with the limit bounding the bytes held at every equation: solved
 * with rows for the equations seen over the limit so far, a row added for
 * each new one until the plan found fits (each is added once, so this
 * ends). The rows count copies the partitioner need not make, so a plan
 * they put over the limit is partitioned and costed when it is the first
 * (the fastest of all) or the rows put it near the limit (under
 * NEAR_OVER times it), and taken as soon as the partitioned program fits
 * (pb->solution_peak its peak): on GPT-2-124M's step on data=4,model=2
 * the rows put the fastest plan over 3.2 GB where it held 2.1 GB
 * partitioned, and the plans they then led to held 3.5 GB. 1 when solved,
 * 0 when no plan fits, -1 when the solver found none in its time. */
static int solve_within_limit(problem *pb, glp_prob *lp) {
  for (int first = 1;; first = 0) {
    int solved = solve(lp, INT_MAX, pb->started + 1000 * pb->time_limit_s, &pb->gap, &pb->stopped);
    if (solved <= 0) return solved;
    int at;
    double peak = peak_held(pb, lp, pb->scratch, &at);
    if (peak <= pb->limit * (1 + 1e-12)) return 1;
    if (first || peak <= NEAR_OVER * pb->limit) {
      double part = partitioned_peak(pb, lp);
      if (part >= 0 && part <= pb->limit * (1 + 1e-12)) {
        pb->solution_peak = part;
        return 1;
      }
    }
    if (pb->found_peak < 0 || peak < pb->found_peak) { /* for the error, should none fit */
      pb->found_peak = peak;
      pb->found_at = at;
      describe_held(pb, lp, at, pb->found_held, sizeof pb->found_held);
    }
    add_peak_row(pb, lp, at, 0);
  }
}

/* How many plans the rows admit are partitioned and costed before the
 * search gives up (solve_partitioned). */
#define PARTITION_CHECKS 8
/* A plan the rows put under this part of the limit is not checked: no
 * copy the rows miss brings it over. */
#define UNCHECKED_BELOW 0.75

/* The layout of every variable under the solution: its group's chosen
 * column's; a scalar's broadcast is made as its first reader's result of
 * its shape is laid out (an elementwise reader takes it so; the
 * partitioner would otherwise make it whole and slice it), and a constant
 * replicated (spec: p->nvars entries). */
static void chosen_layouts(const problem *pb, glp_prob *lp, jx_pspec *spec) {
  const jx_program *p = pb->p;
  for (int v = 0; v < p->nvars; v++) {
    const producer *d = &pb->def[v];
    spec[v] = jx_pspec_replicated(p->avals[v].shape.rank);
    for (int k = 0; k < d->count; k++)
      if (glp_mip_col_val(lp, d->first_col + k) > 0.5) spec[v] = d->layout[k];
  }
  uint8_t *laid = calloc((size_t)p->nvars + 1, 1); /* none: left replicated */
  for (int e = 0; e < p->neqns && laid; e++) {     /* readers after their broadcasts: in order */
    const jx_eqn *q = &p->eqns[e];
    for (int i = 0; i < q->nin; i++) {
      int v = q->in[i];
      if (laid[v] || pb->def[v].count || !is_scalar_broadcast(pb, v)) continue;
      laid[v] = 1;
      for (int o = 0; o < q->nout; o++)
        if (jx_shape_equal(p->avals[q->out[o]].shape, p->avals[v].shape)) {
          spec[v] = spec[q->out[o]];
          break;
        }
    }
  }
  free(laid);
}

/* The peak per device of the program the sharded jit runs for the
 * solution: p partitioned by its layouts, simplified, by jx_fn_cost's
 * liveness (what the executable holds, the relaid copies, collectives'
 * buffers and fused kernels as they are); -1 when it cannot be made. */
static double partitioned_peak(const problem *pb, glp_prob *lp) {
  const jx_program *p = pb->p;
  jx_pspec *spec = malloc(sizeof *spec * (size_t)(p->nvars + p->nout + 1));
  if (!spec) return -1;
  chosen_layouts(pb, lp, spec);
  for (int o = 0; o < p->nout; o++) /* given back as made, or in an aliased input's layout */
    spec[p->nvars + o] = spec[pb->alias && pb->alias[o] >= 0 ? p->in[pb->alias[o]] : p->out[o]];
  jx_program *d = jx_partition(pb->m, p, spec, spec + p->nvars);
  jx_program *q = d ? jx_simplify(d) : NULL;
  jx_cost c = {0};
  if (q) jx_program_cost(q, &c);
  jx_program_release(q);
  jx_program_release(d);
  free(spec);
  if (!q) jx_clear_error();
  return q ? c.peak_bytes_per_device : -1;
}

/* Excludes the solution's plan from the search: a row keeping the binary
 * columns it chose from being chosen all together again. */
static void exclude_plan(problem *pb, glp_prob *lp) {
  int ncols = glp_get_num_cols(lp), n = 0;
  for (int c = 1; c <= ncols; c++)
    if (glp_get_col_kind(lp, c) == GLP_BV && glp_mip_col_val(lp, c) > 0.5) pb->cols[++n] = c;
  double *val = pb->coef + ncols + 1; /* scratch past the columns */
  for (int k = 1; k <= n; k++) val[k] = 1;
  int row = glp_add_rows(lp, 1);
  glp_set_mat_row(lp, row, n, pb->cols, val);
  glp_set_row_bnds(lp, row, GLP_UP, 0, n - 1);
}

/* A plan's peak as the partitioned program holds it, where the rows count
 * it near the limit (the rows' count elsewhere, and when it cannot be
 * costed). */
static double plan_peak(problem *pb, glp_prob *lp, double rows_peak) {
  if (rows_peak < UNCHECKED_BELOW * pb->limit) return rows_peak;
  double part = pb->solution_peak = partitioned_peak(pb, lp);
  return part >= 0 ? part : rows_peak;
}

/* Solves under the limit as the partitioned program counts it too: the
 * rows count the arrays' blocks and the copies the partitioner makes (the
 * problem's terms), not its exact liveness (what fusion keeps out of
 * memory, how long a common copy lives), so a plan found near the limit is
 * partitioned and costed, and one over the limit is excluded and the
 * search runs again, at most PARTITION_CHECKS times (none that fits by
 * then: as no plan fitting). *peak gets the plan's peak (plan_peak's).
 * 1, 0 or -1 as solve_within_limit. */
static int solve_partitioned(problem *pb, glp_prob *lp, double *peak) {
  for (int k = 0; k < PARTITION_CHECKS; k++) {
    pb->solution_peak = NAN;
    int solved = solve_within_limit(pb, lp), at;
    if (solved <= 0) return solved;
    if (!isnan(pb->solution_peak)) { /* fits as partitioned */
      *peak = pb->solution_peak;
      return 1;
    }
    double rows_peak = peak_held(pb, lp, pb->scratch, &at);
    *peak = plan_peak(pb, lp, rows_peak);
    if (*peak <= pb->limit * (1 + 1e-12)) return 1;
    if (pb->found_peak < 0 || fmax(*peak, rows_peak) < pb->found_peak) { /* for the error */
      pb->found_peak = fmax(*peak, rows_peak);
      pb->found_at = at;
      describe_held(pb, lp, at, pb->found_held, sizeof pb->found_held);
    }
    exclude_plan(pb, lp);
  }
  return 0;
}

/* Each of the error's two searches' wall time (the fewest bytes, the
 * smallest peak; the best plan found when it ends): the error path, so
 * bounded well below a plan's. */
#define PEAK_SEARCH_MS 3000

/* Makes the objective the memory row's. */
static int objective_to_memory(glp_prob *lp, int mem_row) {
  int ncols = glp_get_num_cols(lp);
  int *ind = malloc(sizeof *ind * (size_t)(ncols + 1));
  double *val = malloc(sizeof *val * (size_t)(ncols + 1));
  if (!ind || !val) {
    free(ind);
    free(val);
    return -1;
  }
  int len = glp_get_mat_row(lp, mem_row, ind, val);
  for (int c = 1; c <= ncols; c++) glp_set_obj_coef(lp, c, 0);
  for (int k = 1; k <= len; k++) glp_set_obj_coef(lp, ind[k], val[k]);
  free(ind);
  free(val);
  return 0;
}

/* The error for a limit no plan meets: the smallest peak over the plans
 * found, the limit lifted and the peak the objective (a column z bounding
 * the bytes held at each equation with a row, rows added as the limit's
 * are: at the peak of each plan found, until the peak found is the one the
 * rows bound, or PEAK_SEARCH_MS ends the search with the smallest found so
 * far), with the largest arrays held there. */
static jx_status no_plan_fits(problem *pb, glp_prob *lp) {
  const jx_program *p = pb->p;
  int at = 0, best_at = 0, z = 0;
  double best = -1, start = glp_time();
  char held[1024] = "", where[256];
  /* the limit's search found plans over it: the smallest of their peaks to
   * improve */
  if (pb->found_peak >= 0) {
    best = pb->found_peak;
    best_at = pb->found_at;
    snprintf(held, sizeof held, "%s", pb->found_held);
  }
  /* the plan of fewest bytes in all, most often quickly found and of a
   * small peak */
  for (int r = 0; r < pb->npeak; r++) glp_set_row_bnds(lp, pb->peak_rows[r], GLP_FR, 0, 0);
  if (!objective_to_memory(lp, pb->mem_row) && solve(lp, PEAK_SEARCH_MS, 0, NULL, NULL) > 0) {
    double rows_peak = peak_held(pb, lp, pb->scratch, &at),
           peak = fmax(rows_peak, plan_peak(pb, lp, rows_peak));
    if (best < 0 || peak < best) {
      best = peak;
      best_at = at;
      describe_held(pb, lp, at, held, sizeof held);
    }
    if (!pb->has_row[at]) add_peak_row(pb, lp, at, 0);
  }
  start = glp_time(); /* the search's time is its own */
  z = objective_to_peak(pb, lp);
  for (;;) {
    int left_ms = PEAK_SEARCH_MS - (int)(1000 * glp_difftime(glp_time(), start));
    if (!z || left_ms <= 0 || solve(lp, left_ms, 0, NULL, NULL) <= 0) break;
    double rows_peak = peak_held(pb, lp, pb->scratch, &at),
           peak = fmax(rows_peak, plan_peak(pb, lp, rows_peak));
    if (best < 0 || peak < best) {
      best = peak;
      best_at = at;
      describe_held(pb, lp, at, held, sizeof held);
    }
    if (pb->has_row[at] || rows_peak <= glp_mip_col_val(lp, z) * ROW_BYTES * (1 + 1e-9) + 0.5)
      break;
    add_peak_row(pb, lp, at, z);
  }
  if (best < 0)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_auto_plan: no plan of '%s' fits %.0f bytes per device",
                        p->name ? p->name : "the program", pb->limit);
  return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "jx_auto_plan: no plan of '%s' fits %.0f bytes per device; the smallest "
                      "peak found is %.0f bytes, while equation %d (%s%s) runs, holding most %s",
                      p->name ? p->name : "the program", pb->limit, best, best_at,
                      p->neqns ? p->eqns[best_at].prim->name : "none",
                      p->neqns ? eqn_where(&p->eqns[best_at], where, sizeof where) : "", held);
}

jx_status jx_auto_plan_solve(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                             double memory_limit, jx_auto_plan *out) {
  return jx_auto_plan_solve_fixed(cm, m, p, NULL, memory_limit, out);
}

static jx_status solve_plan(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                            const jx_pspec *const *fixed, const int *alias, double memory_limit,
                            int ties, jx_auto_plan *out);

jx_status jx_auto_plan_solve_fixed(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                   const jx_pspec *const *fixed, double memory_limit,
                                   jx_auto_plan *out) {
  return solve_plan(cm, m, p, fixed, NULL, memory_limit, 1, out);
}

jx_status jx_auto_plan_solve_aliased(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                     const jx_pspec *const *fixed, const int *alias,
                                     double memory_limit, jx_auto_plan *out) {
  return solve_plan(cm, m, p, fixed, alias, memory_limit, 1, out);
}

jx_status jx_auto_plan_solve_untied(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                    double memory_limit, jx_auto_plan *out) {
  return solve_plan(cm, m, p, NULL, NULL, memory_limit, 0, out);
}

static jx_status solve_plan(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                            const jx_pspec *const *fixed, const int *alias, double memory_limit,
                            int ties, jx_auto_plan *out) {
  memset(out, 0, sizeof *out);
  problem pb = {.cm = cm, .m = m, .p = p, .alias = alias};
  pb.st = calloc((size_t)p->neqns + 1, sizeof *pb.st);
  pb.cand = calloc((size_t)p->nin + 1, sizeof *pb.cand);
  pb.ncand = calloc((size_t)p->nin + 1, sizeof *pb.ncand);
  pb.def = calloc((size_t)p->nvars + 1, sizeof *pb.def);
  pb.eqn_col = calloc((size_t)p->neqns + 1, sizeof *pb.eqn_col);
  out->in_spec = calloc((size_t)p->nin + 1, sizeof *out->in_spec);
  out->strategy = calloc((size_t)p->neqns + 1, sizeof *out->strategy);
  out->spec = calloc((size_t)p->nvars + 1, sizeof *out->spec);
  pb.made_at = calloc((size_t)p->nvars + 1, sizeof *pb.made_at);
  pb.last_use = calloc((size_t)p->nvars + 1, sizeof *pb.last_use);
  pb.read_before = calloc((size_t)p->nvars + 1, sizeof *pb.read_before);
  pb.scratch = calloc(2 * (size_t)(p->neqns + 1), sizeof *pb.scratch);
  pb.peak_rows = calloc((size_t)p->neqns + 1, sizeof *pb.peak_rows);
  pb.has_row = calloc((size_t)p->neqns + 1, 1);
  pb.eqn_rep = calloc((size_t)p->neqns + 1, sizeof *pb.eqn_rep);
  pb.in_rep = calloc((size_t)p->nin + 1, sizeof *pb.in_rep);
  pb.edge_bucket = malloc(sizeof *pb.edge_bucket * EDGE_BUCKETS);
  pb.limit = memory_limit;
  pb.found_peak = -1;
  pb.time_limit_s = PLAN_TIME_LIMIT_S;
  jx_status st = JX_OK;
  int given = jx_env_double("JX_PLAN_TIME_LIMIT", &pb.time_limit_s);
  if (given < 0 || !(pb.time_limit_s > 0))
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "jx_auto_plan: JX_PLAN_TIME_LIMIT is '%s'; it must be a positive number of "
                      "seconds",
                      jx_env_string("JX_PLAN_TIME_LIMIT"));
  if (!pb.eqn_rep || !pb.in_rep || !pb.edge_bucket) st = out_of_memory();
  for (int k = 0; !st && k < EDGE_BUCKETS; k++) pb.edge_bucket[k] = -1;
  if (!st && ties)
    st = jx_auto_ties(p, fixed, pb.eqn_rep, pb.in_rep);
  else if (!st) { /* each its own */
    for (int e = 0; e < p->neqns; e++) pb.eqn_rep[e] = e;
    for (int i = 0; i < p->nin; i++) pb.in_rep[i] = i;
  }
  if (!st && (!pb.st || !pb.cand || !pb.ncand || !pb.def || !pb.eqn_col || !out->in_spec ||
              !out->strategy || !out->spec || !pb.made_at || !pb.last_use || !pb.read_before ||
              !pb.scratch || !pb.peak_rows || !pb.has_row))
    st = out_of_memory();
  for (int i = 0; i < p->nin && !st; i++) {
    jx_shape g = p->avals[p->in[i]].shape;
    int given = fixed && fixed[i];
    pb.ncand[i] = given ? 1 : jx_layout_candidates(m, g, NULL, 0);
    pb.cand[i] = malloc(sizeof *pb.cand[i] * (size_t)pb.ncand[i]);
    if (!pb.cand[i])
      st = out_of_memory();
    else if (given)
      pb.cand[i][0] = *fixed[i];
    else
      jx_layout_candidates(m, g, pb.cand[i], pb.ncand[i]);
  }
  model_builder b = {0};
  if (!st) {
    liveness(&pb);
    glp_term_out(GLP_OFF);
    b.lp = glp_create_prob();
    glp_set_obj_dir(b.lp, GLP_MIN);
    st = build(&pb, &b);
  }
  if (!st) {
    glp_load_matrix(b.lp, b.nnz, b.ia, b.ja, b.ar);
    glp_set_row_bnds(b.lp, pb.mem_row, GLP_FR, 0, 0);
    /* scaled (rows and columns to entries near one): the memory row's bytes
     * beside the choice rows' ones made the dual simplex fail unscaled on
     * the GPT's step, leaving the relaxation to branch and cut's primal
     * simplex (13 s against 0.8 s of CPU on the GPT on 4x2) */
    glp_scale_prob(b.lp, GLP_SF_AUTO);
    int ncols = glp_get_num_cols(b.lp);
    /* room for the peak column no_plan_fits may add */
    pb.coef = calloc(2 * (size_t)ncols + 4, sizeof *pb.coef);
    pb.cols = calloc((size_t)ncols + 2, sizeof *pb.cols);
    if (!pb.coef || !pb.cols) st = out_of_memory();
  }
  if (!st) {
    pb.started = glp_time();
    int solved = solve_partitioned(&pb, b.lp, &out->memory_bytes);
    if (solved < 0)
      st = jx_error_set(JX_ERR_INTERNAL,
                        "jx_auto_plan: the solver failed on '%s' (%d equations, %d columns)",
                        p->name ? p->name : "the program", p->neqns, glp_get_num_cols(b.lp));
    else if (!solved)
      st = no_plan_fits(&pb, b.lp);
  }
  if (!st) {
    double busy =
        (glp_mip_obj_val(b.lp) - memory_weight(cm, m) * glp_mip_row_val(b.lp, pb.mem_row)) / US;
    out->time_s = busy / (1 - cm->idle_share); /* the same factor for every plan: not solved for */
    out->gap = pb.gap;
    out->stopped = pb.stopped;
    out->time_limit_s = pb.time_limit_s;
    chosen_layouts(&pb, b.lp, out->spec);
    /* costed already when the plan was checked against the limit */
    out->peak_bytes = isnan(pb.solution_peak) ? partitioned_peak(&pb, b.lp) : pb.solution_peak;
    for (int i = 0; i < p->nin; i++) out->in_spec[i] = out->spec[p->in[i]];
    for (int e = 0; e < p->neqns; e++) {
      out->strategy[e] = -1;
      for (int k = 0; pb.eqn_col[e] >= 0 && k < pb.st[e].n; k++)
        if (glp_mip_col_val(b.lp, pb.eqn_col[e] + k) > 0.5) out->strategy[e] = k;
    }
  }
  if (b.lp) glp_delete_prob(b.lp);
  free(b.ia);
  free(b.ja);
  free(b.ar);
  for (int e = 0; pb.st && e < p->neqns; e++) jx_eqn_strategies_free(&pb.st[e]);
  for (int i = 0; pb.cand && i < p->nin; i++) free(pb.cand[i]);
  free(pb.st);
  free(pb.cand);
  free(pb.ncand);
  for (int v = 0; pb.def && v < p->nvars; v++) free(pb.def[v].layout);
  free(pb.def);
  free(pb.eqn_col);
  free(pb.mem_coef);
  free(pb.req);
  free(pb.prod);
  free(pb.in);
  free(pb.out);
  free(pb.in_known);
  free(pb.out_known);
  free(pb.made_at);
  free(pb.last_use);
  free(pb.scratch);
  free(pb.peak_rows);
  free(pb.has_row);
  free(pb.coef);
  free(pb.cols);
  free(pb.p_rep);
  free(pb.r_rep);
  free(pb.p_cls);
  free(pb.r_cls);
  free(pb.cost);
  for (int k = 0; k < pb.nedges; k++) free(pb.edges[k].cls);
  free(pb.edges);
  free(pb.edge_bucket);
  free(pb.eqn_rep);
  free(pb.in_rep);
  free(pb.term_from);
  free(pb.term_to);
  free(pb.term_col);
  free(pb.term_bytes);
  free(pb.read_before);
  if (st) jx_auto_plan_free(out);
  return st;
}

void jx_auto_plan_free(jx_auto_plan *pl) {
  free(pl->in_spec);
  free(pl->strategy);
  free(pl->spec);
  pl->in_spec = NULL;
  pl->strategy = NULL;
  pl->spec = NULL;
}
