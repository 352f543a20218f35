/* The debugging tools' flags and hooks (hooks.h): no-ops until debug/
 * installs its own. */
#include "hooks.h"

#include <time.h>

int jx_debug_flags;
_Thread_local int jx_debug_exec_depth;

double jx_prof_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static jx_status check_eager_off(const struct jx_prim *p, int nin, jx_array *const *in, int nout,
                                 jx_array *const *out) {
  (void)p, (void)nin, (void)in, (void)nout, (void)out;
  return JX_OK;
}
static jx_status check_step_off(const struct jx_program *p, int first, int count, int kernel,
                                jx_array **env) {
  (void)p, (void)first, (void)count, (void)kernel, (void)env;
  return JX_OK;
}
static void compute_off(const char *name, double t0, double t1, double flops, double bytes) {
  (void)name, (void)t0, (void)t1, (void)flops, (void)bytes;
}
static void compute_begin_off(void) {}
static void collective_off(const char *name, double t0, double t1, double bytes, const char *engine,
                           const char *group) {
  (void)name, (void)t0, (void)t1, (void)bytes, (void)engine, (void)group;
}
static void compile_off(const char *name, double t0, const jx_compile_times *t) {
  (void)name, (void)t0, (void)t;
}
static void function_begin_off(const struct jx_program *p, jx_prof_estimate *estimate) {
  (void)p, (void)estimate;
}
static void function_end_off(void) {}
static void branch_off(const char *name, int branch, int64_t label, int tag, double t0, double t1) {
  (void)name, (void)branch, (void)label, (void)tag, (void)t0, (void)t1;
}

static const jx_debug_hooks off = {check_eager_off,    check_step_off,   compute_off,
                                   compute_begin_off,  collective_off,   compile_off,
                                   function_begin_off, function_end_off, branch_off};

const jx_debug_hooks *jx_debug_tools = &off;

void jx_debug_hooks_install(const jx_debug_hooks *hooks) { jx_debug_tools = hooks ? hooks : &off; }
