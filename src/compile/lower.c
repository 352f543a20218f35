/* Inlining custom calls for execution (lower.h). */
#include "lower.h"

#include <stdlib.h>

#include "../base/error.h"
#include "prim_lowering.h"
#include "simplify.h"

int jx_lower_is_custom_call(const jx_eqn *e) {
  return jx_prim_lowering_of(e->prim)->exec == JX_LOWER_EXEC_INLINE && e->nsub >= 1 &&
         e->sub[0]->nin == e->nin && e->sub[0]->nout == e->nout;
}

/* A cast that only types its value (pvary, trace/vma.h). */
static int is_cast(const jx_eqn *e) {
  return jx_prim_lowering_of(e->prim)->exec == JX_LOWER_EXEC_CAST;
}

/* Appends sub's equations to q, sub's inputs read as args (q's variables);
 * results gets q's variables for sub's outputs. Nested custom calls are
 * inlined too, but those keep (may be NULL) keeps. */
static jx_status inline_into(jx_program *q, const jx_program *sub, const int *args, int *results,
                             jx_lower_keep_fn keep) {
  int *map = malloc(sizeof *map * (size_t)(sub->nvars + 1));
  if (!map) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  jx_status st = JX_OK;
  for (int i = 0; i < sub->nin; i++) map[sub->in[i]] = args[i];
  for (int c = 0; c < sub->nconst && !st; c++)
    if ((map[sub->constvar[c]] = jx_program_add_const(q, sub->constval[c])) < 0)
      st = JX_ERR_OUT_OF_MEMORY;
  for (int k = 0; k < sub->neqns && !st; k++) {
    const jx_eqn *e = &sub->eqns[k];
    if (is_cast(e)) { /* nothing to run */
      map[e->out[0]] = map[e->in[0]];
      continue;
    }
    if (!jx_lower_is_custom_call(e) || (keep && keep(sub, e))) {
      st = jx_program_copy_eqn(q, sub, e, map, map);
      continue;
    }
    int *in = malloc(sizeof *in * (size_t)(e->nin + 1)),
        *out = malloc(sizeof *out * (size_t)(e->nout + 1));
    if (!in || !out) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "lowering: out of memory");
    for (int i = 0; i < e->nin && !st; i++) in[i] = map[e->in[i]];
    if (!st) st = inline_into(q, e->sub[0], in, out, keep);
    for (int o = 0; o < e->nout && !st; o++) map[e->out[o]] = out[o];
    free(in);
    free(out);
  }
  for (int o = 0; o < sub->nout && !st; o++) results[o] = map[sub->out[o]];
  free(map);
  return st;
}

jx_program *jx_lower_custom_calls(const jx_program *p) {
  return jx_lower_custom_calls_keeping(p, NULL);
}

jx_program *jx_lower_custom_calls_keeping(const jx_program *p, jx_lower_keep_fn keep) {
  int any = 0;
  for (int k = 0; k < p->neqns && !any; k++)
    any = (jx_lower_is_custom_call(&p->eqns[k]) && !(keep && keep(p, &p->eqns[k]))) ||
          is_cast(&p->eqns[k]);
  if (!any) return jx_program_retain(p);
  jx_program *q = jx_program_new(p->name);
  int *in = malloc(sizeof *in * (size_t)(p->nin + 1)),
      *out = malloc(sizeof *out * (size_t)(p->nout + 1));
  jx_status st =
      (q && in && out) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  for (int i = 0; i < p->nin && !st; i++) in[i] = jx_program_add_input(q, p->avals[p->in[i]]);
  if (!st) st = inline_into(q, p, in, out, keep); /* p's own inputs and constants, as a sub's */
  if (!st) st = jx_program_set_outputs(q, p->nout, out);
  free(in);
  free(out);
  jx_program *s = st ? NULL : jx_simplify(q);
  jx_program_release(q);
  return s;
}
