/* The plan's report and estimate (report.h, jx_sharding_plan_print): the
 * per-device program's flops and peak as jx_fn_cost counts them, and its
 * collectives priced by the alpha-beta model. */
#include "report.h"

#include <stdlib.h>
#include <string.h>

#include "../../base/error.h"
#include "../../compile/cost.h"
#include "../../ir/axis_env.h"
#include "../../trace/fn.h"
#include "../collective.h"
#include "machine_model.h"

/* The figures a plan on a mesh this process cannot measure alone (devices
 * of several processes) is made with: 10 us per message, 1 GB/s per link,
 * 1 GFLOP/s per device. */
#define FALLBACK_ALPHA_S     1e-5
#define FALLBACK_BYTES_PER_S 1e9
#define FALLBACK_FLOPS_PER_S 1e9

void jx_plan_figures(jx_comm_model *cm, jx_mesh *m) {
  if (jx_comm_model_measured(cm, m)) {
    jx_clear_error();
    jx_comm_model_uniform(cm, m, FALLBACK_ALPHA_S, FALLBACK_BYTES_PER_S, FALLBACK_FLOPS_PER_S);
  }
}

/* ---- collectives of a per-device program ---- */

enum { KINDS_SHOWN = 64 };

typedef struct {
  const char *prim;
  jx_coll_kind kind;
  uint32_t axes;
  int count;
  double bytes, time_s; /* summed */
} coll_row;

typedef struct {
  const jx_comm_model *cm;
  const jx_mesh *m;
  coll_row rows[KINDS_SHOWN];
  int nrows, count;
  double time_s;
} coll_tally;

static uint32_t axes_of(const jx_mesh *m, const jx_eqn *e) {
  uint32_t mask = 0;
  for (int k = 0; k < e->params.l[0].n; k++) {
    const char *name = jx_axis_name((int)e->params.l[0].v[k]);
    for (int a = 0; name && a < m->ndim; a++)
      if (!strcmp(m->name[a], name)) mask |= 1u << a;
  }
  return mask;
}

/* The model's kind of a collective primitive and the bytes its formula
 * takes (comm_model.h), or 0 when e is not a collective. */
static int collective_of(const jx_program *p, const jx_eqn *e, jx_coll_kind *kind, double *bytes) {
  const jx_prim *q = e->prim;
  double in = jx_aval_bytes(p->avals[e->in[0]]), out = jx_aval_bytes(p->avals[e->out[0]]);
  if (q == &jx_prim_psum || q == &jx_prim_pmax || q == &jx_prim_pmin)
    *kind = JX_COLL_ALL_REDUCE, *bytes = in;
  else if (q == &jx_prim_all_gather)
    *kind = JX_COLL_ALL_GATHER, *bytes = out;
  else if (q == &jx_prim_psum_scatter)
    *kind = JX_COLL_REDUCE_SCATTER, *bytes = in;
  else if (q == &jx_prim_all_to_all)
    *kind = JX_COLL_ALL_TO_ALL, *bytes = in;
  else if (q == &jx_prim_ppermute)
    *kind = JX_COLL_PERMUTE, *bytes = in;
  else
    return 0;
  return 1;
}

static double lead(const jx_shape *s, int dim) {
  double v = 1;
  for (int k = 0; k < dim && k < s->rank; k++) v *= (double)s->dims[k];
  return v;
}

/* The bytes a collective over a dimension other than the first reorders on
 * its device (the engine exchanges contiguous blocks: all_gather's and
 * psum_scatter's blocks are put in place by a local transpose, all_to_all's
 * sent and received ones each), priced beside the alpha-beta time at the
 * reorder's measured rate (comm_model.h), else at the bandwidth. */
static double reorder_bytes(const jx_program *p, const jx_eqn *e, double n) {
  const jx_prim *q = e->prim;
  jx_shape in = p->avals[e->in[0]].shape;
  double bin = jx_aval_bytes(p->avals[e->in[0]]), bout = jx_aval_bytes(p->avals[e->out[0]]);
  int d = (int)e->params.i[0];
  if (q == &jx_prim_all_gather) return lead(&in, d) > 1 ? bout : 0;
  if (q == &jx_prim_psum_scatter) return lead(&in, d) > 1 ? bin : 0;
  if (q != &jx_prim_all_to_all || d < 0 || d >= in.rank) return 0;
  jx_shape chunk = in;
  chunk.dims[d] = n > 0 ? (int64_t)((double)chunk.dims[d] / n) : chunk.dims[d];
  return (lead(&in, d) > 1 ? bin : 0) + (lead(&chunk, (int)e->params.i[1]) > 1 ? bin : 0);
}

static double group_size(const jx_mesh *m, uint32_t axes) {
  double n = 1;
  for (int a = 0; a < m->ndim; a++)
    if (axes & (1u << a)) n *= (double)m->size[a];
  return n;
}

