#include "build.h"

#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/trace.h"
#include "ad.h"
#include "vmap.h"

jx_program *jx_program_build(const char *name, int nin, const jx_aval *in, int nout, jx_build_fn fn,
                             void *ctx) {
  jx_trace *t = jx_trace_begin(name);
  if (!t) return NULL;
  jx_scope_begin();
  jx_array **x = calloc((size_t)nin + 1, sizeof *x), **y = calloc((size_t)nout + 1, sizeof *y);
  jx_status st = (x && y) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
  for (int i = 0; i < nin && !st; i++) x[i] = jx_trace_input(t, in[i]);
  if (!st) st = fn(ctx, x, y);
  if (!st && jx_error_pending()) st = jx_last_status();
  jx_program *p = NULL;
  if (st)
    jx_trace_abort(t);
  else
    p = jx_trace_end(t, nout, y);
  jx_scope_end();
  free(x);
  free(y);
  return p;
}

jx_aval jx_aval_stacked(jx_aval a, int64_t n) {
  jx_aval r = a;
  r.shape.rank = a.shape.rank + 1;
  r.shape.dims[0] = n;
  for (int i = 0; i < a.shape.rank; i++) r.shape.dims[i + 1] = a.shape.dims[i];
  return r;
}

jx_aval jx_aval_unstacked(jx_aval a) {
  jx_aval r = a;
  r.shape.rank = a.shape.rank - 1;
  for (int i = 0; i < r.shape.rank; i++) r.shape.dims[i] = a.shape.dims[i + 1];
  return r;
}

/* ---- which outputs get tangents ---- */
typedef struct {
  const jx_program *p;
  const uint8_t *nz_in;
  uint8_t *nz_out;
} nz_ctx;

static jx_status probe_tangents(void *ctx, jx_array *const *in, jx_array **out) {
  nz_ctx *c = ctx;
  const jx_program *p = c->p;
  jx_array **t = calloc((size_t)p->nin + 1, sizeof *t);
  jx_array **y = calloc((size_t)p->nout + 1, sizeof *y),
           **ty = calloc((size_t)p->nout + 1, sizeof *ty);
  jx_status st = (t && y && ty) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jvp: out of memory");
  for (int i = 0; i < p->nin && !st; i++) t[i] = c->nz_in[i] ? in[p->nin + i] : NULL;
  if (!st) st = jx_jvp_eval(p, in, t, y, ty);
  for (int o = 0; o < p->nout && !st; o++) {
    c->nz_out[o] = ty[o] != NULL;
    out[o] = y[o];
  }
  free(t);
  free(y);
  free(ty);
  return st;
}

jx_status jx_jvp_nonzero_outputs(const jx_program *p, const uint8_t *nz_in, uint8_t *nz_out) {
  jx_aval *av = malloc(sizeof *av * (size_t)(2 * p->nin + 1));
  if (!av) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jvp: out of memory");
  for (int i = 0; i < p->nin; i++) av[i] = av[p->nin + i] = p->avals[p->in[i]];
  nz_ctx c = {p, nz_in, nz_out};
  jx_program *probe = jx_program_build("probe", 2 * p->nin, av, p->nout, probe_tangents, &c);
  free(av);
  if (!probe) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_program_release(probe);
  return JX_OK;
}

jx_status jx_carry_fixpoint(const jx_program *body, int ncarry, jx_flags_fn flags_of,
                            const uint8_t *allowed, uint8_t *flags, uint8_t *out) {
  for (int changed = 1; changed;) {
    changed = 0;
    jx_status st = flags_of(body, flags, out);
    if (st) return st;
    for (int i = 0; i < ncarry; i++)
      if (out[i] && !flags[i] && (!allowed || allowed[i])) flags[i] = changed = 1;
  }
  return JX_OK;
}

/* ---- batching ---- */
typedef struct {
  const jx_program *p;
  const uint8_t *b_in, *b_out;
  uint8_t *probe_out; /* when probing: which outputs came out batched */
  int64_t n;
} batch_ctx;

static jx_status run_batched(void *ctx, jx_array *const *in, jx_array **out) {
  batch_ctx *c = ctx;
  const jx_program *p = c->p;
  int *bd = malloc(sizeof *bd * (size_t)(p->nin + 1)),
      *yb = malloc(sizeof *yb * (size_t)(p->nout + 1));
  jx_array **y = calloc((size_t)p->nout + 1, sizeof *y);
  jx_status st =
      (bd && yb && y) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  for (int i = 0; i < p->nin && !st; i++) bd[i] = c->b_in[i] ? 0 : JX_NOT_MAPPED;
  if (!st) st = jx_vmap_eval(p, in, bd, c->n, y, yb);
  for (int o = 0; o < p->nout && !st; o++) {
    if (c->probe_out) {
      c->probe_out[o] = yb[o] != JX_NOT_MAPPED;
      out[o] = y[o];
    } else if (c->b_out[o]) {
      out[o] = jx_rule_batch_to_front(y[o], yb[o], c->n);
    } else if (yb[o] != JX_NOT_MAPPED) {
      st = jx_error_set(JX_ERR_INTERNAL, "vmap: output %d of '%s' is batched unexpectedly", o,
                        p->name);
    } else {
      out[o] = y[o];
    }
  }
  free(bd);
  free(yb);
  free(y);
  return st;
}

static jx_aval *batched_avals(const jx_program *p, const uint8_t *b_in, int64_t n) {
  jx_aval *av = malloc(sizeof *av * (size_t)(p->nin + 1));
  if (!av) return NULL;
  for (int i = 0; i < p->nin; i++)
    av[i] = b_in[i] ? jx_aval_stacked(p->avals[p->in[i]], n) : p->avals[p->in[i]];
  return av;
}

jx_status jx_batched_outputs(const jx_program *p, const uint8_t *b_in, uint8_t *b_out) {
  jx_aval *av = batched_avals(p, b_in, 2);
  if (!av) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  batch_ctx c = {p, b_in, NULL, b_out, 2};
  jx_program *probe = jx_program_build("probe", p->nin, av, p->nout, run_batched, &c);
  free(av);
  if (!probe) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_program_release(probe);
  return JX_OK;
}

jx_program *jx_batch_program(const jx_program *p, const uint8_t *b_in, int64_t n,
                             const uint8_t *b_out) {
  jx_aval *av = batched_avals(p, b_in, n);
  if (!av) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "vmap: out of memory");
    return NULL;
  }
  char name[300];
  snprintf(name, sizeof name, "vmap(%s)", p->name);
  batch_ctx c = {p, b_in, b_out, NULL, n};
  jx_program *r = jx_program_build(name, p->nin, av, p->nout, run_batched, &c);
  free(av);
  return r;
}
