/* The planner's integer linear program (plan.h), built as triplets and
 * handed to GLPK's branch and cut. */
#include "plan.h"

#include <glpk.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/error.h"
#include "../../compile/cost.h"

/* Times go to the solver in microseconds, so its tolerances see figures
 * near one rather than near 1e-6. */
#define US 1e6

typedef struct {
  glp_prob *lp;
  int *ia, *ja;
  double *ar;
  int nnz, cap;
} model_builder;

static jx_status entry(model_builder *b, int row, int col, double v) {
  if (b->nnz + 1 >= b->cap) {
    int cap = b->cap ? 2 * b->cap : 1024;
    int *ia = realloc(b->ia, sizeof *ia * (size_t)cap);
    if (ia) b->ia = ia;
    int *ja = realloc(b->ja, sizeof *ja * (size_t)cap);
    if (ja) b->ja = ja;
    double *ar = realloc(b->ar, sizeof *ar * (size_t)cap);
    if (ar) b->ar = ar;
    if (!ia || !ja || !ar) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_plan: out of memory");
    b->cap = cap;
  }
  b->nnz++; /* GLPK counts from 1 */
  b->ia[b->nnz] = row;
  b->ja[b->nnz] = col;
  b->ar[b->nnz] = v;
  return JX_OK;
}

/* Who defines each variable: an equation's strategy group or an input's
 * layout group (first column, count), and which of its outputs it is. */
typedef struct {
  int first_col, count; /* 0 count: a constant, free */
  int eqn;              /* -1: an input */
  int out;              /* the result's index, or the input's */
} producer;

typedef struct {
  const jx_comm_model *cm;
  jx_mesh *m;
  const jx_program *p;
  jx_eqn_strategies *st; /* per equation */
  jx_pspec **cand;       /* per input: its candidate layouts */
  int *ncand;
  producer *def; /* per variable */
  int *eqn_col;  /* per equation: the first column of its strategies */
  int mem_row;   /* every variable's bytes summed: the tie-breaker's measure */
  /* liveness: a variable is held from the equation that makes it (-1: an
   * input, held by the caller throughout) to its last reader (p->neqns: an
   * output) */
  int *made_at, *last_use;
  double limit;
  double *coef; /* scratch per column, for a peak row */
  int *cols;
  double *scratch;       /* per equation, twice: peak_held's */
  int *peak_rows, npeak; /* the rows added for the limit */
} problem;

static const jx_pspec *produced(const problem *pb, const producer *d, int k) {
  return d->eqn < 0 ? &pb->cand[d->out][k] : &pb->st[d->eqn].s[k].prod[d->out];
}

static double block_bytes(const problem *pb, int v, const jx_pspec *s) {
  jx_aval a = pb->p->avals[v];
  a.shape = jx_pspec_local(pb->m, s, a.shape);
  return jx_aval_bytes(a);
}

