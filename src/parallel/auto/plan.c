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
  int mem_row;
} problem;

static const jx_pspec *produced(const problem *pb, const producer *d, int k) {
  return d->eqn < 0 ? &pb->cand[d->out][k] : &pb->st[d->eqn].s[k].prod[d->out];
}

static double block_bytes(const problem *pb, int v, const jx_pspec *s) {
  jx_aval a = pb->p->avals[v];
  a.shape = jx_pspec_local(pb->m, s, a.shape);
  return jx_aval_bytes(a);
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

/* The least memory any plan needs: the same program minimising memory. */
static double least_memory(glp_prob *lp, int mem_row) {
  if (objective_to_memory(lp, mem_row, 0) < 0) return -1;
  glp_set_row_bnds(lp, mem_row, GLP_FR, 0, 0);
  return solve(lp) ? glp_mip_obj_val(lp) : -1;
}

/* Of the plans as fast as the fastest (within the solver's tolerance), the
 * one holding least: an input its readers slice locally anyway then
 * arrives split. Returns the time row, or -1. */
static int least_memory_at_best_time(glp_prob *lp, int mem_row) {
  double best = glp_mip_obj_val(lp);
  int time_row = objective_to_memory(lp, mem_row, 1);
  if (time_row <= 0) return -1;
  glp_set_row_bnds(lp, time_row, GLP_UP, 0, best * (1 + 1e-7) + 1e-6);
  return solve(lp) ? time_row : -1;
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
  jx_status st = JX_OK;
  if (!pb.st || !pb.cand || !pb.ncand || !pb.def || !pb.eqn_col || !out->in_spec ||
      !out->strategy || !out->spec)
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
    glp_set_row_bnds(b.lp, pb.mem_row, GLP_UP, 0, memory_limit);
    if (!solve(b.lp)) {
      double least = least_memory(b.lp, pb.mem_row);
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_auto_plan: no plan of '%s' fits %.0f bytes per device; the smallest "
                        "needs %.0f bytes",
                        p->name ? p->name : "the program", memory_limit, least);
    }
  }
  int time_row = -1;
  if (!st && (time_row = least_memory_at_best_time(b.lp, pb.mem_row)) < 0)
    st = jx_error_set(JX_ERR_INTERNAL, "jx_auto_plan: the solver lost the plan it had found");
  if (!st) {
    out->time_s = glp_mip_row_val(b.lp, time_row) / US;
    out->memory_bytes = glp_mip_row_val(b.lp, pb.mem_row);
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
