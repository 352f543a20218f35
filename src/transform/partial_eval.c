/* Partial evaluation of programs, and linearization built on it. An
 * equation is unknown when any input is (or, for rows with a partial_eval
 * rule, split into a known and an unknown equation); known values that the
 * unknown program reads become residuals. */
#include "partial_eval.h"

#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "ad.h"

void jx_pe_eqn_free(jx_pe_eqn *e) {
  for (int s = 0; s < e->nsub; s++) jx_program_release(e->sub[s]);
  free(e->in);
  memset(e, 0, sizeof *e);
}

void jx_split_free(jx_split *s) {
  jx_program_release(s->known);
  jx_program_release(s->unknown);
  free(s->unknown_out);
  memset(s, 0, sizeof *s);
}

jx_status jx_unknown_outputs(const jx_program *p, const uint8_t *unknown_in, uint8_t *unknown_out) {
  jx_split s;
  jx_status st = jx_partial_eval(p, unknown_in, NULL, &s);
  if (st) return st;
  memcpy(unknown_out, s.unknown_out, (size_t)p->nout);
  jx_split_free(&s);
  return JX_OK;
}

typedef struct {
  const jx_program *p;
  uint8_t *unknown; /* per variable of p */
  int *kmap, *umap; /* p variable -> known / unknown program variable, or -1 */
  int *res;         /* residual variables of p, in order */
  int nres, cap_res;
  uint8_t *is_res;
  jx_program *known, *unk;
  /* equations, in order, each tagged with where it goes */
  struct planned {
    const jx_eqn *e;
    int split; /* 0: whole to one side; 1: split by its rule */
    int side;  /* when whole: 0 known, 1 unknown */
    jx_pe_eqn k, u;
    int nres_local;
    int *res_vars; /* p-level placeholder variables for the rule's residuals */
    jx_aval *res_avals;
    uint8_t *uout;
  } * plan;
} pe_state;

static jx_status note_residual(pe_state *s, int v) {
  if (s->unknown[v] || s->is_res[v] || jx_program_is_const(s->p, v, NULL)) return JX_OK;
  if (s->nres == s->cap_res) {
    int cap = s->cap_res ? 2 * s->cap_res : 16;
    int *r = realloc(s->res, sizeof *r * (size_t)cap);
    if (!r) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "partial eval: out of memory");
    s->res = r;
    s->cap_res = cap;
  }
  s->is_res[v] = 1;
  s->res[s->nres++] = v;
  return JX_OK;
}

static int *ints(int n) { return malloc(sizeof(int) * (size_t)(n + 1)); }

/* First pass: unknown flags, and the split of rule-bearing equations. The
 * rule's residuals get fresh placeholder variables appended to p's space. */
static jx_status classify(pe_state *s, int *nvars_total) {
  const jx_program *p = s->p;
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    struct planned *pl = &s->plan[k];
    pl->e = e;
    int unk = 0;
    for (int i = 0; i < e->nin; i++) unk |= s->unknown[e->in[i]];
    if (!unk) {
      pl->side = 0;
      continue;
    }
    if (!e->prim->partial_eval) {
      pl->side = 1;
      for (int o = 0; o < e->nout; o++) s->unknown[e->out[o]] = 1;
      continue;
    }
    uint8_t *uin = malloc((size_t)e->nin + 1);
    jx_aval *av = malloc(sizeof *av * (size_t)(e->nin + 1));
    pl->uout = calloc((size_t)e->nout + 1, 1);
    if (!uin || !av || !pl->uout) {
      free(uin);
      free(av);
      return jx_error_set(JX_ERR_OUT_OF_MEMORY, "partial eval: out of memory");
    }
    for (int i = 0; i < e->nin; i++) {
      uin[i] = s->unknown[e->in[i]];
      av[i] = p->avals[e->in[i]];
    }
    jx_status st = e->prim->partial_eval(e, av, uin, pl->uout, &pl->k, &pl->u, &pl->nres_local,
                                         &pl->res_avals);
    free(uin);
    free(av);
    if (st) return st;
    pl->split = 1;
    for (int o = 0; o < e->nout; o++) s->unknown[e->out[o]] = pl->uout[o];
    pl->res_vars = ints(pl->nres_local);
    if (!pl->res_vars) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "partial eval: out of memory");
    for (int r = 0; r < pl->nres_local; r++) pl->res_vars[r] = (*nvars_total)++;
  }
  return JX_OK;
}

