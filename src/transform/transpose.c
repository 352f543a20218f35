/* Transposing a linear program: cotangents flow from the outputs back through
 * each equation's transpose rule, summed where a value is used twice. */
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/trace.h"
#include "ad.h"
#include "transform_util.h"

static jx_status transpose_eqn(const jx_program *lin, const jx_eqn *e, jx_array **val,
                               jx_array **ct) {
  int any = 0;
  for (int o = 0; o < e->nout; o++) any |= ct[e->out[o]] != NULL;
  if (!any) return JX_OK;
  if (!e->prim->transpose)
    return jx_error_set(JX_ERR_UNIMPLEMENTED,
                        "%s%s%s has no transpose rule, so it cannot be differentiated in "
                        "reverse mode here",
                        e->loc ? e->loc : "", e->loc ? ": " : "", e->prim->name);
  jx_eqn_io io;
  jx_status st = jx_eqn_io_open(&io, e);
  if (st) return st;
  uint8_t lin_small[16];
  jx_aval av_small[16];
  uint8_t *linear = e->nin > 16 ? malloc((size_t)e->nin) : lin_small;
  jx_aval *avals = e->nin > 16 ? malloc(sizeof *avals * (size_t)e->nin) : av_small;
  if (!linear || !avals) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "transpose: out of memory");
  for (int i = 0; i < e->nin && !st; i++) {
    io.in[i] = val[e->in[i]];
    linear[i] = io.in[i] == NULL;
    avals[i] = lin->avals[e->in[i]];
  }
  for (int o = 0; o < e->nout && !st; o++) io.out[o] = ct[e->out[o]];
  if (!st) {
    const char *old = jx_trace_set_default_loc(e->loc);
    const jx_rule_ctx ctx = jx_eqn_rule_ctx(e);
    st = e->prim->transpose(&ctx, io.in, avals, linear, io.out, io.in2);
    jx_trace_set_default_loc(old);
  }
  for (int i = 0; i < e->nin && !st; i++)
    if (linear[i] && io.in2[i]) ct[e->in[i]] = jx_rule_add(ct[e->in[i]], io.in2[i]);
  if (linear != lin_small) free(linear);
  if (avals != av_small) free(avals);
  jx_eqn_io_close(&io);
  return st;
}

static jx_status eval_known(const jx_eqn *e, jx_array **val) {
  jx_eqn_io io;
  jx_status st = jx_eqn_io_open(&io, e);
  if (st) return st;
  for (int i = 0; i < e->nin; i++) io.in[i] = val[e->in[i]];
  const char *old = jx_trace_set_default_loc(e->loc);
  st = jx_bind_sub(e->prim, e->nin, io.in, &e->params, e->nsub, e->sub, io.out);
  jx_trace_set_default_loc(old);
  for (int o = 0; o < e->nout && !st; o++) val[e->out[o]] = io.out[o];
  jx_eqn_io_close(&io);
  return st;
}

jx_program *jx_transpose_program(const jx_program *lin, int nres) {
  uint8_t *mask = calloc((size_t)lin->nin + 1, 1);
  if (!mask) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "transpose: out of memory");
    return NULL;
  }
  for (int i = nres; i < lin->nin; i++) mask[i] = 1;
  jx_program *t = jx_transpose_program_mask(lin, mask);
  free(mask);
  return t;
}

jx_program *jx_transpose_program_mask(const jx_program *lin, const uint8_t *linear) {
  char name[300];
  snprintf(name, sizeof name, "transpose(%s)", lin->name);
  jx_trace *tr = jx_trace_begin(name);
  if (!tr) return NULL;
  jx_scope_begin();
  int nt = 0;
  for (int i = 0; i < lin->nin; i++) nt += linear[i];
  jx_array **val = calloc((size_t)lin->nvars + 1, sizeof *val);
  jx_array **ct = calloc((size_t)lin->nvars + 1, sizeof *ct);
  jx_array **outs = calloc((size_t)nt + 1, sizeof *outs);
  jx_status st =
      (val && ct && outs) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "transpose: out of memory");
  for (int r = 0; r < lin->nin && !st; r++)
    if (!linear[r]) val[lin->in[r]] = jx_trace_input(tr, lin->avals[lin->in[r]]);
  for (int c = 0; c < lin->nconst && !st; c++) val[lin->constvar[c]] = lin->constval[c];
  for (int o = 0; o < lin->nout && !st; o++) {
    jx_aval a = lin->avals[lin->out[o]];
    a.weak = 0;
    jx_array *c = jx_trace_input(tr, a);
    int v = lin->out[o];
    if (!val[v]) ct[v] = jx_rule_add(ct[v], c); /* a known output has no linear part */
  }
  /* equations on known values alone (recomputation inside rematerialized
   * regions) run forward first; the linear ones are transposed backward */
  for (int k = 0; k < lin->neqns && !st; k++) {
    const jx_eqn *e = &lin->eqns[k];
    int known = 1;
    for (int i = 0; i < e->nin && known; i++) known = val[e->in[i]] != NULL;
    if (known) st = eval_known(e, val);
  }
  for (int k = lin->neqns - 1; k >= 0 && !st; k--) {
    const jx_eqn *e = &lin->eqns[k];
    if (e->nout > 0 && val[e->out[0]]) continue; /* computed forward */
    st = transpose_eqn(lin, e, val, ct);
  }
  for (int i = 0, k = 0; i < lin->nin && !st; i++) {
    if (!linear[i]) continue;
    int v = lin->in[i];
    outs[k++] =
        ct[v] ? ct[v] : jx_rule_zeros((jx_aval){lin->avals[v].dtype, 0, lin->avals[v].shape, 0});
  }
  jx_program *result = NULL;
  if (st)
    jx_trace_abort(tr);
  else
    result = jx_trace_end(tr, nt, outs);
  jx_scope_end();
  free(val);
  free(ct);
  free(outs);
  return result;
}
