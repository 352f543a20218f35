#include "simplify.h"

#include "recompute.h"
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/hash.h"
#include "../prims/prims.h"

enum { FOLD_MAX_ELEMENTS = 16, DEDUP_MAX_BYTES = 64 };

/* ---- helpers ---- */
/* The value of a constant variable of the new program whose elements are all
 * equal, if it is one. */
static int scalar_value(const jx_program *q, int v, double *out) {
  jx_array *c;
  /* complex constants are never taken for a real value (a splat of 1 + 2j is not 1) */
  if (!jx_program_is_const(q, v, &c) || !c->buf || jx_is_complex(c->dtype)) return 0;
  int64_t n = jx_shape_numel(c->shape);
  if (n < 1) return 0;
  double x = jx_load_f64(c->buf->data, c->dtype, 0);
  for (int64_t i = 1; i < n; i++)
    if (jx_load_f64(c->buf->data, c->dtype, i) != x) return 0;
  *out = x;
  return 1;
}

/* v, or the scalar its broadcast_in_dim spreads, as defined in q */
static const jx_eqn *definer(const jx_program *q, const int *def, int v) {
  return def[v] >= 0 ? &q->eqns[def[v]] : NULL;
}

static int is_splat(const jx_program *q, const int *def, int v, double want) {
  double x;
  if (scalar_value(q, v, &x)) return x == want;
  const jx_eqn *e = definer(q, def, v);
  if (e && e->prim == &jx_prim_broadcast_in_dim && scalar_value(q, e->in[0], &x)) return x == want;
  return 0;
}

/* If applying e (with inputs in, of the new program q) is the identity on one
 * of its inputs, returns that input; else -1. Only exact identities. */
static int identity_of(const jx_program *q, const int *def, const jx_prim *p, const jx_params *pp,
                       int nin, const int *in, const jx_aval *out) {
  if (nin < 1) return -1;
  jx_aval a = q->avals[in[0]];
  int same =
      a.dtype == out[0].dtype && jx_shape_equal(a.shape, out[0].shape) && a.weak == out[0].weak;
  if ((p == &jx_prim_convert_element_type || p == &jx_prim_reshape ||
       p == &jx_prim_broadcast_in_dim) &&
      same)
    return in[0];
  if (p == &jx_prim_transpose && same) {
    for (int i = 0; i < pp->l[0].n; i++)
      if (pp->l[0].v[i] != i) return -1;
    return in[0];
  }
  if (nin == 2 && same && jx_is_float(a.dtype)) {
    jx_aval b = q->avals[in[1]];
    if (b.dtype != a.dtype || !jx_shape_equal(b.shape, a.shape)) return -1;
    if ((p == &jx_prim_mul || p == &jx_prim_div) && is_splat(q, def, in[1], 1.0)) return in[0];
    if (p == &jx_prim_mul && is_splat(q, def, in[0], 1.0)) return in[1];
    if (p == &jx_prim_sub && is_splat(q, def, in[1], 0.0)) return in[0]; /* x - (+0) is exact */
  }
  return -1;
}

/* Evaluates p on constant inputs directly (not through jx_bind, which would
 * record into an enclosing trace). Returns NULL when it cannot. */
static jx_array *fold(const jx_prim *p, const jx_params *pp, int nin, jx_array *const *in,
                      const jx_aval *out) {
  if (!p->eval || p->impl || nin > 8) return NULL;
  jx_tensor tin[8], tout[1];
  for (int i = 0; i < nin; i++) tin[i] = (jx_tensor){in[i]->buf->data, in[i]->dtype, in[i]->shape};
  jx_array *r = jx_array_alloc(out[0].dtype, out[0].shape, out[0].weak);
  if (r->poisoned) return NULL;
  tout[0] = (jx_tensor){r->buf->data, out[0].dtype, out[0].shape};
  p->eval(&(jx_rule_ctx){p, pp, nin, 1, 0, NULL}, tin, tout);
  return r;
}