jx_status jx_partial_eval(const jx_program *p, const uint8_t *unknown_in,
                          const uint8_t *force_unknown_out, jx_split *out) {
  memset(out, 0, sizeof *out);
  pe_state s = {.p = p};
  int cap = p->nvars + 1;
  /* rule residuals get placeholder numbers past p's variables; size generously */
  for (int k = 0; k < p->neqns; k++)
    if (p->eqns[k].prim->partial_eval) cap += 4 * (p->eqns[k].nin + p->eqns[k].nout) + 64;
  s.unknown = calloc((size_t)cap, 1);
  s.is_res = calloc((size_t)cap, 1);
  s.kmap = ints(cap);
  s.umap = ints(cap);
  s.plan = calloc((size_t)p->neqns + 1, sizeof *s.plan);
  out->unknown_out = calloc((size_t)p->nout + 1, 1);
  jx_status st = (s.unknown && s.is_res && s.kmap && s.umap && s.plan && out->unknown_out)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "partial eval: out of memory");
  int nvars_total = p->nvars;
  if (!st) {
    for (int v = 0; v < cap; v++) s.kmap[v] = s.umap[v] = -1;
    for (int i = 0; i < p->nin; i++) s.unknown[p->in[i]] = unknown_in[i];
    st = classify(&s, &nvars_total);
  }
  if (st) goto done;
  JX_ASSERT(nvars_total <= cap);

  /* residuals: known values read by the unknown side, in program order */
  for (int k = 0; k < p->neqns && !st; k++) {
    struct planned *pl = &s.plan[k];
    const jx_eqn *e = pl->e;
    if (!pl->split && pl->side == 1)
      for (int i = 0; i < e->nin && !st; i++) st = note_residual(&s, e->in[i]);
    if (pl->split) {
      for (int i = 0; i < pl->u.nin && !st; i++)
        if (pl->u.in[i] >= 0) st = note_residual(&s, e->in[pl->u.in[i]]);
      for (int r = 0; r < pl->nres_local && !st; r++) st = note_residual(&s, pl->res_vars[r]);
    }
  }
  for (int o = 0; o < p->nout && !st; o++) {
    int v = p->out[o];
    out->unknown_out[o] = s.unknown[v] || (force_unknown_out && force_unknown_out[o]);
    if (out->unknown_out[o]) st = note_residual(&s, v);
  }
  if (st) goto done;

  char name[300];
  snprintf(name, sizeof name, "known(%s)", p->name);
  s.known = jx_program_new(name);
  snprintf(name, sizeof name, "unknown(%s)", p->name);
  s.unk = jx_program_new(name);
  if (!s.known || !s.unk) {
    st = JX_ERR_OUT_OF_MEMORY;
    goto done;
  }
  for (int i = 0; i < p->nin; i++)
    if (!unknown_in[i]) s.kmap[p->in[i]] = jx_program_add_input(s.known, p->avals[p->in[i]]);
  for (int c = 0; c < p->nconst; c++) {
    s.kmap[p->constvar[c]] = jx_program_add_const(s.known, p->constval[c]);
    s.umap[p->constvar[c]] = jx_program_add_const(s.unk, p->constval[c]);
  }

  /* the known program */
  for (int k = 0; k < p->neqns && !st; k++) {
    struct planned *pl = &s.plan[k];
    const jx_eqn *e = pl->e;
    if (!pl->split && pl->side == 1) continue;
    int nk_out = 0;
    for (int o = 0; o < e->nout; o++) nk_out += !pl->split || !pl->uout[o];
    int nres = pl->split ? pl->nres_local : 0;
    int nin = pl->split ? pl->k.nin : e->nin;
    int *in = ints(nin), *outv = ints(nk_out + nres);
    jx_aval *av = malloc(sizeof *av * (size_t)(nk_out + nres + 1));
    if (!in || !outv || !av) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "partial eval: out of memory");
    for (int i = 0; i < nin && !st; i++) in[i] = s.kmap[e->in[pl->split ? pl->k.in[i] : i]];
    int n = 0;
    for (int o = 0; o < e->nout && !st; o++)
      if (!pl->split || !pl->uout[o]) av[n++] = p->avals[e->out[o]];
    for (int r = 0; r < nres && !st; r++) av[n + r] = pl->res_avals[r];
    const jx_prim *prim = pl->split ? pl->k.prim : e->prim;
    const jx_params *params = pl->split ? &pl->k.params : &e->params;
    int nsub = pl->split ? pl->k.nsub : e->nsub;
    jx_program *const *subs = pl->split ? pl->k.sub : e->sub;
    int nouts = pl->split ? nk_out + nres : e->nout;
    if (!st)
      st = jx_program_add_eqn(s.known, prim, params, nin, in, nouts, av, outv, nsub, subs, e->loc);
    n = 0;
    for (int o = 0; o < e->nout && !st; o++)
      if (!pl->split || !pl->uout[o]) s.kmap[e->out[o]] = outv[n++];
    for (int r = 0; r < nres && !st; r++) s.kmap[pl->res_vars[r]] = outv[n + r];
    free(in);
    free(outv);
    free(av);
  }
  int *kout = ints(p->nout + s.nres);
  if (!kout) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "partial eval: out of memory");
  int nk = 0;
  for (int o = 0; o < p->nout && !st; o++)
    if (!out->unknown_out[o]) kout[nk++] = s.kmap[p->out[o]];
  for (int r = 0; r < s.nres && !st; r++) kout[nk++] = s.kmap[s.res[r]];
  if (!st) st = jx_program_set_outputs(s.known, nk, kout);
  free(kout);

  /* the unknown program: residuals, then the unknown inputs */
  for (int r = 0; r < s.nres && !st; r++) {
    int v = s.res[r];
    jx_aval a = s.known->avals[s.kmap[v]];
    s.umap[v] = jx_program_add_input(s.unk, a);
  }
  for (int i = 0; i < p->nin && !st; i++)
    if (unknown_in[i]) s.umap[p->in[i]] = jx_program_add_input(s.unk, p->avals[p->in[i]]);
  for (int k = 0; k < p->neqns && !st; k++) {
    struct planned *pl = &s.plan[k];
    const jx_eqn *e = pl->e;
    if (!pl->split && pl->side == 0) continue;
    int nu_out = 0;
    for (int o = 0; o < e->nout; o++) nu_out += !pl->split || pl->uout[o];
    int nin = pl->split ? pl->u.nin : e->nin;
    int *in = ints(nin), *outv = ints(nu_out);
    jx_aval *av = malloc(sizeof *av * (size_t)(nu_out + 1));
    if (!in || !outv || !av) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "partial eval: out of memory");
    for (int i = 0; i < nin && !st; i++) {
      int ref = pl->split ? pl->u.in[i] : i;
      in[i] = ref >= 0 ? s.umap[e->in[ref]] : s.umap[pl->res_vars[-1 - ref]];
    }
    int n = 0;
    for (int o = 0; o < e->nout && !st; o++)
      if (!pl->split || pl->uout[o]) av[n++] = p->avals[e->out[o]];
    if (!st) {
      const jx_prim *prim = pl->split ? pl->u.prim : e->prim;
      const jx_params *params = pl->split ? &pl->u.params : &e->params;
      int nsub = pl->split ? pl->u.nsub : e->nsub;
      jx_program *const *subs = pl->split ? pl->u.sub : e->sub;
      st = jx_program_add_eqn(s.unk, prim, params, nin, in, nu_out, av, outv, nsub, subs, e->loc);
    }
    n = 0;
    for (int o = 0; o < e->nout && !st; o++)
      if (!pl->split || pl->uout[o]) s.umap[e->out[o]] = outv[n++];
    free(in);
    free(outv);
    free(av);
  }
  int *uout = ints(p->nout);
  if (!uout) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "partial eval: out of memory");
  int nu = 0;
  for (int o = 0; o < p->nout && !st; o++)
    if (out->unknown_out[o]) uout[nu++] = s.umap[p->out[o]];
  if (!st) st = jx_program_set_outputs(s.unk, nu, uout);
  free(uout);
  if (!st) {
    out->known = s.known;
    out->unknown = s.unk;
    out->nres = s.nres;
    s.known = s.unk = NULL;
  }
