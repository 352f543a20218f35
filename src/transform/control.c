#include "control.h"

#include <stdlib.h>

#include "../base/error.h"
#include "../prims/prims.h"
#include "../trace/eval.h"
#include "../trace/fn.h"

jx_status jx_wrapper_infer(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  (void)ctx;
  (void)in;
  (void)out;
  return JX_OK;
}

jx_status jx_wrapper_outputs(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  (void)in;
  if (ctx->nsub < 1 || ctx->subs[0]->nout != ctx->nout)
    return jx_error_set(JX_ERR_INTERNAL, "a wrapped program has %d outputs, not %d",
                        ctx->nsub < 1 ? -1 : ctx->subs[0]->nout, ctx->nout);
  for (int o = 0; o < ctx->nout; o++) out[o] = ctx->subs[0]->avals[ctx->subs[0]->out[o]];
  return JX_OK;
}

jx_status jx_wrapper_impl(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  return jx_program_eval(ctx->subs[0], in, out);
}

int jx_aval_same_type(jx_aval a, jx_aval b) {
  return a.dtype == b.dtype && jx_shape_equal(a.shape, b.shape);
}

jx_program *jx_control_trace(const char *op, const char *role, jx_fn *f, int nin,
                             const jx_aval *avals) {
  if (!f) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the %s function is NULL", op, role);
    return NULL;
  }
  if (f->nin != nin) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the %s function '%s' takes %d inputs but gets %d",
                 op, role, f->name, f->nin, nin);
    return NULL;
  }
  return jx_fn_program(f, avals);
}

jx_status jx_control_trace_branches(const char *op, int nbranches, jx_fn *const *branches, int n,
                                    jx_array *const *ops, jx_program **out) {
  jx_aval *av = malloc(sizeof *av * (size_t)(n + 1));
  if (!av) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (int i = 0; i < n; i++)
    av[i] = (jx_aval){ops[i]->dtype, ops[i]->weak, ops[i]->shape, jx_array_vma(ops[i])};
  jx_status st = JX_OK;
  for (int k = 0; k < nbranches && !st; k++) {
    char role[32];
    snprintf(role, sizeof role, "branch %d", k);
    out[k] = jx_control_trace(op, role, branches[k], n, av);
    if (!out[k]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  for (int k = 1; k < nbranches && !st; k++) {
    const jx_program *a = out[0], *b = out[k];
    if (a->nout != b->nout) {
      st = jx_error_set(JX_ERR_SHAPE, "%s: branch 0 has %d outputs but branch %d has %d", op,
                        a->nout, k, b->nout);
      break;
    }
    for (int o = 0; o < a->nout && !st; o++) {
      jx_aval x = a->avals[a->out[o]], y = b->avals[b->out[o]];
      if (!jx_aval_same_type(x, y)) {
        char s1[JX_AVAL_STR_CAP], s2[JX_AVAL_STR_CAP];
        st = jx_error_set(JX_ERR_SHAPE,
                          "%s: output %d is %s in branch 0 but %s in branch %d; every branch "
                          "must give the same types",
                          op, o, jx_aval_str(x.dtype, x.shape, s1),
                          jx_aval_str(y.dtype, y.shape, s2), k);
      }
    }
  }
  free(av);
  return st;
}
