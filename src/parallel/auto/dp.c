/* The layer-chain dynamic program (dp.h). */
#include "dp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/error.h"
#include "../../compile/simplify.h"
#include "../partition.h"
#include "report.h"

enum { STEPS = 1024, RETRIES = 4, MAX_LAYERS = 64 };

jx_status jx_auto_layouts_estimate(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                   const jx_pspec *in_spec, const jx_pspec *out_spec,
                                   const jx_pspec *spec, double *time_s, double *peak_bytes) {
  jx_pspec *all = malloc(sizeof *all * (size_t)(p->nvars + p->nout + 1));
  jx_sharding **in = calloc((size_t)p->nin + 1, sizeof *in);
  jx_sharding **out = calloc((size_t)p->nout + 1, sizeof *out);
  jx_status st =
      all && in && out ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_dp: out of memory");
  for (int i = 0; i < p->nin && !st; i++)
    if (!(in[i] = jx_pspec_sharding(m, &in_spec[i]))) st = jx_last_status();
  for (int o = 0; out_spec && o < p->nout && !st; o++)
    if (!(out[o] = jx_pspec_sharding(m, &out_spec[o]))) st = jx_last_status();
  if (!st && spec)
    memcpy(all, spec, sizeof *all * (size_t)p->nvars);
  else if (!st)
    st = jx_propagate(m, p, in, out_spec ? out : NULL, all);
  for (int o = 0; o < p->nout && !st; o++)
    all[p->nvars + o] = out_spec ? out_spec[o] : all[p->out[o]];
  jx_program *d = st ? NULL : jx_partition(m, p, all, all + p->nvars);
  jx_program *s = d ? jx_simplify(d) : NULL;
  if (!st && !s) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  if (!st) {
    jx_sharding_estimate e;
    jx_sharding_estimate_device(cm, m, s, &e);
    *time_s = e.step_s;
    *peak_bytes = e.peak_bytes;
  }
  jx_program_release(s);
  jx_program_release(d);
  for (int i = 0; in && i < p->nin; i++) jx_sharding_release(in[i]);
  for (int o = 0; out && o < p->nout; o++) jx_sharding_release(out[o]);
  free(in);
  free(out);
  free(all);
  return st;
}

typedef struct {
  const jx_comm_model *cm;
  jx_mesh *m;
  const jx_program *p;
  const jx_dp_problem *dp;
  jx_pspec *in_spec, *out_spec;
  int evaluations;
} pricer;

/* The priced time and peak of the assignment a (a choice per layer). */
static jx_status price(pricer *pr, const int *a, double *time_s, double *peak) {
  const jx_program *p = pr->p;
  const jx_dp_problem *dp = pr->dp;
  for (int i = 0; i < p->nin; i++) {
    int l = dp->layer[i];
    pr->in_spec[i] = dp->layout[i][l < 0 ? 0 : a[l]];
  }
  for (int o = 0; o < p->nout; o++)
    if (dp->out_like[o] >= 0) pr->out_spec[o] = pr->in_spec[dp->out_like[o]];
  /* a free output: propagation's layout (no out_spec entry wanted) */
  int any_free = 0;
  for (int o = 0; o < p->nout; o++) any_free |= dp->out_like[o] < 0;
  pr->evaluations++;
  if (!any_free)
    return jx_auto_layouts_estimate(pr->cm, pr->m, p, pr->in_spec, pr->out_spec, NULL, time_s,
                                    peak);
  /* outputs the caller leaves free take propagation's layout: propagate
   * first without wishes, then keep those */
  jx_pspec *all = malloc(sizeof *all * (size_t)(p->nvars + 1));
  jx_sharding **in = calloc((size_t)p->nin + 1, sizeof *in);
  jx_status st =
      all && in ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_dp: out of memory");
  for (int i = 0; i < p->nin && !st; i++)
    if (!(in[i] = jx_pspec_sharding(pr->m, &pr->in_spec[i]))) st = jx_last_status();
  if (!st) st = jx_propagate(pr->m, p, in, NULL, all);
  for (int o = 0; o < p->nout && !st; o++)
    if (dp->out_like[o] < 0) pr->out_spec[o] = all[p->out[o]];
  for (int i = 0; in && i < p->nin; i++) jx_sharding_release(in[i]);
  free(in);
  free(all);
  return st ? st
            : jx_auto_layouts_estimate(pr->cm, pr->m, p, pr->in_spec, pr->out_spec, NULL, time_s,
                                       peak);
}