/* ---- the forward pass: identities, folding, CSE ---- */
typedef struct {
  uint64_t key;
  int eqn; /* in the new program */
} cse_slot;

typedef struct {
  jx_program *q;
  int *map; /* old variable -> new variable */
  int *def; /* new variable -> index of the equation defining it, or -1 */
  int cap_def;
  cse_slot *table;
  int table_cap, table_len;
} rewriter;

static int grow_def(rewriter *r) {
  if (r->q->nvars <= r->cap_def) return 1;
  int cap = r->cap_def * 2 > r->q->nvars ? r->cap_def * 2 : r->q->nvars + 16;
  int *d = realloc(r->def, sizeof *d * (size_t)cap);
  if (!d) return 0;
  for (int i = r->cap_def; i < cap; i++) d[i] = -1;
  r->def = d;
  r->cap_def = cap;
  return 1;
}

static uint64_t eqn_key(const jx_prim *p, const jx_params *pp, int nin, const int *in, int nsub,
                        jx_program *const *subs) {
  uint64_t h = jx_hash_u64(jx_params_hash(pp), (uint64_t)(uintptr_t)p);
  h = jx_hash_bytes(h, in, sizeof *in * (size_t)nin);
  for (int s = 0; s < nsub; s++) h = jx_hash_u64(h, (uint64_t)(uintptr_t)subs[s]);
  return h;
}

static int cse_find(rewriter *r, uint64_t key, const jx_prim *p, const jx_params *pp, int nin,
                    const int *in, int nsub, jx_program *const *subs) {
  if (!r->table_cap) return -1;
  for (int i = (int)(key % (uint64_t)r->table_cap), n = 0; n < r->table_cap;
       i = (i + 1) % r->table_cap, n++) {
    cse_slot *s = &r->table[i];
    if (s->eqn < 0) return -1;
    if (s->key != key) continue;
    const jx_eqn *e = &r->q->eqns[s->eqn];
    if (e->prim != p || e->nin != nin || e->nsub != nsub || !jx_params_equal(&e->params, pp))
      continue;
    if (memcmp(e->in, in, sizeof *in * (size_t)nin) != 0) continue;
    if (nsub && memcmp(e->sub, subs, sizeof *subs * (size_t)nsub) != 0) continue;
    return s->eqn;
  }
  return -1;
}

static void cse_add(rewriter *r, uint64_t key, int eqn) {
  if (2 * (r->table_len + 1) > r->table_cap) {
    int cap = r->table_cap ? 2 * r->table_cap : 64;
    cse_slot *t = malloc(sizeof *t * (size_t)cap);
    if (!t) return; /* CSE is an optimization: without room, skip it */
    for (int i = 0; i < cap; i++) t[i].eqn = -1;
    for (int i = 0; i < r->table_cap; i++)
      if (r->table[i].eqn >= 0) {
        int j = (int)(r->table[i].key % (uint64_t)cap);
        while (t[j].eqn >= 0) j = (j + 1) % cap;
        t[j] = r->table[i];
      }
    free(r->table);
    r->table = t;
    r->table_cap = cap;
  }
  int j = (int)(key % (uint64_t)r->table_cap);
  while (r->table[j].eqn >= 0) j = (j + 1) % r->table_cap;
  r->table[j] = (cse_slot){key, eqn};
  r->table_len++;
}

/* A constant of the new program equal to a (small ones are shared). */
static int const_var(rewriter *r, jx_array *a) {
  size_t bytes = a->buf ? a->buf->nbytes : 0;
  if (a->buf && bytes <= DEDUP_MAX_BYTES)
    for (int c = 0; c < r->q->nconst; c++) {
      jx_array *b = r->q->constval[c];
      if (b->dtype == a->dtype && b->weak == a->weak && jx_shape_equal(b->shape, a->shape) &&
          b->buf && memcmp(b->buf->data, a->buf->data, bytes) == 0)
        return r->q->constvar[c];
    }
  return jx_program_add_const(r->q, a);
}

