/* Building, releasing and hashing programs. */
#include "program.h"

#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/hash.h"
#include "exec.h"

jx_program *jx_program_new(const char *name) {
  jx_program *p = calloc(1, sizeof *p);
  if (!p) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory creating a program");
    return NULL;
  }
  atomic_init(&p->refs, 1);
  p->name = strdup(name ? name : "fn");
  return p;
}

jx_program *jx_program_retain(const jx_program *p) {
  jx_program *q = (jx_program *)p;
  if (q) atomic_fetch_add_explicit(&q->refs, 1, memory_order_relaxed);
  return q;
}

void jx_program_release(jx_program *p) {
  if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
  jx_program_exec_drop(p); /* its executables may read it as they go */
  for (int i = 0; i < p->neqns; i++) {
    jx_eqn *e = &p->eqns[i];
    free(e->in);
    free(e->out);
    for (int s = 0; s < e->nsub; s++) jx_program_release(e->sub[s]);
  }
  for (int i = 0; i < p->nconst; i++) jx_release(p->constval[i]);
  free(p->eqns);
  free(p->constvar);
  free(p->constval);
  free(p->avals);
  free(p->in);
  free(p->out);
  free(p->name);
  free(p);
}

/* Grows *arr (of *cap elements of size es) to hold at least need elements. */
static int grow(void **arr, int *cap, int need, size_t es) {
  if (need <= *cap) return 1;
  int c = *cap ? *cap * 2 : 8;
  while (c < need) c *= 2;
  void *n = realloc(*arr, (size_t)c * es);
  if (!n) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory growing a program");
    return 0;
  }
  *arr = n;
  *cap = c;
  return 1;
}

int jx_program_add_var(jx_program *p, jx_aval aval) {
  if (!grow((void **)&p->avals, &p->cap_vars, p->nvars + 1, sizeof *p->avals)) return -1;
  p->avals[p->nvars] = aval;
  return p->nvars++;
}

int jx_program_add_input(jx_program *p, jx_aval aval) {
  int v = jx_program_add_var(p, aval);
  if (v < 0 || !grow((void **)&p->in, &p->cap_in, p->nin + 1, sizeof *p->in)) return -1;
  p->in[p->nin++] = v;
  return v;
}

int jx_program_add_const(jx_program *p, jx_array *value) {
  if (jx_array_ready(value)) return -1; /* constants are read by the simplifier */
  int v = jx_program_add_var(p, (jx_aval){value->dtype, value->weak, value->shape, 0});
  if (v < 0) return -1;
  int cap = p->cap_const;
  if (!grow((void **)&p->constvar, &cap, p->nconst + 1, sizeof *p->constvar)) return -1;
  cap = p->cap_const;
  if (!grow((void **)&p->constval, &cap, p->nconst + 1, sizeof *p->constval)) return -1;
  p->cap_const = cap;
  p->constvar[p->nconst] = v;
  p->constval[p->nconst] = jx_keep(value);
  p->nconst++;
  return v;
}

static int *copy_ints(const int *src, int n) {
  int *d = malloc(sizeof *d * (size_t)(n ? n : 1));
  if (d && n) memcpy(d, src, sizeof *d * (size_t)n);
  return d;
}

jx_status jx_program_add_eqn(jx_program *p, const jx_prim *prim, const jx_params *params, int nin,
                             const int *in_vars, int nout, const jx_aval *out_avals, int *out_vars,
                             int nsub, jx_program *const *subs, const char *loc) {
  JX_ASSERT(nsub <= JX_EQN_SUBS);
  if (!grow((void **)&p->eqns, &p->cap_eqns, p->neqns + 1, sizeof *p->eqns))
    return JX_ERR_OUT_OF_MEMORY;
  for (int o = 0; o < nout; o++) {
    out_vars[o] = jx_program_add_var(p, out_avals[o]);
    if (out_vars[o] < 0) return JX_ERR_OUT_OF_MEMORY;
  }
  jx_eqn *e = &p->eqns[p->neqns];
  memset(e, 0, sizeof *e);
  e->prim = prim;
  if (params) e->params = *params;
  e->nin = nin;
  e->nout = nout;
  e->in = copy_ints(in_vars, nin);
  e->out = copy_ints(out_vars, nout);
  if (!e->in || !e->out) {
    free(e->in);
    free(e->out);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory adding an equation");
  }
  for (int s = 0; s < nsub; s++) e->sub[s] = jx_program_retain(subs[s]);
  e->nsub = nsub;
  e->loc = loc;
  p->neqns++;
  return JX_OK;
}

