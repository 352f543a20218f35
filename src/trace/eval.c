#include "eval.h"

#include <stdlib.h>

#include "../base/error.h"
#include "../ir/exec.h"
#include "dispatch.h"
#include "follow_data.h"
#include "trace.h"

enum { SMALL = 16 };

jx_status jx_program_eval(const jx_program *p, jx_array *const *in, jx_array **out) {
  for (int o = 0; o < p->nout; o++) out[o] = jx_poison();
  jx_exec x = jx_trace_active() ? (jx_exec){0} : jx_program_exec(p);
  if (x.run) { /* compiled, and not being inlined into a trace */
    int concrete = 1;
    for (int i = 0; i < p->nin && concrete; i++) concrete = !jx_is_tracer(in[i]);
    /* computation follows data: a program compiled for one device runs on
     * the mesh of its sharded arguments (follow_data.h) */
    if (concrete && jx_follow_data->program_follows(p, in))
      return jx_follow_data->program_run(p, in, out);
    if (concrete) return x.run(x.impl, p, in, out);
  }
  jx_array **env = calloc((size_t)p->nvars + 1, sizeof *env);
  if (!env) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "'%s': out of memory", p->name);
  for (int i = 0; i < p->nin; i++) env[p->in[i]] = in[i];
  for (int c = 0; c < p->nconst; c++) env[p->constvar[c]] = p->constval[c];
  jx_status st = JX_OK;
  for (int k = 0; k < p->neqns && !st; k++) {
    const jx_eqn *e = &p->eqns[k];
    jx_array *ins_s[SMALL], *outs_s[SMALL];
    jx_array **ins = e->nin > SMALL ? malloc(sizeof *ins * (size_t)e->nin) : ins_s;
    jx_array **outs = e->nout > SMALL ? malloc(sizeof *outs * (size_t)e->nout) : outs_s;
    if (!ins || !outs) {
      st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "'%s': out of memory", p->name);
    } else {
      for (int i = 0; i < e->nin; i++) ins[i] = env[e->in[i]];
      /* equations inlined into a trace keep the location they were traced at */
      const char *old = jx_trace_set_default_loc(e->loc);
      st = jx_bind_sub(e->prim, e->nin, ins, &e->params, e->nsub, e->sub, outs);
      jx_trace_set_default_loc(old);
      for (int o = 0; o < e->nout && !st; o++) env[e->out[o]] = outs[o];
    }
    if (ins != ins_s) free(ins);
    if (outs != outs_s) free(outs);
  }
  /* an output that is an input or a constant gets its own reference in the
   * caller's scope: it must outlive the program and the caller's inputs */
  if (!st)
    for (int o = 0; o < p->nout; o++) {
      out[o] = env[p->out[o]];
      if (!jx_is_tracer(out[o]) && !jx_program_defines(p, p->out[o]))
        jx_scope_adopt(jx_keep(out[o]));
    }
  free(env);
  return st;
}
