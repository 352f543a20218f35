#include "vma.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/prims.h"
#include "../ir/axis_env.h"
#include "dispatch.h"

enum { MAX_SET = 2 * JX_MAX_RANK };

/* The sets, interned: sets[k] is number k + 1, its ids ascending. */
typedef struct {
  int n;
  int64_t id[MAX_SET];
} axis_set;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static axis_set *sets;
static int nsets, cap_sets;

static int intern(const axis_set *s) {
  if (!s->n) return 0;
  pthread_mutex_lock(&lock);
  int found = 0;
  for (int k = 0; k < nsets && !found; k++)
    if (sets[k].n == s->n && !memcmp(sets[k].id, s->id, sizeof *s->id * (size_t)s->n))
      found = k + 1;
  if (!found && nsets == cap_sets) {
    int cap = cap_sets ? 2 * cap_sets : 16;
    axis_set *t = realloc(sets, sizeof *t * (size_t)cap);
    if (t) {
      sets = t;
      cap_sets = cap;
    }
  }
  if (!found && nsets < cap_sets) {
    sets[nsets] = *s;
    found = ++nsets;
  }
  pthread_mutex_unlock(&lock);
  if (!found) jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory recording varying axes");
  return found;
}

static axis_set lookup(int a) {
  axis_set s = {0};
  if (a <= 0) return s;
  pthread_mutex_lock(&lock);
  if (a <= nsets) s = sets[a - 1];
  pthread_mutex_unlock(&lock);
  return s;
}

static int has(const axis_set *s, int64_t id) {
  for (int k = 0; k < s->n; k++)
    if (s->id[k] == id) return 1;
  return 0;
}

/* Inserts id keeping the ids ascending. */
static void insert(axis_set *s, int64_t id) {
  if (has(s, id) || s->n == MAX_SET) return;
  int k = s->n++;
  for (; k > 0 && s->id[k - 1] > id; k--) s->id[k] = s->id[k - 1];
  s->id[k] = id;
}

int jx_vma_axes(int a, int64_t *ids) {
  axis_set s = lookup(a);
  int n = s.n < JX_MAX_RANK ? s.n : JX_MAX_RANK;
  memcpy(ids, s.id, sizeof *ids * (size_t)n);
  return n;
}

int jx_vma_add(int a, int n, const int64_t *ids) {
  axis_set s = lookup(a);
  int before = s.n;
  for (int k = 0; k < n; k++)
    if (jx_axis_is_manual((int)ids[k])) insert(&s, ids[k]);
  return s.n == before ? a : intern(&s);
}

int jx_vma_remove(int a, int n, const int64_t *ids) {
  if (!a) return 0;
  axis_set s = lookup(a), r = {0};
  for (int k = 0; k < s.n; k++) {
    int drop = 0;
    for (int j = 0; j < n && !drop; j++) drop = s.id[k] == ids[j];
    if (!drop) r.id[r.n++] = s.id[k];
  }
  return r.n == s.n ? a : intern(&r);
}

int jx_vma_union(int a, int b) {
  if (a == b || !b) return a;
  if (!a) return b;
  axis_set s = lookup(a), t = lookup(b);
  for (int k = 0; k < t.n; k++) insert(&s, t.id[k]);
  return intern(&s);
}

int jx_vma_missing(int a, int n, const int64_t *ids, int64_t *out) {
  axis_set s = lookup(a);
  int m = 0;
  for (int k = 0; k < n; k++)
    if (jx_axis_is_manual((int)ids[k]) && !has(&s, ids[k])) out[m++] = ids[k];
  return m;
}

void jx_vma_split_manual(int n, const int64_t *ids, int64_t *manual, int *nm, int64_t *other,
                         int *no) {
  *nm = *no = 0;
  for (int k = 0; k < n; k++) {
    if (jx_axis_is_manual((int)ids[k]))
      manual[(*nm)++] = ids[k];
    else
      other[(*no)++] = ids[k];
  }
}

/* x cast to vary over the axes of set `to` it does not vary over. */
static jx_array *pvary_to(jx_array *x, int to) {
  static const jx_prim *pvary;
  if (!pvary) pvary = jx_prim_lookup("pvary");
  if (!pvary) {
    jx_error_set(JX_ERR_INTERNAL, "varying axes: the pvary primitive is not registered");
    return jx_poison();
  }
  axis_set want = lookup(to), have = lookup(jx_array_vma(x));
  jx_params q = JX_PARAMS_INIT;
  for (int k = 0; k < want.n && q.l[0].n < JX_MAX_RANK; k++)
    if (!has(&have, want.id[k])) q.l[0].v[q.l[0].n++] = want.id[k];
  return jx_bind1(pvary, 1, &x, &q);
}

jx_status jx_vma_cast_operands(const jx_prim *p, const jx_params *params, int nin,
                               jx_array *const *in, int nsub, jx_array **cast) {
  int to = 0;
  for (int i = 0; i < nin; i++) {
    cast[i] = in[i];
    to = jx_vma_union(to, jx_array_vma(in[i]));
  }
  if (nsub || p->vma == JX_VMA_CAST || p->vma == JX_VMA_AXIS_INDEX) return JX_OK;
  if (p->vma == JX_VMA_REDUCE || p->vma == JX_VMA_COLLECTIVE)
    to = jx_vma_add(to, params->l[0].n, params->l[0].v);
  /* constants vary over nothing and carry no cotangent: they need no cast */
  for (int i = 0; i < nin; i++)
    if (jx_is_tracer(in[i]) && jx_array_vma(in[i]) != to) {
      cast[i] = pvary_to(in[i], to);
      if (cast[i]->poisoned) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    }
  return JX_OK;
}

void jx_vma_outputs(const jx_prim *p, const jx_params *params, int nin, const jx_aval *in, int nsub,
                    int nout, jx_aval *out) {
  int v = 0;
  for (int i = 0; i < nin; i++) v = jx_vma_union(v, in[i].vma);
  if (p->vma == JX_VMA_REDUCE) v = jx_vma_remove(v, params->l[0].n, params->l[0].v);
  if (p->vma == JX_VMA_CAST) v = jx_vma_add(v, params->l[0].n, params->l[0].v);
  if (p->vma == JX_VMA_AXIS_INDEX) {
    int64_t id = params->i[0];
    v = jx_vma_add(0, 1, &id);
  }
  for (int o = 0; o < nout; o++) out[o].vma = nsub ? jx_vma_union(v, out[o].vma) : v;
}
