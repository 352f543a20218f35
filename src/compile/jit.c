/* jx_jit: the traced program, simplified (simplify.c), fused into loop
 * kernels compiled from generated C (fusion.c, render_c.c, toolchain.c) and
 * run as an executable (executable.c). */
#include <jx/transform.h>

#include "../base/error.h"
#include "../parallel/sharded_jit.h"
#include "../trace/fn.h"
#include "dump.h"
#include "executable.h"
#include "simplify.h"

static jx_program *jit_build(jx_fn *f, const jx_aval *in) {
  jx_program *p = jx_fn_program(f->inner, in);
  if (!p) return NULL;
  char prefix[300];
  snprintf(prefix, sizeof prefix, "%s.%016llx", f->inner->name,
           (unsigned long long)jx_program_hash(p));
  jx_dump_program(prefix, "0-traced", p);
  jx_program *s = jx_simplify(p);
  jx_program_release(p);
  if (!s) return NULL;
  jx_dump_program(prefix, "1-simplified", s);
  if (jx_compile_attach(s, prefix)) {
    jx_program_release(s);
    return NULL;
  }
  return s;
}

static const jx_fn_kind jit_kind = {.name = "jit", .build = jit_build};

jx_fn *jx_jit(jx_fn *f, const jx_jit_options *opts) {
  if (!f) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_jit: the function is NULL");
    return NULL;
  }
  if (opts && (opts->in_shardings || opts->out_shardings)) return jx_jit_sharded(f, opts);
  /* donation is a permission, not a requirement: the interpreter ignores it */
  return jx_fn_new_transform(&jit_kind, f, f->nin, f->nout, NULL);
}
