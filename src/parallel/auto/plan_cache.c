/* The process's plans (plan_cache.h): a short list, newest first, keyed by
 * the program's hash, the mesh's shape, axis names and devices, the
 * figures, the fixed inputs' layouts, the outputs' aliases, the limit and
 * the planning time limit
 * (a plan the search stopped at one limit may not be the one a longer
 * search finds). */
#include "plan_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/env.h"
#include "../../base/error.h"
#include "../../base/hash.h"

enum { KEPT = 32 };

typedef struct {
  uint64_t key;
  int nin, neqns, nvars;
  jx_auto_plan plan;
} kept_plan;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kept_plan kept[KEPT];
static int nkept;
static atomic_llong solves;

int64_t jx_auto_plan_solves(void) { return (int64_t)atomic_load(&solves); }

static uint64_t hash_bytes(uint64_t h, const void *b, size_t n) {
  const unsigned char *c = b;
  for (size_t k = 0; k < n; k++) h = jx_hash_u64(h, c[k]);
  return h;
}

static uint64_t key_of(const jx_comm_model *cm, const jx_mesh *m, const jx_program *p,
                       const jx_pspec *const *fixed, const int *alias, double limit) {
  uint64_t h = jx_hash_u64(JX_HASH_SEED, jx_program_hash(p));
  h = jx_hash_u64(h, (uint64_t)m->ndim);
  for (int a = 0; a < m->ndim; a++) {
    h = jx_hash_u64(h, (uint64_t)m->size[a]);
    h = jx_hash_str(h, m->name[a]);
  }
  for (int d = 0; d < m->ndev; d++) h = jx_hash_u64(h, (uint64_t)m->device[d]);
  h = hash_bytes(h, &cm->flops_per_s, sizeof cm->flops_per_s);
  h = hash_bytes(h, &cm->mem_bytes_per_s, sizeof cm->mem_bytes_per_s);
  h = hash_bytes(h, cm->link, sizeof cm->link[0] * (size_t)cm->naxes);
  h = hash_bytes(h, &limit, sizeof limit);
  const char *time_limit = jx_env_string("JX_PLAN_TIME_LIMIT");
  h = jx_hash_str(h, time_limit ? time_limit : "");
  for (int i = 0; i < p->nin; i++) {
    const jx_pspec *f = fixed ? fixed[i] : NULL;
    h = jx_hash_u64(h, f != NULL);
    if (f) {
      h = jx_hash_u64(h, (uint64_t)f->rank);
      for (int d = 0; d < f->rank; d++) {
        h = jx_hash_u64(h, (uint64_t)f->n[d]);
        h = hash_bytes(h, f->ax[d], (size_t)f->n[d]);
      }
    }
  }
  for (int o = 0; o < p->nout; o++) h = jx_hash_u64(h, (uint64_t)(alias ? alias[o] + 1 : 0));
  return h;
}

static jx_status copy_plan(const jx_auto_plan *a, int nin, int neqns, int nvars, jx_auto_plan *b) {
  *b = *a;
  b->in_spec = NULL;
  b->strategy = NULL;
  b->spec = NULL;
  b->in_spec = malloc(sizeof *b->in_spec * (size_t)(nin + 1));
  b->strategy = malloc(sizeof *b->strategy * (size_t)(neqns + 1));
  b->spec = malloc(sizeof *b->spec * (size_t)(nvars + 1));
  if (!b->in_spec || !b->strategy || !b->spec) {
    jx_auto_plan_free(b);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_plan: out of memory");
  }
  memcpy(b->in_spec, a->in_spec, sizeof *b->in_spec * (size_t)nin);
  memcpy(b->strategy, a->strategy, sizeof *b->strategy * (size_t)neqns);
  memcpy(b->spec, a->spec, sizeof *b->spec * (size_t)nvars);
  return JX_OK;
}

jx_status jx_auto_plan_cached(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                              const jx_pspec *const *fixed, const int *alias, double memory_limit,
                              jx_auto_plan *out) {
  uint64_t key = key_of(cm, m, p, fixed, alias, memory_limit);
  jx_status st = JX_OK;
  int found = 0;
  pthread_mutex_lock(&lock);
  for (int k = 0; k < nkept && !found; k++)
    if (kept[k].key == key && kept[k].nin == p->nin && kept[k].neqns == p->neqns &&
        kept[k].nvars == p->nvars) {
      found = 1;
      st = copy_plan(&kept[k].plan, p->nin, p->neqns, p->nvars, out);
    }
  pthread_mutex_unlock(&lock);
  if (found) return st;
  st = jx_auto_plan_solve_aliased(cm, m, p, fixed, alias, memory_limit, out);
  if (st) return st;
  atomic_fetch_add(&solves, 1);
  kept_plan fresh = {.key = key, .nin = p->nin, .neqns = p->neqns, .nvars = p->nvars};
  if (copy_plan(out, p->nin, p->neqns, p->nvars, &fresh.plan)) {
    jx_clear_error(); /* not kept: the plan itself is fine */
    return JX_OK;
  }
  pthread_mutex_lock(&lock);
  if (nkept == KEPT) jx_auto_plan_free(&kept[--nkept].plan); /* the oldest goes */
  memmove(kept + 1, kept, sizeof *kept * (size_t)nkept);
  kept[0] = fresh;
  nkept++;
  pthread_mutex_unlock(&lock);
  return JX_OK;
}
