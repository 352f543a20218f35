/* The planner's ties (ties.h): signatures refined over the program's
 * edges, then grouped. */
#include "ties.h"

#include <stdlib.h>
#include <string.h>

#include "../../base/error.h"
#include "../../base/hash.h"

/* splitmix64's finaliser: readers' signatures are summed, so each must be
 * spread over all 64 bits first. */
static uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t hash_aval(uint64_t h, jx_aval a) {
  h = jx_hash_u64(h, (uint64_t)a.dtype);
  h = jx_hash_u64(h, (uint64_t)a.shape.rank);
  for (int d = 0; d < a.shape.rank; d++) h = jx_hash_u64(h, (uint64_t)a.shape.dims[d]);
  return h;
}

static uint64_t hash_pspec(uint64_t h, const jx_pspec *s) {
  h = jx_hash_u64(h, (uint64_t)s->rank);
  for (int d = 0; d < s->rank; d++) {
    h = jx_hash_u64(h, (uint64_t)s->n[d]);
    for (int k = 0; k < s->n[d]; k++) h = jx_hash_u64(h, (uint64_t)s->ax[d][k]);
  }
  return h;
}

static int same_aval(jx_aval a, jx_aval b) {
  return a.dtype == b.dtype && jx_shape_equal(a.shape, b.shape);
}

/* Same primitive, parameters, nested programs and types: two such
 * equations have the same strategies, in the same order. */
static int same_kind(const jx_program *p, const jx_eqn *a, const jx_eqn *b) {
  if (a->prim != b->prim || a->nin != b->nin || a->nout != b->nout || a->nsub != b->nsub ||
      !jx_params_equal(&a->params, &b->params))
    return 0;
  for (int i = 0; i < a->nin; i++)
    if (!same_aval(p->avals[a->in[i]], p->avals[b->in[i]])) return 0;
  for (int o = 0; o < a->nout; o++)
    if (!same_aval(p->avals[a->out[o]], p->avals[b->out[o]])) return 0;
  for (int s = 0; s < a->nsub; s++)
    if (jx_program_hash(a->sub[s]) != jx_program_hash(b->sub[s])) return 0;
  return 1;
}

static uint64_t kind_hash(const jx_program *p, const jx_eqn *e) {
  uint64_t h = jx_hash_str(JX_HASH_SEED, e->prim->name);
  h = jx_hash_u64(h, jx_params_hash(&e->params));
  for (int i = 0; i < e->nin; i++) h = hash_aval(h, p->avals[e->in[i]]);
  for (int o = 0; o < e->nout; o++) h = hash_aval(h, p->avals[e->out[o]]);
  for (int s = 0; s < e->nsub; s++) h = jx_hash_u64(h, jx_program_hash(e->sub[s]));
  return h;
}

/* Groups n items by signature: rep[k] is the first item of k's signature
 * that `same` also accepts (a signature collision is no tie). */
typedef int (*same_fn)(const jx_program *p, const jx_pspec *const *fixed, int a, int b);

static jx_status group(const jx_program *p, const jx_pspec *const *fixed, const uint64_t *sig,
                       int n, same_fn same, int *rep) {
  size_t cap = 16;
  while (cap < 2 * (size_t)n) cap *= 2;
  int *slot = malloc(sizeof *slot * cap);
  if (!slot) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_plan: out of memory");
  for (size_t s = 0; s < cap; s++) slot[s] = -1;
  for (int k = 0; k < n; k++) {
    size_t s = (size_t)mix(sig[k]) & (cap - 1);
    while (slot[s] >= 0 && !(sig[slot[s]] == sig[k] && same(p, fixed, slot[s], k)))
      s = (s + 1) & (cap - 1);
    if (slot[s] < 0) slot[s] = k;
    rep[k] = slot[s];
  }
  free(slot);
  return JX_OK;
}