/* Every collective of p and of the programs nested in it (a loop body's
 * counted once). */
static void tally(coll_tally *t, const jx_program *p) {
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    for (int s = 0; s < e->nsub; s++) tally(t, e->sub[s]);
    jx_coll_kind kind;
    double bytes;
    if (!e->nin || !e->nout || !collective_of(p, e, &kind, &bytes)) continue;
    uint32_t axes = axes_of(t->m, e);
    double time = jx_comm_model_time(t->cm, kind, axes, bytes);
    if (group_size(t->m, axes) > 1) {
      double moved = reorder_bytes(p, e, group_size(t->m, axes));
      time += t->cm->reorder.s_per_byte > 0 ? jx_byte_rate_time(&t->cm->reorder, moved)
                                            : jx_bytes_time(t->cm, moved);
    }
    t->count++;
    t->time_s += time;
    int r = 0;
    while (r < t->nrows && (t->rows[r].prim != e->prim->name || t->rows[r].axes != axes)) r++;
    if (r == t->nrows && t->nrows == KINDS_SHOWN) continue; /* counted, not listed */
    if (r == t->nrows) t->rows[t->nrows++] = (coll_row){e->prim->name, kind, axes, 0, 0, 0};
    t->rows[r].count++;
    t->rows[r].bytes += bytes;
    t->rows[r].time_s += time;
  }
}

void jx_sharding_estimate_device(const jx_comm_model *cm, const jx_mesh *m,
                                 const jx_program *device, jx_sharding_estimate *out) {
  jx_cost c = {0};
  jx_program_cost(device, &c);
  coll_tally t = {.cm = cm, .m = m};
  tally(&t, device);
  *out = (jx_sharding_estimate){.compute_s = jx_compute_time(cm, device),
                                .comm_s = t.time_s,
                                .flops = c.flops,
                                .peak_bytes = c.peak_bytes_per_device,
                                .collectives = t.count};
  double busy = out->compute_s + out->comm_s;
  out->idle_s = cm->idle_share > 0 ? busy * cm->idle_share / (1 - cm->idle_share) : 0;
  out->step_s = busy + out->idle_s;
}

/* ---- the report ---- */

enum { ACTIVATIONS_SHOWN = 8 };

static const char *axes_text(const jx_mesh *m, uint32_t axes, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (int a = 0; a < m->ndim && len < n; a++)
    if (axes & (1u << a))
      len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? "," : "", m->name[a]);
  return buf;
}

static void layout_line(FILE *f, const char *what, const jx_sharded_view *v, int var) {
  char av[JX_AVAL_STR_CAP], spec[JX_SPEC_CAP];
  jx_aval a = v->global->avals[var];
  jx_aval local = a;
  local.shape = jx_pspec_local(v->mesh, &v->spec[var], a.shape);
  const char *s = jx_pspec_str(v->mesh, &v->spec[var], spec);
  fprintf(f, "  %-30s %-20s %-16s %12.0f bytes per device\n", what,
          jx_aval_str(a.dtype, a.shape, av), jx_pspec_sharded(&v->spec[var]) ? s : "replicated",
          jx_aval_bytes(local));
}

static void estimate_line(FILE *f, const char *name, const jx_sharding_estimate *e) {
  fprintf(f, "  %-30s %.3g s per call (compute %.3g s, communication %.3g s in %d collectives",
          name, e->step_s, e->compute_s, e->comm_s, e->collectives);
  if (e->idle_s > 0) fprintf(f, ", cores idle %.3g s", e->idle_s);
  fprintf(f, "), peak %.0f bytes per device\n", e->peak_bytes);
}