/* When each variable is made and last read. */
static void liveness(problem *pb) {
  const jx_program *p = pb->p;
  for (int v = 0; v < p->nvars; v++) pb->made_at[v] = pb->last_use[v] = -1;
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

/* A row bounding the bytes held while equation t runs by the limit. */
static void add_peak_row(problem *pb, glp_prob *lp, int t) {
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
  double *val = pb->coef + glp_get_num_cols(lp) + 1; /* scratch past the columns */
  for (int j = 1; j <= n; j++) {
    val[j] = pb->coef[pb->cols[j]];
    pb->coef[pb->cols[j]] = 0;
  }
  int row = glp_add_rows(lp, 1);
  glp_set_mat_row(lp, row, n, pb->cols, val);
  glp_set_row_bnds(lp, row, GLP_UP, 0, pb->limit);
  pb->peak_rows[pb->npeak++] = row;
}

/* Columns and rows: the choice groups, the memory row, the edges. */
static jx_status build(problem *pb, model_builder *b) {
  const jx_program *p = pb->p;
  glp_prob *lp = b->lp;
  int row = glp_add_rows(lp, 1); /* memory */
  pb->mem_row = row;
  jx_status st = JX_OK;
  for (int i = 0; i < p->nin && !st; i++) { /* inputs: a layout each */
    int v = p->in[i], col = glp_add_cols(lp, pb->ncand[i]), r = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, r, GLP_FX, 1, 1);
    pb->def[v] = (producer){col, pb->ncand[i], -1, i};
    for (int k = 0; k < pb->ncand[i] && !st; k++) {
      glp_set_col_kind(lp, col + k, GLP_BV);
      st = entry(b, r, col + k, 1);
      if (!st) st = entry(b, pb->mem_row, col + k, block_bytes(pb, v, &pb->cand[i][k]));
    }
  }
  for (int e = 0; e < p->neqns && !st; e++) { /* equations: a strategy each */
    const jx_eqn_strategies *s = &pb->st[e];
    int col = glp_add_cols(lp, s->n), r = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, r, GLP_FX, 1, 1);
    pb->eqn_col[e] = col;
    for (int o = 0; o < p->eqns[e].nout; o++)
      pb->def[p->eqns[e].out[o]] = (producer){col, s->n, e, o};
    for (int k = 0; k < s->n && !st; k++) {
      glp_set_col_kind(lp, col + k, GLP_BV);
      st = entry(b, r, col + k, 1);
      double bytes = 0;
      for (int o = 0; o < p->eqns[e].nout; o++)
        bytes += block_bytes(pb, p->eqns[e].out[o], &s->s[k].prod[o]);
      glp_set_obj_coef(lp, col + k, (s->s[k].compute_s + s->s[k].comm_s) * US);
      if (!st) st = entry(b, pb->mem_row, col + k, bytes);
    }
  }
  /* edges: a continuous e_{a,k} per pair of producer strategy a and reader
   * strategy k, summing over k to s_a and over a to s_k (Alpa's
   * linearisation of s_a s_k, whose relaxation is tight enough that branch
   * and cut has little left to do) */
  for (int e = 0; e < p->neqns && !st; e++) {
    const jx_eqn *q = &p->eqns[e];
    const jx_eqn_strategies *s = &pb->st[e];
    for (int i = 0; i < q->nin && !st; i++) {
      const producer *d = &pb->def[q->in[i]];
      if (!d->count) continue;
      int col = glp_add_cols(lp, d->count * s->n);
      int by_producer = glp_add_rows(lp, d->count), by_reader = glp_add_rows(lp, s->n);
      for (int a = 0; a < d->count && !st; a++) {
        glp_set_row_bnds(lp, by_producer + a, GLP_FX, 0, 0);
        st = entry(b, by_producer + a, d->first_col + a, -1);
      }
      for (int k = 0; k < s->n && !st; k++) {
        glp_set_row_bnds(lp, by_reader + k, GLP_FX, 0, 0);
        st = entry(b, by_reader + k, pb->eqn_col[e] + k, -1);
      }
      for (int a = 0; a < d->count && !st; a++)
        for (int k = 0; k < s->n && !st; k++) {
          int c = col + a * s->n + k;
          glp_set_col_bnds(lp, c, GLP_DB, 0, 1);
          glp_set_obj_coef(lp, c,
                           jx_reshard_time(pb->cm, pb->m, p->avals[q->in[i]], produced(pb, d, a),
                                           &s->s[k].req[i]) *
                               US);
          st = entry(b, by_producer + a, c, 1);
          if (!st) st = entry(b, by_reader + k, c, 1);
        }
    }
  }
  return st;
}

static int solve(glp_prob *lp) {
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  if (glp_intopt(lp, &parm) != 0) return 0;
  int st = glp_mip_status(lp);
  return st == GLP_OPT || st == GLP_FEAS;
}

/* Makes the objective the memory row's (the time's coefficients go to a new
 * row, returned, when keep_time). */
static int objective_to_memory(glp_prob *lp, int mem_row, int keep_time) {
  int ncols = glp_get_num_cols(lp), time_row = 0;
  int *ind = malloc(sizeof *ind * (size_t)(ncols + 1));
  double *val = malloc(sizeof *val * (size_t)(ncols + 1));
  if (!ind || !val) {
    free(ind);
    free(val);
    return -1;
  }
  if (keep_time) {
    int len = 0;
    for (int c = 1; c <= ncols; c++)
      if (glp_get_obj_coef(lp, c) != 0) {
        len++;
        ind[len] = c;
        val[len] = glp_get_obj_coef(lp, c);
      }
    time_row = glp_add_rows(lp, 1);
    glp_set_mat_row(lp, time_row, len, ind, val);
  }
  int len = glp_get_mat_row(lp, mem_row, ind, val);
  for (int c = 1; c <= ncols; c++) glp_set_obj_coef(lp, c, 0);
  for (int k = 1; k <= len; k++) glp_set_obj_coef(lp, ind[k], val[k]);
  free(ind);
  free(val);
  return time_row;
}

