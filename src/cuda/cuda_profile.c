#include "cuda_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "cuda_driver.h"

enum { SHOWN = 40 }; /* labels in the report */

struct jx_cuda_step_profile {
  char program[64];
  int nsteps, runs;
  int dropped_first; /* the first run's times were left out */
  CUevent *events;   /* nsteps + 1 boundaries, made at the first mark */
  double *ms;        /* per step, summed over runs */
  char (*labels)[JX_CUDA_PROFILE_LABEL];
};

jx_cuda_step_profile *jx_cuda_step_profile_create(const char *program, int nsteps) {
  if (!jx_env_flag("JX_PROFILE_STEPS") || nsteps <= 0) return NULL;
  jx_cuda_step_profile *pf = calloc(1, sizeof *pf);
  if (!pf) return NULL;
  pf->nsteps = nsteps;
  pf->events = calloc((size_t)nsteps + 1, sizeof *pf->events);
  pf->ms = calloc((size_t)nsteps, sizeof *pf->ms);
  pf->labels = calloc((size_t)nsteps, sizeof *pf->labels);
  if (!pf->events || !pf->ms || !pf->labels) {
    jx_cuda_step_profile_free(pf);
    return NULL;
  }
  snprintf(pf->program, sizeof pf->program, "%s", program ? program : "program");
  return pf;
}

void jx_cuda_step_profile_label(jx_cuda_step_profile *pf, int k, const char *label) {
  if (pf && k >= 0 && k < pf->nsteps) snprintf(pf->labels[k], JX_CUDA_PROFILE_LABEL, "%s", label);
}

jx_status jx_cuda_step_profile_mark(jx_cuda_step_profile *pf, jx_cuda_device *d, int b) {
  if (!pf || b < 0 || b > pf->nsteps) return JX_OK;
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  int dev = d->info.ordinal;
  jx_status st = JX_OK;
  if (!pf->events[b]) st = jx_cuda_check(cu->EventCreate(&pf->events[b], 0), "cuEventCreate", dev);
  if (!st) st = jx_cuda_check(cu->EventRecord(pf->events[b], d->compute), "cuEventRecord", dev);
  return st;
}

jx_status jx_cuda_step_profile_collect(jx_cuda_step_profile *pf, jx_cuda_device *d) {
  if (!pf || !pf->events[pf->nsteps]) return JX_OK;
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  int dev = d->info.ordinal;
  jx_status st =
      jx_cuda_check(cu->EventSynchronize(pf->events[pf->nsteps]), "cuEventSynchronize", dev);
  /* the first run holds one-time work (modules loaded, GEMM candidates
   * timed): a second run's times replace it */
  if (pf->runs == 1 && !pf->dropped_first) {
    memset(pf->ms, 0, sizeof *pf->ms * (size_t)pf->nsteps);
    pf->runs = 0;
    pf->dropped_first = 1;
  }
  for (int k = 0; k < pf->nsteps && !st; k++) {
    float ms = 0;
    if (pf->events[k] && pf->events[k + 1])
      st = jx_cuda_check(cu->EventElapsedTime(&ms, pf->events[k], pf->events[k + 1]),
                         "cuEventElapsedTime", dev);
    pf->ms[k] += ms;
  }
  if (!st) pf->runs++;
  return st;
}

typedef struct {
  const char *label;
  double ms;
  int steps;
} label_total;

static int by_time(const void *a, const void *b) {
  double x = ((const label_total *)a)->ms, y = ((const label_total *)b)->ms;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The steps summed per label (identical layers' steps share one), slowest
 * first. */
static void report(const jx_cuda_step_profile *pf) {
  double total = 0;
  for (int k = 0; k < pf->nsteps; k++) total += pf->ms[k];
  label_total *t = calloc((size_t)pf->nsteps, sizeof *t);
  if (!t || total <= 0) {
    free(t);
    return;
  }
  int n = 0;
  for (int k = 0; k < pf->nsteps; k++) {
    if (pf->ms[k] <= 0) continue;
    int i = 0;
    while (i < n && strcmp(t[i].label, pf->labels[k])) i++;
    if (i == n) t[n++] = (label_total){pf->labels[k], 0, 0};
    t[i].ms += pf->ms[k];
    t[i].steps++;
  }
  qsort(t, (size_t)n, sizeof *t, by_time);
  fprintf(stderr, "jx: %s on CUDA: %d runs%s, %.3f ms per run between step boundaries\n",
          pf->program, pf->runs, pf->dropped_first ? " after the first" : "", total / pf->runs);
  for (int i = 0; i < n && i < SHOWN; i++)
    fprintf(stderr, "  %-64s %4d steps %8.3f ms %5.1f%%\n", t[i].label, t[i].steps,
            t[i].ms / pf->runs, 100 * t[i].ms / total);
  /* by kind: a label's first word ("kernel", "gemm+bias+gelu", "softmax") */
  label_total *kinds = calloc((size_t)n, sizeof *kinds);
  int nk = 0;
  for (int i = 0; kinds && i < n; i++) {
    size_t len = strcspn(t[i].label, " ");
    int j = 0;
    while (j < nk && (strncmp(kinds[j].label, t[i].label, len) ||
                      (kinds[j].label[len] != ' ' && kinds[j].label[len] != 0)))
      j++;
    if (j == nk) kinds[nk++] = (label_total){t[i].label, 0, 0};
    kinds[j].ms += t[i].ms;
    kinds[j].steps += t[i].steps;
  }
  if (kinds) qsort(kinds, (size_t)nk, sizeof *kinds, by_time);
  for (int j = 0; j < nk; j++)
    fprintf(stderr, "  by kind: %-.*s %d steps %.3f ms %.1f%%\n", (int)strcspn(kinds[j].label, " "),
            kinds[j].label, kinds[j].steps, kinds[j].ms / pf->runs, 100 * kinds[j].ms / total);
  free(kinds);
  free(t);
}

void jx_cuda_step_profile_free(jx_cuda_step_profile *pf) {
  if (!pf) return;
  if (pf->runs && pf->ms && pf->labels) report(pf);
  const jx_cuda_driver_api *cu = pf->events ? jx_cuda_driver() : NULL;
  for (int b = 0; cu && b <= pf->nsteps; b++)
    if (pf->events[b]) cu->EventDestroy(pf->events[b]);
  free(pf->events);
  free(pf->ms);
  free(pf->labels);
  free(pf);
}
