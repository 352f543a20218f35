/* jx_jit: the traced program, simplified (simplify.c), compiled and attached
 * by the platform's backend (backend.h; on the CPU: fused into loop kernels
 * compiled from generated C and run as an executable, executable.c). */
#include <jx/transform.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../base/hooks.h"
#include "../trace/fn.h"
#include "backend.h"
#include "dump.h"
#include "jit.h"
#include "simplify.h"

/* JX_LOG_COMPILES=1: where a compilation's time went (the profiler's event
 * is jx_compile's). */
static void report_times(const char *name, const jx_compile_times *t) {
  if (jx_env_flag("JX_LOG_COMPILES"))
    fprintf(stderr,
            "jx: compiled '%s' in %.1f ms: trace %.1f ms, simplify %.1f ms, fusion/codegen %.1f "
            "ms, C compile %.1f ms (%d kernels, %s)\n",
            name, t->total * 1e3, t->trace * 1e3, t->simplify * 1e3, t->codegen * 1e3,
            t->compile * 1e3, t->kernels, t->cache);
}

static jx_program *jit_build(jx_fn *f, const jx_aval *in) {
  double t0 = jx_prof_now();
  jx_program *p = jx_fn_program(f->inner, in);
  if (!p) return NULL;
  double t1 = jx_prof_now();
  char prefix[300];
  snprintf(prefix, sizeof prefix, "%s.%016llx", f->inner->name,
           (unsigned long long)jx_program_hash(p));
  jx_dump_program(prefix, "0-traced", p);
  jx_program *s = jx_simplify(p);
  jx_program_release(p);
  if (!s) return NULL;
  double t2 = jx_prof_now();
  jx_dump_program(prefix, "1-simplified", s);
  jx_compile_times t = {0};
  const jx_backend *b = jx_backend_select(s->name); /* JX_PLATFORM (backend.h) */
  if (!b || b->attach(s, prefix, &t)) {
    jx_program_release(s);
    return NULL;
  }
  /* donation belongs to this jitted function: its executable takes the
   * donated inputs' buffers when it runs */
  if (f->data && b->set_donation(s, f->nin, f->data, f->inner->name)) {
    jx_program_release(s);
    return NULL;
  }
  t.trace = t1 - t0;
  t.simplify = t2 - t1;
  t.total = jx_prof_now() - t0;
  if (!t.cache) t.cache = "no kernels";
  report_times(f->name, &t);
  return s;
}

static const jx_fn_kind jit_kind = {.name = "jit", .build = jit_build, .free_data = free};

static jx_jit_sharded_fn jit_sharded;

void jx_jit_sharded_install(jx_jit_sharded_fn fn) { jit_sharded = fn; }

jx_fn *jx_jit(jx_fn *f, const jx_jit_options *opts) {
  if (!f) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_jit: the function is NULL");
    return NULL;
  }
  if (opts && (opts->in_shardings || opts->out_shardings)) {
    /* donation is a permission, not a requirement: sharded executables run
     * per device and keep their inputs (the shards are not taken) */
    if (opts->donate && jx_env_flag("JX_LOG_COMPILES"))
      fprintf(stderr, "jx: donation to '%s' is ignored: it is jitted with shardings\n", f->name);
    if (!jit_sharded) {
      jx_error_set(JX_ERR_INTERNAL, "jx_jit: '%s' has shardings, and no sharded jit is installed",
                   f->name);
      return NULL;
    }
    return jit_sharded(f, opts);
  }
  int *donate = NULL;
  for (int i = 0; opts && opts->donate && i < f->nin; i++)
    if (opts->donate[i]) {
      donate = calloc((size_t)f->nin, sizeof *donate);
      if (!donate) {
        jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_jit: out of memory");
        return NULL;
      }
      memcpy(donate, opts->donate, sizeof *donate * (size_t)f->nin);
      break;
    }
  return jx_fn_new_transform(&jit_kind, f, f->nin, f->nout, donate);
}
