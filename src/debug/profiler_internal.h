/* The profiler's pieces and what they share: recording (profiler.c), the
 * memory of each jitted function's runs (profiler_function.c), joining the
 * processes of a job (profiler_merge.c) and the trace file and summary
 * (profiler_output.c). */
#ifndef JX_SRC_DEBUG_PROFILER_INTERNAL_H
#define JX_SRC_DEBUG_PROFILER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <jx/base.h>

#include "../base/memstats.h"

enum {
  JX_PROF_COMPUTE,
  JX_PROF_COMM,
  JX_PROF_COMPILE,
  JX_PROF_SCOPE,
  JX_PROF_STEP,
  JX_PROF_COUNTER,
  JX_PROF_FUNCTION, /* one run of a jitted function (an executable) */
  JX_PROF_BRANCH,   /* one run of a labeled switch's branch (a pipeline's action) */
};
enum { JX_PROF_HOST_TID = 1000 }; /* the track of threads outside devices */

/* One event. Plain bytes (no pointers): processes of a job send them to
 * process 0 as they are. */
typedef struct {
  uint8_t kind;
  int pid; /* the process that recorded it */
  int tid; /* global device number, or JX_PROF_HOST_TID */
  double ts, dur,
      self; /* seconds since the common origin; self: compute less the collectives inside */
  double flops, bytes;
  double estimated_peak, measured_peak; /* JX_PROF_FUNCTION: bytes */
  int64_t label;                        /* JX_PROF_BRANCH: its label's value (-1: none) */
  int branch, tag;                      /* JX_PROF_BRANCH: the branch's index, the switch's tag */
  char name[96];
  char args[224]; /* the members of the event's "args" object, JSON */
} jx_prof_event;

/* What a process tells process 0 about itself besides its events. */
typedef struct {
  int process, first_device, ndevices;
  double wall;         /* from the common origin to its jx_profiler_stop, seconds */
  double clock_offset; /* its clock minus process 0's, seconds (0 for process 0) */
  int clock_shared;    /* 1: the same kernel clock as process 0, so the offset is exactly 0 */
  char host[64];
  int64_t peak[JX_MEMSTATS_DEVICES]; /* peak live bytes per memstats slot (its devices, slot 0) */
  int64_t nevents_recorded;          /* before any were dropped to fit the gather */
} jx_prof_process;

/* A whole profile: every process's record and events (on process 0 of a job). */
typedef struct {
  int nproc;
  jx_prof_process *proc; /* [nproc], by process index */
  jx_prof_event *events;
  size_t nevents;
  double wall; /* the longest process's */
  const char *path;
} jx_prof_trace;

/* profiler.c: appends e (its ts in this process's monotonic seconds) while a
 * profile runs. */
void jx_prof_add(const jx_prof_event *e);
int jx_prof_running(void);

/* profiler_function.c: the per-thread memory window of a function run
 * follows every change of live bytes (the memstats counter hook). */
void jx_prof_function_watch(int slot, int64_t live);

/* profiler_merge.c, collectives over every process of the job.
 * At start: agrees that every process can start (ok_here, else why_here
 * says why: the error names the processes that cannot) and aligns the
 * clocks. *origin: process 0's present moment in this process's clock;
 * *offset and *shared as in jx_prof_process. */
jx_status jx_prof_sync_start(int ok_here, const char *why_here, double *origin, double *offset,
                             int *shared);
/* At stop: sends mine and events[0..n) to process 0, which gets the whole
 * trace in *out (the caller frees out->proc and out->events); other
 * processes get nothing. On failure (a process did not arrive within the
 * deadline), process 0's *out holds its own events only. */
jx_status jx_prof_gather(const jx_prof_process *mine, const jx_prof_event *events, size_t n,
                         jx_prof_trace *out);

/* profiler_output.c */
jx_status jx_prof_write_trace(const jx_prof_trace *t);
void jx_prof_summarize(const jx_prof_trace *t); /* on stderr; keeps the numbers for the tests */

/* profiler_pipeline.c: the summary's pipeline lines, from the branch events
 * of the pipelines' switches: the measured bubble beside the schedule's. */
void jx_prof_summarize_pipelines(const jx_prof_trace *t);

#endif