/* Solves with the limit bounding the bytes held at every equation: solved
 * with rows for the equations seen over the limit so far, a row added for
 * each new one until the plan found fits (each is added once, so this
 * ends). 0 when no plan fits. */
static int solve_within_limit(problem *pb, glp_prob *lp) {
  for (;;) {
    if (!solve(lp)) return 0;
    int at;
    if (peak_held(pb, lp, pb->scratch, &at) <= pb->limit * (1 + 1e-12)) return 1;
    add_peak_row(pb, lp, at);
  }
}

/* The error for a limit no plan meets: the plan holding least in all (the
 * limit lifted) and its peak, with the largest arrays held there. */
static jx_status no_plan_fits(problem *pb, glp_prob *lp) {
  const jx_program *p = pb->p;
  for (int r = 0; r < pb->npeak; r++) glp_set_row_bnds(lp, pb->peak_rows[r], GLP_FR, 0, 0);
  if (objective_to_memory(lp, pb->mem_row, 0) < 0 || !solve(lp))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_auto_plan: no plan of '%s' fits %.0f bytes per device",
                        p->name ? p->name : "the program", pb->limit);
  int at;
  double peak = peak_held(pb, lp, pb->scratch, &at);
  /* the three largest arrays held while equation `at` runs */
  int top[3] = {-1, -1, -1};
  double top_b[3] = {0, 0, 0};
  for (int v = 0; v < p->nvars; v++) {
    if (!held_at(pb, v, at)) continue;
    const producer *d = &pb->def[v];
    double b = 0;
    for (int k = 0; k < d->count && !b; k++)
      if (glp_mip_col_val(lp, d->first_col + k) > 0.5) b = block_bytes(pb, v, produced(pb, d, k));
    for (int j = 0; j < 3; j++)
      if (b > top_b[j]) {
        for (int i = 2; i > j; i--) {
          top[i] = top[i - 1];
          top_b[i] = top_b[i - 1];
        }
        top[j] = v;
        top_b[j] = b;
        break;
      }
  }
  char held_text[768] = "", av[JX_AVAL_STR_CAP];
  size_t len = 0;
  for (int j = 0; j < 3 && top[j] >= 0 && len < sizeof held_text; j++) {
    const producer *d = &pb->def[top[j]];
    len +=
        (size_t)snprintf(held_text + len, sizeof held_text - len, "%s%s %s (%.0f bytes)",
                         j ? ", " : "", d->eqn < 0 ? "input" : p->eqns[d->eqn].prim->name,
                         jx_aval_str(p->avals[top[j]].dtype, p->avals[top[j]].shape, av), top_b[j]);
  }
  return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "jx_auto_plan: no plan of '%s' fits %.0f bytes per device; the smallest "
                      "peak found is %.0f bytes, while equation %d (%s) runs, holding most %s",
                      p->name ? p->name : "the program", pb->limit, peak, at,
                      p->neqns ? p->eqns[at].prim->name : "none", held_text);
}

/* Of the plans as fast as the fastest (within the solver's tolerance), the
 * one holding least: an input its readers slice locally anyway then
 * arrives split. Returns the time row, or -1. */
static int least_memory_at_best_time(glp_prob *lp, int mem_row) {
  double best = glp_mip_obj_val(lp);
  int time_row = objective_to_memory(lp, mem_row, 1);
  if (time_row <= 0) return -1;
  glp_set_row_bnds(lp, time_row, GLP_UP, 0, best * (1 + 1e-7) + 1e-6);
  return time_row;
}

jx_status jx_auto_plan_solve(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                             double memory_limit, jx_auto_plan *out) {
  return jx_auto_plan_solve_fixed(cm, m, p, NULL, memory_limit, out);
}