static int same_eqn(const jx_program *p, const jx_pspec *const *fixed, int a, int b) {
  (void)fixed;
  return same_kind(p, &p->eqns[a], &p->eqns[b]);
}

static int same_input(const jx_program *p, const jx_pspec *const *fixed, int a, int b) {
  const jx_pspec *fa = fixed ? fixed[a] : NULL, *fb = fixed ? fixed[b] : NULL;
  return same_aval(p->avals[p->in[a]], p->avals[p->in[b]]) && !fa == !fb &&
         (!fa || jx_pspec_equal(fa, fb));
}

jx_status jx_auto_ties(const jx_program *p, const jx_pspec *const *fixed, int *eqn_rep,
                       int *in_rep) {
  int nv = p->nvars, ne = p->neqns;
  uint64_t *var = calloc((size_t)nv + 1, sizeof *var);
  uint64_t *readers = calloc((size_t)nv + 1, sizeof *readers);
  uint64_t *eqn = calloc((size_t)ne + 1, sizeof *eqn);
  uint64_t *in_sig = calloc((size_t)p->nin + 1, sizeof *in_sig);
  int *made_by = malloc(sizeof *made_by * ((size_t)nv + 1)); /* the equation, -1: none */
  jx_status st = JX_OK;
  if (!var || !readers || !eqn || !in_sig || !made_by)
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_auto_plan: out of memory");
  for (int v = 0; v < nv && !st; v++) {
    var[v] = jx_hash_u64(hash_aval(JX_HASH_SEED, p->avals[v]), 2); /* a constant until made */
    made_by[v] = -1;
  }
  for (int i = 0; i < p->nin && !st; i++) {
    uint64_t h = jx_hash_u64(hash_aval(JX_HASH_SEED, p->avals[p->in[i]]), 1);
    var[p->in[i]] = fixed && fixed[i] ? hash_pspec(h, fixed[i]) : h;
  }
  for (int e = 0; e < ne && !st; e++) {
    const jx_eqn *q = &p->eqns[e];
    eqn[e] = kind_hash(p, q);
    for (int o = 0; o < q->nout; o++) {
      made_by[q->out[o]] = e;
      var[q->out[o]] = jx_hash_u64(eqn[e], (uint64_t)o);
    }
  }
  for (int round = 0; round < JX_AUTO_TIE_RADIUS && !st; round++) {
    memset(readers, 0, sizeof *readers * (size_t)nv);
    for (int e = 0; e < ne; e++)
      for (int i = 0; i < p->eqns[e].nin; i++)
        readers[p->eqns[e].in[i]] += mix(eqn[e] ^ mix((uint64_t)i + 1));
    for (int o = 0; o < p->nout; o++) readers[p->out[o]] += mix(0x6f7574); /* an output */
    for (int e = 0; e < ne; e++) { /* from last round's operands and readers */
      const jx_eqn *q = &p->eqns[e];
      uint64_t h = eqn[e];
      for (int i = 0; i < q->nin; i++) h = jx_hash_u64(h, var[q->in[i]]);
      for (int o = 0; o < q->nout; o++) h = jx_hash_u64(h, readers[q->out[o]]);
      eqn[e] = h;
    }
    for (int v = 0; v < nv; v++) {
      if (made_by[v] >= 0) {
        const jx_eqn *q = &p->eqns[made_by[v]];
        int o = 0;
        while (q->out[o] != v) o++;
        var[v] = jx_hash_u64(eqn[made_by[v]], (uint64_t)o);
      } else
        var[v] = jx_hash_u64(var[v], readers[v]); /* an input's or constant's readers */
    }
  }
  for (int i = 0; i < p->nin && !st; i++) in_sig[i] = var[p->in[i]];
  if (!st) st = group(p, fixed, eqn, ne, same_eqn, eqn_rep);
  if (!st) st = group(p, fixed, in_sig, p->nin, same_input, in_rep);
  free(var);
  free(readers);
  free(eqn);
  free(in_sig);
  free(made_by);
  return st;
}