static jx_status rewrite_eqn(rewriter *r, const jx_program *p, const jx_eqn *e) {
  int small_in[16], small_out[16];
  jx_aval small_av[16];
  int *in = e->nin > 16 ? malloc(sizeof *in * (size_t)e->nin) : small_in;
  int *out = e->nout > 16 ? malloc(sizeof *out * (size_t)e->nout) : small_out;
  jx_aval *av = e->nout > 16 ? malloc(sizeof *av * (size_t)e->nout) : small_av;
  jx_program *subs[JX_EQN_SUBS] = {0};
  jx_status st =
      (in && out && av) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "simplify: out of memory");
  for (int i = 0; i < e->nin && !st; i++) in[i] = r->map[e->in[i]];
  for (int o = 0; o < e->nout && !st; o++) av[o] = p->avals[e->out[o]];
  for (int s = 0; s < e->nsub && !st; s++) {
    subs[s] = jx_simplify(e->sub[s]);
    if (!subs[s]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  if (st) goto done;
  /* a reshape of a reshape reads the original (then often is an identity) */
  if (e->prim == &jx_prim_reshape) {
    const jx_eqn *d = definer(r->q, r->def, in[0]);
    if (d && d->prim == &jx_prim_reshape) in[0] = d->in[0];
  }
  /* an effect (a debug print) runs as written: no identity, folding or merging */
  if (e->prim->effect) {
    st = jx_program_add_eqn(r->q, e->prim, &e->params, e->nin, in, e->nout, av, out, e->nsub, subs,
                            e->loc);
    if (!st && !grow_def(r)) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "simplify: out of memory");
    for (int o = 0; o < e->nout && !st; o++) {
      r->map[e->out[o]] = out[o];
      r->def[out[o]] = r->q->neqns - 1;
    }
    goto done;
  }
  /* identities */
  if (e->nout == 1 && !e->nsub) {
    int id = identity_of(r->q, r->def, e->prim, &e->params, e->nin, in, av);
    if (id >= 0) {
      r->map[e->out[0]] = id;
      goto done;
    }
  }
  /* folding small constants; a broadcast stays one, a cheap splat for fusion */
  int generator = e->prim == &jx_prim_broadcast_in_dim && jx_shape_numel(av[0].shape) > 1;
  if (e->nout == 1 && !e->nsub && e->nin > 0 && !generator &&
      jx_shape_numel(av[0].shape) <= FOLD_MAX_ELEMENTS) {
    jx_array *vals[8];
    int all = e->nin <= 8;
    for (int i = 0; i < e->nin && all; i++) all = jx_program_is_const(r->q, in[i], &vals[i]);
    jx_array *c = all ? fold(e->prim, &e->params, e->nin, vals, av) : NULL;
    if (c) {
      r->map[e->out[0]] = const_var(r, c);
      /* the value is the program's (or a copy of one it holds): not the
       * caller's scope's, which would keep every folded constant of every
       * program simplified outside a scope until jx_shutdown */
      jx_scope_release_now(c);
      if (!grow_def(r)) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "simplify: out of memory");
      goto done;
    }
  }
  /* common subexpressions */
  uint64_t key = eqn_key(e->prim, &e->params, e->nin, in, e->nsub, subs);
  int same = cse_find(r, key, e->prim, &e->params, e->nin, in, e->nsub, subs);
  if (same >= 0) {
    for (int o = 0; o < e->nout; o++) r->map[e->out[o]] = r->q->eqns[same].out[o];
    goto done;
  }
  st = jx_program_add_eqn(r->q, e->prim, &e->params, e->nin, in, e->nout, av, out, e->nsub, subs,
                          e->loc);
  if (!st && !grow_def(r)) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "simplify: out of memory");
  for (int o = 0; o < e->nout && !st; o++) {
    r->map[e->out[o]] = out[o];
    r->def[out[o]] = r->q->neqns - 1;
  }
  if (!st) cse_add(r, key, r->q->neqns - 1);
