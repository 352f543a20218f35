/* The debugging tools' hooks, called from the layers they watch (dispatch,
 * the executable, the jit, collectives). The tools live in debug/, above
 * every layer they watch, so they reach them through this table: debug/
 * installs its functions at load (debug/tools.c); until then each hook does
 * nothing. Every hook sits behind a test of jx_debug_flags, so while no tool
 * is on a hook costs one load and one branch. */
#ifndef JX_SRC_BASE_HOOKS_H
#define JX_SRC_BASE_HOOKS_H

#include <jx/array.h>

struct jx_prim;
struct jx_program;

enum {
  JX_DEBUG_NANS = 1,    /* JX_DEBUG_NANS=1: a NaN an op produces is an error */
  JX_DEBUG_INFS = 2,    /* JX_DEBUG_INFS=1: so is an infinity */
  JX_DEBUG_PROFILE = 4, /* a profiler runs */
};
extern int jx_debug_flags; /* read at load from the environment; set by the tools */

/* A compilation: phases in seconds (negative: not run). */
typedef struct {
  double trace, simplify, codegen, compile, total;
  int kernels;
  const char *cache; /* "compiled", "disk cache", "memory cache", "no kernels" */
} jx_compile_times;

/* The profiler's estimate of an executable's peak of live buffers (the cost
 * model's, as jx_fn_cost), computed on its first profiled run; the
 * executable keeps it, zeroed when it is built. */
typedef struct {
  double bytes;
  int known;
} jx_prof_estimate;

/* Seconds, monotonic: the clock of the profiler's spans and the jit's build
 * times. */
double jx_prof_now(void);

/* Depth of executable runs on this thread: eager checks pause inside one
 * (the executable checks its steps itself). */
extern _Thread_local int jx_debug_exec_depth;
static inline void jx_debug_exec_enter(void) { jx_debug_exec_depth++; }
static inline void jx_debug_exec_leave(void) { jx_debug_exec_depth--; }

typedef struct {
  /* ---- NaN/Inf checks ---- */
  /* After p ran eagerly on concrete in: an error naming p, its inputs and
   * the location when an output holds a NaN/Inf. Inside an executable's
   * steps it checks nothing. */
  jx_status (*check_eager)(const struct jx_prim *p, int nin, jx_array *const *in, int nout,
                           jx_array *const *out);
  /* After step eqns [first, first + count) of p ran (kernel: fused into one
   * compiled kernel, whose inputs env still holds): when a value they made
   * holds a NaN/Inf, finds the first equation that made one (re-running a
   * kernel's equations one by one through the reference kernels) and
   * records the error. */
  jx_status (*check_step)(const struct jx_program *p, int first, int count, int kernel,
                          jx_array **env);
  /* ---- profiling ---- */
  /* A compute span (a kernel or an equation step) of this thread's device,
   * with the cost model's flops and bytes for the summary's rates. */
  void (*compute)(const char *name, double t0, double t1, double flops, double bytes);
  /* Marks that a compute span starts on this thread (collectives inside it
   * are then subtracted from it); compute ends it. */
  void (*compute_begin)(void);
  /* A collective: its name, bytes sent by this device and the engine. */
  void (*collective)(const char *name, double t0, double t1, double bytes, const char *engine,
                     const char *group);
  void (*compile)(const char *name, double t0, const jx_compile_times *t);
  /* One run of an executable: the outermost run on each thread becomes a
   * "function" event with estimate's peak and the peak measured on the
   * thread's device. */
  void (*function_begin)(const struct jx_program *p, jx_prof_estimate *estimate);
  void (*function_end)(void);
  /* A branch of a labeled switch ran (transform/cond.c): the branch's
   * program name and index, the value of its label operand and the
   * switch's tag (what the labeling code registered, e.g. a pipeline's
   * schedule: parallel/pipeline_schedule.h). */
  void (*branch)(const char *name, int branch, int64_t label, int tag, double t0, double t1);
} jx_debug_hooks;

/* The tools' functions; never NULL (no-ops until debug/ installs its own). */
extern const jx_debug_hooks *jx_debug_tools;
void jx_debug_hooks_install(const jx_debug_hooks *hooks);

static inline jx_status jx_debug_check_eager(const struct jx_prim *p, int nin, jx_array *const *in,
                                             int nout, jx_array *const *out) {
  return jx_debug_tools->check_eager(p, nin, in, nout, out);
}
static inline jx_status jx_debug_check_step(const struct jx_program *p, int first, int count,
                                            int kernel, jx_array **env) {
  return jx_debug_tools->check_step(p, first, count, kernel, env);
}
static inline void jx_prof_compute(const char *name, double t0, double t1, double flops,
                                   double bytes) {
  jx_debug_tools->compute(name, t0, t1, flops, bytes);
}
static inline void jx_prof_compute_begin(void) { jx_debug_tools->compute_begin(); }
static inline void jx_prof_collective(const char *name, double t0, double t1, double bytes,
                                      const char *engine, const char *group) {
  jx_debug_tools->collective(name, t0, t1, bytes, engine, group);
}
static inline void jx_prof_compile(const char *name, double t0, const jx_compile_times *t) {
  jx_debug_tools->compile(name, t0, t);
}
static inline void jx_prof_function_begin(const struct jx_program *p, jx_prof_estimate *estimate) {
  jx_debug_tools->function_begin(p, estimate);
}
static inline void jx_prof_function_end(void) { jx_debug_tools->function_end(); }
static inline void jx_prof_branch(const char *name, int branch, int64_t label, int tag, double t0,
                                  double t1) {
  jx_debug_tools->branch(name, branch, label, tag, t0, t1);
}

#endif