done:
  for (int k = 0; s.plan && k < p->neqns; k++) {
    jx_pe_eqn_free(&s.plan[k].k);
    jx_pe_eqn_free(&s.plan[k].u);
    free(s.plan[k].res_vars);
    free(s.plan[k].res_avals);
    free(s.plan[k].uout);
  }
  jx_program_release(s.known);
  jx_program_release(s.unk);
  free(s.unknown);
  free(s.is_res);
  free(s.kmap);
  free(s.umap);
  free(s.res);
  free(s.plan);
  if (st) {
    free(out->unknown_out);
    out->unknown_out = NULL;
  }
  return st;
}

jx_status jx_linearize(const jx_program *p, const uint8_t *wrt, const uint8_t *out_sel,
                       jx_linearized *lz) {
  memset(lz, 0, sizeof *lz);
  jx_program *j = jx_jvp_program(p, wrt, out_sel);
  if (!j) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  uint8_t *uin = calloc((size_t)j->nin + 1, 1), *force = calloc((size_t)j->nout + 1, 1);
  jx_status st =
      (uin && force) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "linearize: out of memory");
  for (int i = p->nin; i < j->nin && !st; i++) uin[i] = 1;
  for (int o = p->nout; o < j->nout && !st; o++) force[o] = 1;
  jx_split sp = {0};
  if (!st) st = jx_partial_eval(j, uin, force, &sp);
  for (int o = 0; o < p->nout && !st; o++)
    if (sp.unknown_out[o])
      st = jx_error_set(JX_ERR_INTERNAL, "linearize '%s': primal output %d depends on tangents",
                        p->name, o);
  if (!st) {
    lz->fwd = jx_program_retain(sp.known);
    lz->lin = jx_program_retain(sp.unknown);
    lz->nres = sp.nres;
  }
  jx_split_free(&sp);
  jx_program_release(j);
  free(uin);
  free(force);
  return st;
}