/* The modelled terms: u[l][k], m[l][k] (one layer changed from the base),
 * w[l][k][j] (layers l and l+1 changed, beyond their own). */
typedef struct {
  double base_t, base_m;
  double u[MAX_LAYERS][JX_DP_MAX_CHOICES], mem[MAX_LAYERS][JX_DP_MAX_CHOICES];
  double w[MAX_LAYERS][JX_DP_MAX_CHOICES][JX_DP_MAX_CHOICES];
} terms;

static double model_time(const terms *t, int n, const int *a) {
  double s = t->base_t;
  for (int l = 0; l < n; l++) s += t->u[l][a[l]] + (l + 1 < n ? t->w[l][a[l]][a[l + 1]] : 0);
  return s;
}

/* The assignment of least modelled time whose modelled peak is at most
 * room above the base's; 0 when none. */
static int chain(const terms *t, const jx_dp_problem *dp, double room, int *best) {
  int n = dp->nlayers;
  double lo_sum = 0, lo[MAX_LAYERS];
  for (int l = 0; l < n; l++) {
    lo[l] = INFINITY;
    for (int k = 0; k < dp->nchoices[l]; k++) lo[l] = fmin(lo[l], t->mem[l][k]);
    lo_sum += lo[l];
  }
  double free_room = room - lo_sum; /* what the layers may add above their smallest */
  if (free_room < 0) return 0;
  double step = free_room > 0 ? free_room / STEPS : 1;
  /* cost[l][k][b]: least time of layers 0..l with l at choice k, b steps used */
  size_t per = (size_t)JX_DP_MAX_CHOICES * (STEPS + 1);
  double *cost = malloc(sizeof *cost * per * (size_t)n);
  int *from = malloc(sizeof *from * per * (size_t)n);
  if (!cost || !from) {
    free(cost);
    free(from);
    return -1;
  }
  for (size_t k = 0; k < per * (size_t)n; k++) cost[k] = INFINITY;
#define AT(l, k, b) ((size_t)(l)*per + (size_t)(k) * (STEPS + 1) + (size_t)(b))
  for (int l = 0; l < n; l++)
    for (int k = 0; k < dp->nchoices[l]; k++) {
      int need = (int)ceil((t->mem[l][k] - lo[l]) / step - 1e-9);
      if (need > STEPS) continue;
      if (l == 0) {
        cost[AT(0, k, need)] = t->u[0][k];
        continue;
      }
      for (int j = 0; j < dp->nchoices[l - 1]; j++)
        for (int b = 0; b + need <= STEPS; b++) {
          double c = cost[AT(l - 1, j, b)];
          if (c == INFINITY) continue;
          c += t->u[l][k] + t->w[l - 1][j][k];
          if (c < cost[AT(l, k, b + need)]) {
            cost[AT(l, k, b + need)] = c;
            from[AT(l, k, b + need)] = j * (STEPS + 1) + b;
          }
        }
    }
  int bk = -1, bb = -1;
  for (int k = 0; k < dp->nchoices[n - 1]; k++)
    for (int b = 0; b <= STEPS; b++)
      if (cost[AT(n - 1, k, b)] < INFINITY &&
          (bk < 0 || cost[AT(n - 1, k, b)] < cost[AT(n - 1, bk, bb)]))
        bk = k, bb = b;
  int found = bk >= 0;
  for (int l = n - 1; found && l >= 0; l--) {
    best[l] = bk;
    if (l) {
      int f = from[AT(l, bk, bb)];
      bk = f / (STEPS + 1);
      bb = f % (STEPS + 1);
    }
  }
#undef AT
  free(cost);
  free(from);
  return found;
}