jx_status jx_auto_plan_solve_fixed(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                   const jx_pspec *const *fixed, double memory_limit,
                                   jx_auto_plan *out) {
  memset(out, 0, sizeof *out);
  problem pb = {.cm = cm, .m = m, .p = p};
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
  pb.scratch = calloc(2 * (size_t)(p->neqns + 1), sizeof *pb.scratch);
  pb.peak_rows = calloc((size_t)p->neqns + 1, sizeof *pb.peak_rows);
  pb.limit = memory_limit;
  jx_status st = JX_OK;
  if (!pb.st || !pb.cand || !pb.ncand || !pb.def || !pb.eqn_col || !out->in_spec ||
      !out->strategy || !out->spec || !pb.made_at || !pb.last_use || !pb.scratch || !pb.peak_rows)
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_plan: out of memory");
  for (int e = 0; e < p->neqns && !st; e++)
    st = jx_eqn_strategies_make(cm, m, p, &p->eqns[e], &pb.st[e]);
  for (int i = 0; i < p->nin && !st; i++) {
    jx_shape g = p->avals[p->in[i]].shape;
    int given = fixed && fixed[i];
    pb.ncand[i] = given ? 1 : jx_layout_candidates(m, g, NULL, 0);
    pb.cand[i] = malloc(sizeof *pb.cand[i] * (size_t)pb.ncand[i]);
    if (!pb.cand[i])
      st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_plan: out of memory");
    else if (given)
      pb.cand[i][0] = *fixed[i];
    else
      jx_layout_candidates(m, g, pb.cand[i], pb.ncand[i]);
  }
  model_builder b = {0};
  if (!st) {
    glp_term_out(GLP_OFF);
    b.lp = glp_create_prob();
    glp_set_obj_dir(b.lp, GLP_MIN);
    st = build(&pb, &b);
  }
  if (!st) {
    glp_load_matrix(b.lp, b.nnz, b.ia, b.ja, b.ar);
    glp_set_row_bnds(b.lp, pb.mem_row, GLP_FR, 0, 0);
    int ncols = glp_get_num_cols(b.lp);
    pb.coef = calloc(2 * (size_t)ncols + 2, sizeof *pb.coef);
    pb.cols = calloc((size_t)ncols + 1, sizeof *pb.cols);
    if (!pb.coef || !pb.cols)
      st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_plan: out of memory");
  }
  if (!st) {
    liveness(&pb);
    if (!solve_within_limit(&pb, b.lp)) st = no_plan_fits(&pb, b.lp);
  }
  int time_row = -1, at;
  if (!st && ((time_row = least_memory_at_best_time(b.lp, pb.mem_row)) < 0 ||
              !solve_within_limit(&pb, b.lp)))
    st = jx_error_set(JX_ERR_INTERNAL, "jx_auto_plan: the solver lost the plan it had found");
  if (!st) {
    out->time_s = glp_mip_row_val(b.lp, time_row) / US;
    out->memory_bytes = peak_held(&pb, b.lp, pb.scratch, &at);
    for (int i = 0; i < p->nin; i++) {
      const producer *d = &pb.def[p->in[i]];
      for (int k = 0; k < d->count; k++)
        if (glp_mip_col_val(b.lp, d->first_col + k) > 0.5) out->in_spec[i] = pb.cand[i][k];
    }
    for (int e = 0; e < p->neqns; e++)
      for (int k = 0; k < pb.st[e].n; k++)
        if (glp_mip_col_val(b.lp, pb.eqn_col[e] + k) > 0.5) out->strategy[e] = k;
    for (int v = 0; v < p->nvars; v++) out->spec[v] = jx_pspec_replicated(p->avals[v].shape.rank);
    for (int i = 0; i < p->nin; i++) out->spec[p->in[i]] = out->in_spec[i];
    for (int e = 0; e < p->neqns; e++)
      for (int o = 0; o < p->eqns[e].nout; o++)
        out->spec[p->eqns[e].out[o]] = pb.st[e].s[out->strategy[e]].prod[o];
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
  free(pb.def);
  free(pb.eqn_col);
  free(pb.made_at);
  free(pb.last_use);
  free(pb.scratch);
  free(pb.peak_rows);
  free(pb.coef);
  free(pb.cols);
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
