/* Layout rule: shard_map, a manual region. Its operands are read as its in
 * shardings lay them out and its results are its out shardings' blocks; the
 * local op is the body itself, inlined into the per-device program (the
 * mesh's axes are bound there, so its collectives are the per-device
 * program's). A shard_map over another mesh than the one the program is
 * placed on is an error. */
#include <stdlib.h>

#include "../base/error.h"
#include "../trace/eval.h"
#include "propagate.h"
#include "shard_map.h"

static jx_status plan_manual(jx_plan *pl) {
  const jx_eqn *e = pl->e;
  int n = e->nin > e->nout ? e->nin : e->nout;
  jx_sharding **sh = malloc(sizeof *sh * (size_t)(n + 1));
  if (!sh) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory partitioning");
  jx_mesh *m = NULL;
  jx_status st = jx_smap_decode(&e->params, 1, e->nin, &m, sh);
  if (!st && m != pl->mesh) {
    char a[512], b[512];
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "jx_jit: a shard_map over the mesh (%s) in a program placed on the mesh "
                      "(%s); one program runs on one mesh",
                      jx_mesh_text(m, 1, a, sizeof a), jx_mesh_text(pl->mesh, 1, b, sizeof b));
  }
  for (int i = 0; i < e->nin && !st; i++)
    pl->req[i] = jx_pspec_of(sh[i], pl->p->avals[e->in[i]].shape.rank);
  if (!st) st = jx_smap_decode(&e->params, 2, e->nout, NULL, sh);
  for (int o = 0; o < e->nout && !st; o++)
    pl->prod[o] = jx_pspec_of(sh[o], pl->p->avals[e->out[o]].shape.rank);
  free(sh);
  return st;
}

static jx_status apply_manual(const jx_plan *pl, jx_array *const *in, jx_array **out) {
  return jx_program_eval(pl->e->sub[0], in, out);
}

const jx_pfamily jx_pfamily_manual = {
    .name = "manual", .plan = plan_manual, .local_apply = apply_manual};