jx_status jx_auto_dp_solve(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                           const jx_dp_problem *dp, double memory_limit, jx_dp_plan *out) {
  memset(out, 0, sizeof *out);
  int n = dp->nlayers;
  if (n < 1 || n > MAX_LAYERS)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_auto_dp: %d layers; 1 to %d are planned", n,
                        MAX_LAYERS);
  for (int l = 0; l < n; l++)
    if (dp->nchoices[l] < 1 || dp->nchoices[l] > JX_DP_MAX_CHOICES)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "jx_auto_dp: layer %d has %d choices; 1 to %d are planned", l,
                          dp->nchoices[l], JX_DP_MAX_CHOICES);
  terms *t = calloc(1, sizeof *t);
  pricer pr = {cm,
               m,
               p,
               dp,
               calloc((size_t)p->nin + 1, sizeof(jx_pspec)),
               calloc((size_t)p->nout + 1, sizeof(jx_pspec)),
               0};
  jx_status st = t && pr.in_spec && pr.out_spec
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_dp: out of memory");
  int a[MAX_LAYERS] = {0};
  if (!st) st = price(&pr, a, &t->base_t, &t->base_m);
  for (int l = 0; l < n && !st; l++)
    for (int k = 1; k < dp->nchoices[l] && !st; k++) {
      a[l] = k;
      double tt, mm;
      st = price(&pr, a, &tt, &mm);
      t->u[l][k] = tt - t->base_t;
      t->mem[l][k] = mm - t->base_m;
      a[l] = 0;
    }
  for (int l = 0; l + 1 < n && !st; l++)
    for (int k = 1; k < dp->nchoices[l] && !st; k++)
      for (int j = 1; j < dp->nchoices[l + 1] && !st; j++) {
        a[l] = k, a[l + 1] = j;
        double tt, mm;
        st = price(&pr, a, &tt, &mm);
        t->w[l][k][j] = tt - t->base_t - t->u[l][k] - t->u[l + 1][j];
        a[l] = a[l + 1] = 0;
      }
  double room = memory_limit - (t ? t->base_m : 0), over = 0;
  for (int r = 0; r <= RETRIES && !st; r++) {
    int found = chain(t, dp, room, out->choice);
    if (found < 0) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_dp: out of memory");
    if (!found && !r) {
      double least = t->base_m;
      for (int l = 0; l < n; l++) {
        double lo = INFINITY;
        for (int k = 0; k < dp->nchoices[l]; k++) lo = fmin(lo, t->mem[l][k]);
        least += lo;
      }
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_auto_dp: no choice of the %d layers fits %.0f bytes per device; the "
                        "smallest modelled peak is %.0f bytes",
                        n, memory_limit, least);
    } else if (!found)
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_auto_dp: no choice of the %d layers fits %.0f bytes per device: the "
                        "plans the model fits hold up to %.0f bytes more when priced whole",
                        n, memory_limit, over);
    if (st) break;
    out->model_time_s = model_time(t, n, out->choice);
    st = price(&pr, out->choice, &out->time_s, &out->peak_bytes);
    if (st || out->peak_bytes <= memory_limit) break;
    /* the model was short by this much: cut the room by it, more each try */
    over = fmax(over, out->peak_bytes - memory_limit);
    room -= (r + 1) * (out->peak_bytes - memory_limit);
    if (r == RETRIES)
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_auto_dp: the plan found holds %.0f bytes per device, over the limit "
                        "of %.0f, after %d tries",
                        out->peak_bytes, memory_limit, RETRIES + 1);
  }
  out->evaluations = pr.evaluations;
  free(t);
  free(pr.in_spec);
  free(pr.out_spec);
  return st;
}
