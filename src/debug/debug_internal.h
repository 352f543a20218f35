/* Internals of the debugging tools shared by their files and tests. */
#ifndef JX_SRC_DEBUG_DEBUG_INTERNAL_H
#define JX_SRC_DEBUG_DEBUG_INTERNAL_H

#include "../base/hooks.h"
#include "../ir/program.h"
#include "../prims/prim.h"

/* debug_print.c: the effectful print (see there for its rules). */
extern const jx_prim jx_prim_debug_print;

/* nans.c: turns the NaN/Inf checks on or off (tests; the environment sets
 * them at load). */
void jx_debug_set_checks(int nans, int infs);

/* The hooks' functions (base/hooks.h says what each does), installed by
 * tools.c. */
jx_status jx_nans_check_eager(const jx_prim *p, int nin, jx_array *const *in, int nout,
                              jx_array *const *out);
jx_status jx_nans_check_step(const jx_program *p, int first, int count, int kernel, jx_array **env);
void jx_profiler_compute(const char *name, double t0, double t1, double flops, double bytes);
void jx_profiler_compute_begin(void);
void jx_profiler_collective(const char *name, double t0, double t1, double bytes,
                            const char *engine, const char *group);
void jx_profiler_compile(const char *name, double t0, const jx_compile_times *t);
void jx_profiler_function_begin(const jx_program *p, jx_prof_estimate *estimate);
void jx_profiler_function_end(void);
void jx_profiler_branch(const char *name, int branch, int64_t label, int tag, double t0, double t1);

/* profiler.c: the last profile's split for one device track (-1: the host
 * thread), in seconds; non-zero when the track had no events. */
typedef struct {
  double wall, compute, comm, idle;
  int events;
} jx_profile_split;
int jx_profiler_last_split(int device, jx_profile_split *out);
/* profiler_output.c: the last profile's memory of the jitted function
 * called name (its program's name: the traced function's, e.g. "loss"): the cost model's
 * estimated peak, the largest measured peak over its runs (-1: none
 * measured) and the runs; non-zero when it did not run. */
int jx_profiler_last_function(const char *name, double *estimated, double *measured, int *runs);

/* profiler_pipeline.c: the last profile's k-th pipeline schedule (in order
 * of first appearance) as its summary measured it; non-zero when there are
 * no more. Bubbles are fractions; theory and the time bubble are -1 when
 * unknown (time: the devices' events did not form whole runs). */
typedef struct {
  int tag, schedule, stages, virtual_stages, microbatches;
  int devices, runs;
  int64_t ticks, forwards, backwards, forward_backwards, idles; /* device-ticks run */
  double tick_bubble, time_bubble;                              /* measured */
  double theory;                                                /* (p - 1) / (v m + p - 1) */
  double schedule_bubble;                                       /* the table's idle fraction */
} jx_profile_pipeline;
int jx_profiler_last_pipeline(size_t k, jx_profile_pipeline *out);

#endif
