#include "dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/memstats.h"
#include "../base/hooks.h"
#include "../prims/prims.h"
#include "follow_data.h"
#include "trace.h"

enum { SMALL = 16 };

jx_status jx_check_inputs(const char *op, int n, jx_array *const *in) {
  for (int i = 0; i < n; i++) {
    if (!in[i]) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: argument %d is NULL", op, i);
    if (in[i]->poisoned) return jx_error_fail_call(JX_ERR_POISONED);
    if (in[i]->released) return jx_released_error(in[i], op, i);
    if (jx_array_valueless(in[i])) return jx_valueless_error(in[i], op);
  }
  return JX_OK;
}

jx_array *const *jx_inputs_apart(const char *op, jx_array *const *in, int nin, jx_array *const *out,
                                 int nout, jx_array ***copy) {
  *copy = NULL;
  if (!in || !out || nin <= 0 || nout <= 0) return in;
  uintptr_t i0 = (uintptr_t)in, i1 = (uintptr_t)(in + nin);
  uintptr_t o0 = (uintptr_t)out, o1 = (uintptr_t)(out + nout);
  if (!(i0 < o1 && o0 < i1)) return in;
  *copy = malloc(sizeof **copy * (size_t)nin);
  if (!*copy) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return in;
  }
  memcpy(*copy, in, sizeof **copy * (size_t)nin);
  return *copy;
}

static jx_status run_eager(const jx_prim *p, int nin, jx_array *const *in, const jx_params *pp,
                           int nout, jx_array **out, jx_aval *avals, jx_aval *oavals,
                           jx_tensor *tin, jx_tensor *tout) {
  for (int i = 0; i < nin; i++) {
    jx_status st = jx_array_ready(in[i]); /* a pending or device-resident input arrives */
    if (st) return st;
    avals[i] = (jx_aval){in[i]->dtype, in[i]->weak, in[i]->shape, 0};
    tin[i] = (jx_tensor){in[i]->buf->data, in[i]->dtype, in[i]->shape};
  }
  const jx_rule_ctx ctx = {p, pp, nin, nout, 0, NULL};
  jx_status st = jx_prim_check_complex(p, nin, avals, "operand");
  if (!st) st = p->infer(&ctx, avals, oavals);
  if (!st) st = jx_prim_check_outputs(p, nout, oavals);
  if (!st) st = jx_prim_check_complex(p, nout, oavals, "result");
  if (st) return st;
  for (int o = 0; o < nout; o++) {
    out[o] = jx_array_alloc(oavals[o].dtype, oavals[o].shape, oavals[o].weak);
    if (out[o]->poisoned) return JX_ERR_OUT_OF_MEMORY;
    tout[o] = (jx_tensor){out[o]->buf->data, oavals[o].dtype, oavals[o].shape};
  }
  p->eval(&ctx, tin, tout);
  return JX_OK;
}

/* After an eager application: the profiler's span and the NaN/Inf checks. */
static jx_status after_eager(const jx_prim *p, int nin, jx_array *const *in, int nout,
                             jx_array **out, jx_status st, int watched, double t0,
                             const char *old_op) {
  jx_memstats_set_op(old_op);
  if (!watched) return st;
  if (watched & JX_DEBUG_PROFILE) jx_prof_compute(p->name, t0, jx_prof_now(), 0, 0);
  if (!st && (watched & (JX_DEBUG_NANS | JX_DEBUG_INFS))) {
    st = jx_debug_check_eager(p, nin, in, nout, out);
    if (st)
      for (int o = 0; o < nout; o++) out[o] = jx_poison();
  }
  return st;
}

/* jx_bind: recorded into the innermost trace when there is one or an input
 * is a tracer, else run eagerly (on the operands' mesh when they are
 * sharded). */
static jx_status dispatch(const jx_prim *p, int nin, jx_array *const *in, const jx_params *pp,
                          int nsub, struct jx_program *const *subs, jx_array **out) {
  int nout = jx_prim_nout(p, nin, pp);
  for (int o = 0; o < nout; o++) out[o] = jx_poison();
  if (p->nin != JX_VARIADIC && nin != p->nin)
    return jx_error_set(JX_ERR_INTERNAL, "%s: takes %d operands, given %d", p->name, p->nin, nin);
  if (p->nin == JX_VARIADIC && nin < 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs at least one operand", p->name);
  jx_status st = jx_check_inputs(p->name, nin, in);
  if (st) return st;
  int traced = jx_trace_active();
  for (int i = 0; i < nin && !traced; i++) traced = jx_is_tracer(in[i]);
  if (traced) {
    st = jx_trace_record(p, pp, nin, in, nout, out, nsub, subs);
    if (st)
      for (int o = 0; o < nout; o++) out[o] = jx_poison();
    return st;
  }
  /* the debugging tools (base/hooks.h): one branch while they are off */
  int watched = jx_debug_flags;
  double t0 = 0;
  const char *old_op = jx_memstats_set_op(p->name);
  if (watched & JX_DEBUG_PROFILE) {
    jx_prof_compute_begin();
    t0 = jx_prof_now();
  }
  if (jx_follow_data->eager_follows(p, nin, in, nsub, subs)) { /* runs on its operands' mesh */
    st = jx_follow_data->eager_run(p, nin, in, pp, nsub, subs, nout, out);
    return after_eager(p, nin, in, nout, out, st, watched, t0, old_op);
  }
  if (p->impl) {
    const jx_rule_ctx ctx = {p, pp, nin, nout, nsub, subs};
    st = p->impl(&ctx, in, out);
    if (st)
      for (int o = 0; o < nout; o++) out[o] = jx_poison();
    return after_eager(p, nin, in, nout, out, st, watched, t0, old_op);
  }

  jx_aval avals_s[SMALL], oavals_s[SMALL];
  jx_tensor tin_s[SMALL], tout_s[SMALL];
  int big = nin > SMALL || nout > SMALL;
  jx_aval *avals = avals_s, *oavals = oavals_s;
  jx_tensor *tin = tin_s, *tout = tout_s;
  if (big) {
    avals = malloc(sizeof *avals * (size_t)nin);
    oavals = malloc(sizeof *oavals * (size_t)nout);
    tin = malloc(sizeof *tin * (size_t)nin);
    tout = malloc(sizeof *tout * (size_t)nout);
    if (!avals || !oavals || !tin || !tout) {
      st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", p->name);
      goto done;
    }
  }
  st = run_eager(p, nin, in, pp, nout, out, avals, oavals, tin, tout);
  if (st)
    for (int o = 0; o < nout; o++) out[o] = jx_poison();
done:
  if (big) {
    free(avals);
    free(oavals);
    free(tin);
    free(tout);
  }
  return after_eager(p, nin, in, nout, out, st, watched, t0, old_op);
}

__attribute__((constructor)) void jx_dispatch_install(void) { jx_bind_install(dispatch); }
