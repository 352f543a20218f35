/* The attention calls of src/nn/attention_core.h, found as equations
 * (cuda_fuse.h): the executor's lowering keeps them whole instead of
 * inlining their programs, so that a training step's backward, which is
 * one call, runs as the flash-backward kernels without matching what
 * jx_grad and common-subexpression elimination made of the equations. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jx/nn.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../compile/lower.h"
#include "../compile/simplify.h"
#include "../prims/prims.h"
#include "../trace/eval.h"
#include "cuda_fuse.h"
#include "kernels_attention.h"
#include "kernels_attention_bwd.h"
#include "kernels_attention_tc.h"

static int same_type(jx_aval a, jx_aval b) {
  return a.dtype == b.dtype && jx_shape_equal(a.shape, b.shape);
}

int jx_cuda_attention_call(const jx_program *p, const jx_eqn *e, jx_cuda_fused_op *op) {
  if (e->prim != &jx_prim_custom_jvp_call || !jx_lower_is_custom_call(e) || !e->sub[0]->name)
    return 0;
  int fwd = !strcmp(e->sub[0]->name, JX_ATTENTION_FWD_CALL) && e->nin == 3 && e->nout == 2;
  int bwd = !strcmp(e->sub[0]->name, JX_ATTENTION_BWD_CALL) && e->nin == 6 && e->nout == 3;
  if (!fwd && !bwd) return 0;
  jx_aval q = p->avals[e->in[0]];
  if ((q.dtype != JX_F32 && q.dtype != JX_BF16 && q.dtype != JX_F16) || q.shape.rank != 4) return 0;
  jx_cuda_fused_op m;
  memset(&m, 0, sizeof m);
  m.kind = fwd ? JX_CUDA_FUSED_ATTENTION : JX_CUDA_FUSED_ATTENTION_BWD;
  m.dtype = q.dtype;
  m.batch = q.shape.dims[0];
  m.t = q.shape.dims[1];
  m.heads = q.shape.dims[2];
  m.head_dim = q.shape.dims[3];
  m.causal = 1;
  m.scale = (float)(1 / sqrt((double)m.head_dim)); /* as the core rounds it */
  /* f16: the tensor-core kernels alone (the plan checks the device) */
  if (!(m.dtype == JX_F16 ? jx_cuda_attention_tc_kernel(m.dtype, m.head_dim)
                          : jx_cuda_attention_kernel(m.dtype, m.head_dim)) ||
      m.batch > 65535 || m.heads > 65535)
    return 0;
  /* the types the calls have (attention_core.h): anything else is not ours */
  jx_aval bhtd = {q.dtype, 0, {4, {m.batch, m.heads, m.t, m.head_dim}}, 0};
  jx_aval lse = {JX_F32, 0, {3, {m.batch, m.heads, m.t}}, 0};
  jx_aval want_in[6] = {q, q, q, bhtd, lse, bhtd};
  jx_aval want_out[3] = {fwd ? bhtd : q, fwd ? lse : q, q};
  for (int i = 0; i < e->nin; i++)
    if (!same_type(p->avals[e->in[i]], want_in[i])) return 0;
  for (int o = 0; o < e->nout; o++)
    if (!same_type(p->avals[e->out[o]], want_out[o])) return 0;
  m.nreads = e->nin;
  for (int i = 0; i < e->nin; i++) m.reads[i] = e->in[i];
  m.nouts = e->nout;
  for (int o = 0; o < e->nout; o++) m.outs[o] = e->out[o];
  *op = m;
  return 1;
}

int jx_cuda_match_attention_call(const jx_program *p, const jx_cuda_fuse_index *ix, int root,
                                 jx_cuda_fused_op *op, uint8_t *member) {
  (void)ix;
  if (!jx_cuda_attention_call(p, &p->eqns[root], op)) return 0;
  member[root] = 1;
  return 1;
}

/* ---- the lowering ---- */

/* The lowering keeps the attention calls the kernels take. */
static int kept(const jx_program *p, const jx_eqn *e) {
  jx_cuda_fused_op op;
  return jx_cuda_attention_call(p, e, &op);
}

/* A kept call's program runs on the host only should the plan not take the
 * call; it gets an executable that interprets it (a copy of it, evaluated
 * eagerly), so that compiling the nested programs for the host
 * (control_compile.h) leaves it alone instead of compiling C for it. */
static jx_status run_on_host(void *exec, const jx_program *p, jx_array *const *in, jx_array **out) {
  (void)p;
  return jx_program_eval(exec, in, out);
}
static void free_on_host(void *exec) { jx_program_release(exec); }

static jx_status interpret_kept_calls(const jx_program *p, jx_exec_nested *host_calls) {
  jx_status st = JX_OK;
  for (int k = 0; k < p->neqns && !st; k++) {
    const jx_eqn *e = &p->eqns[k];
    jx_cuda_fused_op op;
    const jx_program *sub = e->nsub ? e->sub[0] : NULL;
    if (!jx_cuda_attention_call(p, e, &op) || jx_program_executable(sub) ||
        jx_exec_nested_find(host_calls, sub).run)
      continue;
    jx_program *copy = jx_simplify(sub);
    if (!copy) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    st = jx_exec_nested_add(host_calls, sub, (jx_exec){copy, run_on_host, free_on_host});
  }
  return st;
}

jx_program *jx_cuda_fused_lower(const jx_program *p, jx_exec_nested *host_calls) {
  if (jx_env_flag("JX_CUDA_NO_FUSE")) return jx_lower_custom_calls(p);
  /* p itself when there is nothing to inline: its kept calls are marked then */
  jx_program *s = jx_lower_custom_calls_keeping(p, kept);
  if (s && interpret_kept_calls(s, host_calls)) {
    jx_program_release(s);
    s = NULL;
  }
  return s;
}