void jx_sharding_report(FILE *f, const char *name, const jx_sharded_view *v,
                        const jx_comm_model *cm) {
  const jx_program *p = v->global;
  char mesh[512], buf[256];
  fprintf(f, "%s of '%s' on the mesh (%s)\n", v->planned ? "plan" : "layouts", name,
          jx_mesh_text(v->mesh, 1, mesh, sizeof mesh));
  if (v->planned && v->plan_stopped)
    fprintf(f,
            "  search stopped at the planning time limit (%g s, JX_PLAN_TIME_LIMIT): the best plan "
            "found, within %.2g %% of the optimum's bound\n",
            v->plan_time_limit_s, 100 * v->plan_gap);
  else if (v->planned)
    fprintf(f, "  search complete: within %.2g %% of the optimum's bound\n", 100 * v->plan_gap);
  for (int i = 0; i < p->nin; i++) {
    snprintf(buf, sizeof buf, "input %d", i);
    layout_line(f, buf, v, p->in[i]);
  }
  /* the largest activations: results of equations, by global size */
  int shown[ACTIVATIONS_SHOWN], nshown = 0;
  for (int pick = 0; pick < ACTIVATIONS_SHOWN; pick++) {
    int best = -1, best_e = -1;
    double best_b = 0;
    for (int e = 0; e < p->neqns; e++)
      for (int o = 0; o < p->eqns[e].nout; o++) {
        int var = p->eqns[e].out[o], taken = 0;
        for (int k = 0; k < nshown; k++) taken |= shown[k] == var;
        double b = jx_aval_bytes(p->avals[var]);
        if (!taken && b > best_b) best = var, best_e = e, best_b = b;
      }
    if (best < 0) break;
    shown[nshown++] = best;
    snprintf(buf, sizeof buf, "activation (%s)", p->eqns[best_e].prim->name);
    layout_line(f, buf, v, best);
  }
  coll_tally t = {.cm = cm, .m = v->mesh};
  tally(&t, v->device);
  for (int r = 0; r < t.nrows; r++) {
    char axes[256];
    fprintf(f, "  %-30s over %-14s %4d x, %12.0f bytes, %.3g s\n", t.rows[r].prim,
            axes_text(v->mesh, t.rows[r].axes, axes, sizeof axes), t.rows[r].count, t.rows[r].bytes,
            t.rows[r].time_s);
  }
  jx_sharding_estimate e;
  jx_sharding_estimate_device(cm, v->mesh, v->device, &e);
  estimate_line(f, "estimated", &e);
}

/* ---- public ---- */

static jx_status view_of(jx_fn *f, jx_array *const *in, jx_sharded_view *v) {
  if (!f || !in) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "NULL %s", f ? "example_in" : "fn");
  jx_aval *av = malloc(sizeof *av * (size_t)(f->nin + 1));
  if (!av) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory");
  jx_status st = JX_OK;
  for (int i = 0; i < f->nin && !st; i++) {
    if (!in[i] || in[i]->poisoned)
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT, "example_in[%d] is %s", i,
                        in[i] ? "poisoned" : "NULL");
    else
      av[i] = (jx_aval){in[i]->dtype, in[i]->weak, in[i]->shape, 0};
  }
  if (!st) st = jx_sharded_jit_view(f, av, v);
  free(av);
  return st;
}

jx_status jx_sharding_estimate_of(jx_fn *f, jx_array *const *example_in,
                                  jx_sharding_estimate *out) {
  jx_sharded_view v;
  jx_status st = view_of(f, example_in, &v);
  if (st) return st;
  jx_comm_model cm;
  jx_plan_figures(&cm, v.mesh);
  jx_sharding_estimate_device(&cm, v.mesh, v.device, out);
  jx_sharded_view_free(&v);
  return JX_OK;
}

jx_status jx_sharding_plan_print(jx_fn *f, jx_array *const *example_in, jx_fn *compare,
                                 const char *compare_name, FILE *out) {
  if (!out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_sharding_plan_print: NULL out");
  jx_sharded_view v;
  jx_status st = view_of(f, example_in, &v);
  if (st) return st;
  jx_comm_model cm;
  jx_plan_figures(&cm, v.mesh);
  jx_sharding_report(out, jx_fn_name(f), &v, &cm);
  jx_sharded_view_free(&v);
  if (compare) {
    st = view_of(compare, example_in, &v);
    if (st) return st;
    jx_sharding_estimate e;
    jx_plan_figures(&cm, v.mesh);
    jx_sharding_estimate_device(&cm, v.mesh, v.device, &e);
    estimate_line(out, compare_name ? compare_name : jx_fn_name(compare), &e);
    jx_sharded_view_free(&v);
  }
  return JX_OK;
}

jx_status jx_sharding_plan_figures(jx_mesh *m, const double *alpha_s, const double *bytes_per_s,
                                   double flops_per_s) {
  if (!m || !alpha_s || !bytes_per_s)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_sharding_plan_figures: NULL %s",
                        !m         ? "mesh"
                        : !alpha_s ? "alpha_s"
                                   : "bytes_per_s");
  if (!(flops_per_s > 0))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_sharding_plan_figures: flops_per_s is %g; it must be positive",
                        flops_per_s);
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, m, 0, 1, flops_per_s);
  for (int a = 0; a < m->ndim; a++) {
    if (!(alpha_s[a] >= 0) || !(bytes_per_s[a] > 0))
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "jx_sharding_plan_figures: mesh axis '%s' has alpha %g s and %g bytes/s; "
                          "alpha must be 0 or more and the bandwidth positive",
                          m->name[a], alpha_s[a], bytes_per_s[a]);
    cm.link[a] = jx_link_uniform(alpha_s[a], 1 / bytes_per_s[a]);
  }
  jx_comm_model_keep(m, &cm);
  return JX_OK;
}