done:
  for (int s = 0; s < e->nsub; s++) jx_program_release(subs[s]);
  if (in != small_in) free(in);
  if (out != small_out) free(out);
  if (av != small_av) free(av);
  return st;
}

static jx_program *forward(const jx_program *p) {
  rewriter r = {0};
  r.q = jx_program_new(p->name);
  r.map = malloc(sizeof *r.map * (size_t)(p->nvars + 1));
  jx_status st =
      (r.q && r.map) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "simplify: out of memory");
  for (int i = 0; i < p->nin && !st; i++)
    r.map[p->in[i]] = jx_program_add_input(r.q, p->avals[p->in[i]]);
  for (int c = 0; c < p->nconst && !st; c++) r.map[p->constvar[c]] = const_var(&r, p->constval[c]);
  if (!st && !grow_def(&r)) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "simplify: out of memory");
  for (int k = 0; k < p->neqns && !st; k++) st = rewrite_eqn(&r, p, &p->eqns[k]);
  int *outs = malloc(sizeof *outs * (size_t)(p->nout + 1));
  if (!outs) st = st ? st : jx_error_set(JX_ERR_OUT_OF_MEMORY, "simplify: out of memory");
  for (int o = 0; o < p->nout && !st; o++) outs[o] = r.map[p->out[o]];
  if (!st) st = jx_program_set_outputs(r.q, p->nout, outs);
  free(outs);
  free(r.map);
  free(r.def);
  free(r.table);
  if (st) {
    jx_program_release(r.q);
    return NULL;
  }
  return r.q;
}

/* ---- dead-code elimination ---- */
static jx_program *dce(const jx_program *p) {
  uint8_t *live = calloc((size_t)p->nvars + 1, 1);
  int *map = malloc(sizeof *map * (size_t)(p->nvars + 1));
  jx_program *q = jx_program_new(p->name);
  jx_status st =
      (live && map && q) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "simplify: out of memory");
  for (int o = 0; o < p->nout && !st; o++) live[p->out[o]] = 1;
  for (int k = p->neqns - 1; k >= 0 && !st; k--) {
    const jx_eqn *e = &p->eqns[k];
    int used = jx_eqn_has_effect(e); /* an effect is live though nothing reads its outputs */
    for (int o = 0; o < e->nout; o++) used |= live[e->out[o]];
    if (used)
      for (int i = 0; i < e->nin; i++) live[e->in[i]] = 1;
  }
  for (int i = 0; i < p->nin && !st; i++)
    map[p->in[i]] = jx_program_add_input(q, p->avals[p->in[i]]);
  for (int c = 0; c < p->nconst && !st; c++)
    if (live[p->constvar[c]]) map[p->constvar[c]] = jx_program_add_const(q, p->constval[c]);
  for (int k = 0; k < p->neqns && !st; k++) {
    const jx_eqn *e = &p->eqns[k];
    int used = jx_eqn_has_effect(e);
    for (int o = 0; o < e->nout; o++) used |= live[e->out[o]];
    if (!used) continue;
    st = jx_program_copy_eqn(q, p, e, map, map);
  }
  int *outs = malloc(sizeof *outs * (size_t)(p->nout + 1));
  if (!outs) st = st ? st : jx_error_set(JX_ERR_OUT_OF_MEMORY, "simplify: out of memory");
  for (int o = 0; o < p->nout && !st; o++) outs[o] = map[p->out[o]];
  if (!st) st = jx_program_set_outputs(q, p->nout, outs);
  free(outs);
  free(live);
  free(map);
  if (st) {
    jx_program_release(q);
    return NULL;
  }
  return q;
}

jx_program *jx_simplify(const jx_program *p) {
  jx_program *f = forward(p);
  if (!f) return NULL;
  jx_program *r = jx_recompute(f); /* may leave originals dead: before DCE */
  jx_program_release(f);
  if (!r) return NULL;
  jx_program *d = dce(r);
  jx_program_release(r);
  if (!d) return NULL;
  jx_program *h = jx_hoist_scalars(d);
  jx_program_release(d);
  return h;
}
