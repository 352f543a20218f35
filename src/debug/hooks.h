/* The debugging tools' hooks, called from the layers they watch (dispatch,
 * the executable, the jit, collectives). A leaf header: it names only the IR.
 * Every hook sits behind a test of jx_debug_flags, so while no tool is on a
 * hook costs one load and one branch. */
#ifndef JX_SRC_DEBUG_HOOKS_H
#define JX_SRC_DEBUG_HOOKS_H

#include "../ir/program.h"

enum {
  JX_DEBUG_NANS = 1,    /* JX_DEBUG_NANS=1: a NaN an op produces is an error */
  JX_DEBUG_INFS = 2,    /* JX_DEBUG_INFS=1: so is an infinity */
  JX_DEBUG_PROFILE = 4, /* a profiler runs */
};
extern int jx_debug_flags; /* read at load from the environment; set by the tools */

/* ---- NaN/Inf checks ---- */
/* After p ran eagerly on concrete in: an error naming p, its inputs and the
 * location when an output holds a NaN/Inf. Inside an executable's steps it
 * checks nothing (the executable checks its steps itself). */
jx_status jx_debug_check_eager(const jx_prim *p, int nin, jx_array *const *in, int nout,
                               jx_array *const *out);
/* After step eqns [first, first + count) of p ran (kernel: fused into one
 * compiled kernel, whose inputs env still holds): when a value they made
 * holds a NaN/Inf, finds the first equation that made one (re-running a
 * kernel's equations one by one through the reference kernels) and records
 * the error. */
jx_status jx_debug_check_step(const jx_program *p, int first, int count, int kernel,
                              jx_array **env);
/* Brackets an executable run on this thread (eager checks pause inside). */
void jx_debug_exec_enter(void);
void jx_debug_exec_leave(void);

/* ---- profiling ---- */
double jx_prof_now(void); /* seconds, monotonic */
/* A compute span (a kernel or an equation step) of this thread's device, with
 * the cost model's flops and bytes for the summary's rates. */
void jx_prof_compute(const char *name, double t0, double t1, double flops, double bytes);
/* Marks that a compute span starts on this thread (collectives inside it are
 * then subtracted from it); jx_prof_compute ends it. */
void jx_prof_compute_begin(void);
/* A collective: its name, bytes sent by this device and the engine. */
void jx_prof_collective(const char *name, double t0, double t1, double bytes, const char *engine,
                        const char *group);
/* A compilation on this thread: phases in seconds (negative: not run). */
typedef struct {
  double trace, simplify, codegen, compile, total;
  int kernels;
  const char *cache; /* "compiled", "disk cache", "memory cache", "no kernels" */
} jx_compile_times;
void jx_prof_compile(const char *name, double t0, const jx_compile_times *t);
/* One run of an executable (executable.c), while a profiler runs: the
 * outermost run on each thread becomes a "function" event with the peak of
 * live buffers the cost model predicts for p (as jx_fn_cost; computed on
 * p's first profiled run into *estimate, which the executable keeps, zeroed
 * when it is built) and the peak measured on the thread's device. */
typedef struct {
  double bytes;
  int known;
} jx_prof_estimate;
void jx_prof_function_begin(const jx_program *p, jx_prof_estimate *estimate);
void jx_prof_function_end(void);

#endif