jx_status jx_program_copy_eqn(jx_program *q, const jx_program *p, const jx_eqn *e,
                              const int *in_map, int *map) {
  int small_in[16], small_out[16];
  jx_aval small_av[16];
  int *in = e->nin > 16 ? malloc(sizeof *in * (size_t)e->nin) : small_in;
  int *out = e->nout > 16 ? malloc(sizeof *out * (size_t)e->nout) : small_out;
  jx_aval *av = e->nout > 16 ? malloc(sizeof *av * (size_t)e->nout) : small_av;
  jx_status st = (in && out && av)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory copying an equation");
  for (int i = 0; i < e->nin && !st; i++) in[i] = in_map[e->in[i]];
  for (int o = 0; o < e->nout && !st; o++) av[o] = p->avals[e->out[o]];
  if (!st)
    st = jx_program_add_eqn(q, e->prim, &e->params, e->nin, in, e->nout, av, out, e->nsub, e->sub,
                            e->loc);
  for (int o = 0; o < e->nout && !st; o++) map[e->out[o]] = out[o];
  if (in != small_in) free(in);
  if (out != small_out) free(out);
  if (av != small_av) free(av);
  return st;
}

jx_status jx_program_set_outputs(jx_program *p, int n, const int *vars) {
  int *o = copy_ints(vars, n);
  if (!o) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory setting outputs");
  free(p->out);
  p->out = o;
  p->nout = n;
  return JX_OK;
}

/* ---- structural hash ---- */
static uint64_t hash_aval(uint64_t h, jx_aval a) {
  h = jx_hash_u64(h, (uint64_t)a.dtype * 2 + a.weak);
  h = jx_hash_u64(h, (uint64_t)a.shape.rank);
  for (int i = 0; i < a.shape.rank; i++) h = jx_hash_u64(h, (uint64_t)a.shape.dims[i]);
  return h;
}

static uint64_t hash_params(uint64_t h, const jx_params *pp) {
  h = jx_hash_u64(h, (uint64_t)pp->dtype);
  for (int i = 0; i < JX_PARAM_INTS; i++) h = jx_hash_u64(h, (uint64_t)pp->i[i]);
  for (int i = 0; i < JX_PARAM_FLOATS; i++) h = jx_hash_bytes(h, &pp->f[i], sizeof(double));
  for (int l = 0; l < JX_PARAM_LISTS; l++) {
    h = jx_hash_u64(h, (uint64_t)pp->l[l].n);
    for (int i = 0; i < pp->l[l].n && i < JX_MAX_RANK; i++)
      h = jx_hash_u64(h, (uint64_t)pp->l[l].v[i]);
  }
  return h;
}

uint64_t jx_program_hash(const jx_program *p) {
  uint64_t h = JX_HASH_SEED;
  h = jx_hash_u64(h, (uint64_t)p->nvars);
  for (int v = 0; v < p->nvars; v++) h = hash_aval(h, p->avals[v]);
  h = jx_hash_bytes(h, p->in, sizeof *p->in * (size_t)p->nin);
  for (int c = 0; c < p->nconst; c++) {
    const jx_array *a = p->constval[c];
    h = jx_hash_u64(h, (uint64_t)p->constvar[c]);
    if (a->buf) h = jx_hash_bytes(h, a->buf->data, a->buf->nbytes);
  }
  for (int i = 0; i < p->neqns; i++) {
    const jx_eqn *e = &p->eqns[i];
    h = jx_hash_str(h, e->prim->name);
    h = hash_params(h, &e->params);
    h = jx_hash_bytes(h, e->in, sizeof *e->in * (size_t)e->nin);
    h = jx_hash_bytes(h, e->out, sizeof *e->out * (size_t)e->nout);
    for (int s = 0; s < e->nsub; s++) h = jx_hash_u64(h, jx_program_hash(e->sub[s]));
  }
  return jx_hash_bytes(h, p->out, sizeof *p->out * (size_t)p->nout);
}

int jx_eqn_has_effect(const jx_eqn *e) {
  if (e->prim->effect) return 1;
  for (int s = 0; s < e->nsub; s++)
    for (int k = 0; k < e->sub[s]->neqns; k++)
      if (jx_eqn_has_effect(&e->sub[s]->eqns[k])) return 1;
  return 0;
}
