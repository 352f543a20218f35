/* The verifier: SSA form (every variable defined exactly once, before its
 * uses) and every equation's avals agreeing with its primitive's shape rule. */
#include <stdlib.h>

#include "../base/error.h"
#include "axis_env.h"
#include "program.h"

static jx_status check_use(const jx_program *p, const char *defined, int v, const char *what) {
  if (v < 0 || v >= p->nvars)
    return jx_error_set(JX_ERR_INTERNAL, "verify '%s': %s uses variable %d of %d", p->name, what, v,
                        p->nvars);
  if (!defined[v])
    return jx_error_set(JX_ERR_INTERNAL, "verify '%s': %s uses variable %d before it is defined",
                        p->name, what, v);
  return JX_OK;
}

static jx_status define(const jx_program *p, char *defined, int v, const char *what) {
  if (v < 0 || v >= p->nvars)
    return jx_error_set(JX_ERR_INTERNAL, "verify '%s': %s defines variable %d of %d", p->name, what,
                        v, p->nvars);
  if (defined[v])
    return jx_error_set(JX_ERR_INTERNAL, "verify '%s': %s redefines variable %d", p->name, what, v);
  defined[v] = 1;
  return JX_OK;
}

static int aval_equal(jx_aval a, jx_aval b) {
  return a.dtype == b.dtype && jx_shape_equal(a.shape, b.shape);
}

static jx_status verify_eqn(const jx_program *p, const jx_eqn *e, char *defined) {
  jx_status st = JX_OK;
  jx_aval *in = malloc(sizeof *in * (size_t)(e->nin + 1));
  jx_aval *out = malloc(sizeof *out * (size_t)(e->nout + 1));
  if (!in || !out) {
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "verify: out of memory");
    goto done;
  }
  for (int i = 0; i < e->nin && !st; i++) {
    st = check_use(p, defined, e->in[i], e->prim->name);
    if (!st) in[i] = p->avals[e->in[i]];
  }
  if (st) goto done;
  if (e->prim->infer) {
    const jx_rule_ctx ctx = {e->prim, &e->params, e->nin, e->nout, e->nsub, e->sub};
    st = e->prim->infer(&ctx, in, out);
    if (!st && e->prim->outputs) st = e->prim->outputs(&ctx, in, out);
    if (st) goto done;
    for (int o = 0; o < e->nout; o++)
      if (!aval_equal(out[o], p->avals[e->out[o]])) {
        char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
        st = jx_error_set(JX_ERR_INTERNAL, "verify '%s': %s output %d is %s but its rule gives %s",
                          p->name, e->prim->name, o,
                          jx_aval_str(p->avals[e->out[o]].dtype, p->avals[e->out[o]].shape, a),
                          jx_aval_str(out[o].dtype, out[o].shape, b));
        goto done;
      }
  }
  int bound = e->prim->bind_sub_axes ? e->prim->bind_sub_axes(&e->params) : 0;
  for (int s = 0; s < e->nsub && !st; s++) st = jx_program_verify(e->sub[s]);
  while (bound-- > 0) jx_axis_pop();
  for (int o = 0; o < e->nout && !st; o++) st = define(p, defined, e->out[o], e->prim->name);
done:
  free(in);
  free(out);
  return st;
}

jx_status jx_program_verify(const jx_program *p) {
  char *defined = calloc((size_t)p->nvars + 1, 1);
  if (!defined) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "verify: out of memory");
  jx_status st = JX_OK;
  for (int i = 0; i < p->nin && !st; i++) st = define(p, defined, p->in[i], "an input");
  for (int c = 0; c < p->nconst && !st; c++) st = define(p, defined, p->constvar[c], "a constant");
  for (int i = 0; i < p->neqns && !st; i++) st = verify_eqn(p, &p->eqns[i], defined);
  for (int o = 0; o < p->nout && !st; o++) st = check_use(p, defined, p->out[o], "an output");
  free(defined);
  return st;
}
