/* The profiler's cost of a step: the same conventions as compile/cost.c
 * (jx_fn_cost), per equation, so achieved GFLOP/s and GB/s agree with it. */
#include "../prims/prims.h"
#include "hooks.h"

double jx_debug_aval_bytes(jx_aval a) {
  return (double)jx_shape_numel(a.shape) * (double)jx_dtype_size(a.dtype);
}

double jx_debug_eqn_flops(const jx_program *p, const jx_eqn *e) {
  if (e->nout < 1) return 0;
  double n = (double)jx_shape_numel(p->avals[e->out[0]].shape);
  if (e->prim == &jx_prim_dot_general) {
    jx_aval a = p->avals[e->in[0]];
    double k = 1;
    for (int i = 0; i < e->params.l[0].n; i++) k *= (double)a.shape.dims[e->params.l[0].v[i]];
    return 2 * n * k;
  }
  if (e->prim == &jx_prim_conv_general_dilated) {
    jx_aval w = p->avals[e->in[1]];
    double per = (double)jx_shape_numel(w.shape) / (double)w.shape.dims[e->params.l[6].v[0]];
    return 2 * n * per;
  }
  if (e->prim == &jx_prim_reduce_sum || e->prim == &jx_prim_reduce_max ||
      e->prim == &jx_prim_reduce_min || e->prim == &jx_prim_reduce_prod)
    return (double)jx_shape_numel(p->avals[e->in[0]].shape);
  if (e->prim->elementwise) return n;
  return 0;
}
