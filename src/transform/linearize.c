/* Partial evaluation of a JVP program into its known (primal) part and its
 * unknown part, which is linear in the tangents. An equation is unknown when
 * any input is; the known values an unknown equation uses are residuals,
 * computed by the forward program and passed to the linear one. */
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "ad.h"

/* Copies equation e of src into dst with variables renamed through map
 * (src variable -> dst variable); defines map for its outputs. */
static jx_status copy_eqn(jx_program *dst, const jx_program *src, const jx_eqn *e, int *map) {
  int small_in[16], small_out[16];
  jx_aval small_av[16];
  int *in = e->nin > 16 ? malloc(sizeof *in * (size_t)e->nin) : small_in;
  int *out = e->nout > 16 ? malloc(sizeof *out * (size_t)e->nout) : small_out;
  jx_aval *av = e->nout > 16 ? malloc(sizeof *av * (size_t)e->nout) : small_av;
  jx_status st = (in && out && av) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "linearize: out of memory");
  for (int i = 0; i < e->nin && !st; i++) in[i] = map[e->in[i]];
  for (int o = 0; o < e->nout && !st; o++) av[o] = src->avals[e->out[o]];
  if (!st)
    st = jx_program_add_eqn(dst, e->prim, &e->params, e->nin, in, e->nout, av, out, e->nsub,
                            e->sub, e->loc);
  for (int o = 0; o < e->nout && !st; o++) map[e->out[o]] = out[o];
  if (in != small_in) free(in);
  if (out != small_out) free(out);
  if (av != small_av) free(av);
  return st;
}

jx_status jx_linearize(const jx_program *p, const uint8_t *wrt, const uint8_t *out_sel,
                       jx_linearized *lz) {
  memset(lz, 0, sizeof *lz);
  jx_program *j = jx_jvp_program(p, wrt, out_sel);
  if (!j) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  int nx = p->nin, ny = p->nout, nty = j->nout - ny;
  int nv = j->nvars;
  uint8_t *unknown = calloc((size_t)nv + 1, 1), *is_res = calloc((size_t)nv + 1, 1);
  int *fmap = malloc(sizeof *fmap * (size_t)(nv + 1)), *lmap = malloc(sizeof *lmap * (size_t)(nv + 1));
  int *res = malloc(sizeof *res * (size_t)(nv + 1));
  jx_program *fwd = NULL, *lin = NULL;
  jx_status st = (unknown && is_res && fmap && lmap && res)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "linearize: out of memory");
  if (st) goto done;
  for (int v = 0; v < nv; v++) fmap[v] = lmap[v] = -1;
  for (int i = nx; i < j->nin; i++) unknown[j->in[i]] = 1;
  for (int k = 0; k < j->neqns; k++) {
    const jx_eqn *e = &j->eqns[k];
    int unk = 0;
    for (int i = 0; i < e->nin; i++) unk |= unknown[e->in[i]];
    for (int o = 0; o < e->nout; o++) unknown[e->out[o]] = (uint8_t)unk;
  }
  for (int o = 0; o < ny; o++)
    if (unknown[j->out[o]]) {
      st = jx_error_set(JX_ERR_INTERNAL, "linearize '%s': primal output %d depends on tangents",
                        p->name, o);
      goto done;
    }
  /* residuals: known, non-constant values that the linear part reads */
  int nres = 0;
#define NOTE_RESIDUAL(v)                                                                   \
  do {                                                                                     \
    int v_ = (v);                                                                          \
    if (!unknown[v_] && !is_res[v_] && !jx_program_is_const(j, v_, NULL)) {                \
      is_res[v_] = 1;                                                                      \
      res[nres++] = v_;                                                                    \
    }                                                                                      \
  } while (0)
  for (int k = 0; k < j->neqns; k++) {
    const jx_eqn *e = &j->eqns[k];
    int unk = 0;
    for (int i = 0; i < e->nin; i++) unk |= unknown[e->in[i]];
    if (!unk) continue;
    for (int i = 0; i < e->nin; i++) NOTE_RESIDUAL(e->in[i]);
  }
  for (int o = ny; o < ny + nty; o++) NOTE_RESIDUAL(j->out[o]);
#undef NOTE_RESIDUAL

  /* the forward program: primal inputs, known equations; outputs y, residuals */
  char name[300];
  snprintf(name, sizeof name, "fwd(%s)", p->name);
  fwd = jx_program_new(name);
  snprintf(name, sizeof name, "lin(%s)", p->name);
  lin = jx_program_new(name);
  if (!fwd || !lin) {
    st = JX_ERR_OUT_OF_MEMORY;
    goto done;
  }
  for (int i = 0; i < nx; i++) fmap[j->in[i]] = jx_program_add_input(fwd, j->avals[j->in[i]]);
  for (int c = 0; c < j->nconst; c++) {
    fmap[j->constvar[c]] = jx_program_add_const(fwd, j->constval[c]);
    lmap[j->constvar[c]] = jx_program_add_const(lin, j->constval[c]);
  }
  for (int k = 0; k < j->neqns && !st; k++) {
    const jx_eqn *e = &j->eqns[k];
    int unk = 0;
    for (int i = 0; i < e->nin; i++) unk |= unknown[e->in[i]];
    st = unk ? JX_OK : copy_eqn(fwd, j, e, fmap);
  }
  int *fout = malloc(sizeof *fout * (size_t)(ny + nres + 1));
  if (!fout) st = JX_ERR_OUT_OF_MEMORY;
  if (!st) {
    for (int o = 0; o < ny; o++) fout[o] = fmap[j->out[o]];
    for (int r = 0; r < nres; r++) fout[ny + r] = fmap[res[r]];
    st = jx_program_set_outputs(fwd, ny + nres, fout);
  }
  free(fout);

  /* the linear program: residuals and tangents in, unknown equations */
  for (int r = 0; r < nres && !st; r++) lmap[res[r]] = jx_program_add_input(lin, j->avals[res[r]]);
  for (int i = nx; i < j->nin && !st; i++)
    lmap[j->in[i]] = jx_program_add_input(lin, j->avals[j->in[i]]);
  for (int k = 0; k < j->neqns && !st; k++) {
    const jx_eqn *e = &j->eqns[k];
    int unk = 0;
    for (int i = 0; i < e->nin; i++) unk |= unknown[e->in[i]];
    st = unk ? copy_eqn(lin, j, e, lmap) : JX_OK;
  }
  int *lout = malloc(sizeof *lout * (size_t)(nty + 1));
  if (!lout) st = JX_ERR_OUT_OF_MEMORY;
  if (!st) {
    for (int o = 0; o < nty; o++) lout[o] = lmap[j->out[ny + o]];
    st = jx_program_set_outputs(lin, nty, lout);
  }
  free(lout);
  if (!st) {
    lz->fwd = fwd;
    lz->lin = lin;
    lz->nres = nres;
    fwd = lin = NULL;
  }
done:
  jx_program_release(fwd);
  jx_program_release(lin);
  jx_program_release(j);
  free(unknown);
  free(is_res);
  free(fmap);
  free(lmap);
  free(res);
  return st;
}
