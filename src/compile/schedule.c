/* Hoisting scalar equations (schedule.h). */
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

#include "../array/array.h"
#include "../base/error.h"

/* A computation on one element with no effect and no nested program: moving
 * it changes no value, and it costs nothing wherever it runs. */
static int hoistable(const jx_program *p, const jx_eqn *e) {
  if (e->prim->effect || e->nsub || e->nout != 1) return 0;
  return jx_shape_numel(p->avals[e->out[0]].shape) <= 1;
}

jx_program *jx_hoist_scalars(jx_program *p) {
  int ne = p->neqns;
  int *order = malloc(sizeof *order * (size_t)(ne + 1));
  int *slot = malloc(sizeof *slot * (size_t)(p->nvars + 1)); /* defining equation's place */
  int *map = malloc(sizeof *map * (size_t)(p->nvars + 1));
  int *outs = malloc(sizeof *outs * (size_t)(p->nout + 1));
  jx_program *q = NULL;
  if (!order || !slot || !map || !outs) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    goto done;
  }
  /* the new order: a scalar right after the last definer of its inputs
   * (inputs and constants count as defined before everything) */
  for (int v = 0; v < p->nvars; v++) slot[v] = -1;
  int n = 0, moved = 0;
  for (int k = 0; k < ne; k++) {
    const jx_eqn *e = &p->eqns[k];
    int at = n;
    if (hoistable(p, e)) {
      at = 0;
      for (int i = 0; i < e->nin; i++)
        if (slot[e->in[i]] + 1 > at) at = slot[e->in[i]] + 1;
    }
    if (at < n) {
      moved = 1;
      memmove(order + at + 1, order + at, sizeof *order * (size_t)(n - at));
      for (int j = at + 1; j <= n; j++)
        for (int o = 0; o < p->eqns[order[j]].nout; o++) slot[p->eqns[order[j]].out[o]] = j;
    }
    order[at] = k;
    for (int o = 0; o < e->nout; o++) slot[e->out[o]] = at;
    n++;
  }
  if (!moved) {
    q = jx_program_retain(p);
    goto done;
  }
  q = jx_program_new(p->name);
  jx_status st = q ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  for (int i = 0; i < p->nin && !st; i++)
    map[p->in[i]] = jx_program_add_input(q, p->avals[p->in[i]]);
  for (int c = 0; c < p->nconst && !st; c++)
    map[p->constvar[c]] = jx_program_add_const(q, p->constval[c]);
  for (int j = 0; j < ne && !st; j++) st = jx_program_copy_eqn(q, p, &p->eqns[order[j]], map, map);
  for (int o = 0; o < p->nout && !st; o++) outs[o] = map[p->out[o]];
  if (!st) st = jx_program_set_outputs(q, p->nout, outs);
  if (st) {
    jx_program_release(q);
    q = NULL;
  }
done:
  free(order);
  free(slot);
  free(map);
  free(outs);
  return q;
}
