/* jx_jit: the traced program, simplified (simplify.c) and run by the
 * interpreter. Code generation, fusion and memory planning come next. */
#include <jx/transform.h>

#include "../base/error.h"
#include "../trace/fn.h"
#include "simplify.h"

static jx_program *jit_build(jx_fn *f, const jx_aval *in) {
  jx_program *p = jx_fn_program(f->inner, in);
  if (!p) return NULL;
  jx_program *s = jx_simplify(p);
  jx_program_release(p);
  return s;
}

static const jx_fn_kind jit_kind = {.name = "jit", .build = jit_build};

jx_fn *jx_jit(jx_fn *f, const jx_jit_options *opts) {
  if (!f) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_jit: the function is NULL");
    return NULL;
  }
  if (opts && (opts->in_shardings || opts->out_shardings)) {
    jx_error_set(JX_ERR_UNIMPLEMENTED, "jx_jit: shardings need the parallel runtime, which "
                                       "this build does not have yet");
    return NULL;
  }
  /* donation is a permission, not a requirement: the interpreter ignores it */
  return jx_fn_new_transform(&jit_kind, f, f->nin, f->nout, NULL);
}
