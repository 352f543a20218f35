/* The profiler: events recorded while it runs, written at stop as a Chrome
 * trace (catapult JSON: {"traceEvents": [...]}) with a process track per
 * process of the job and a thread track per device, and summarized on
 * stderr (profiler_output.c). In a job of several processes, start and stop
 * are collectives: start aligns the clocks, stop gathers every process's
 * events to process 0, which alone writes the file (profiler_merge.c).
 *
 * Time on a device track is compute (an executable's kernel and equation
 * steps, eager ops) or communication (collectives); a collective inside a
 * compute step is subtracted from that step, so the two never count the
 * same time. Idle is measured on its own, as the wall time not covered by
 * any busy span, so compute + communication + idle = wall holds only when
 * the spans are accounted right (the tests check it). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jx/jx.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../base/hooks.h"
#include "../base/memstats.h"
#include "../parallel/device.h"
#include "../parallel/dist.h"
#include "debug_internal.h"
#include "profiler_internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static jx_prof_event *events;
static size_t nevents, cap_events;
static double t_start; /* the common origin, in this process's clock */
static double clock_offset;
static int clock_shared, multi; /* multi: the profile spans the processes of a job */
static char *out_path;
static double last_counter[JX_MEMSTATS_DEVICES];

static _Thread_local int compute_depth;
static _Thread_local double comm_inside;
static _Thread_local struct {
  const char *name;
  double t0;
} scopes[32];
static _Thread_local int nscopes;

int jx_prof_running(void) {
  return __atomic_load_n(&jx_debug_flags, __ATOMIC_RELAXED) & JX_DEBUG_PROFILE;
}

static int track(void) {
  int d = jx_current_device();
  return d >= 0 && d < JX_PROF_HOST_TID ? d : JX_PROF_HOST_TID;
}

void jx_prof_add(const jx_prof_event *e) {
  pthread_mutex_lock(&lock);
  if (jx_prof_running()) {
    if (nevents == cap_events) {
      size_t cap = cap_events ? 2 * cap_events : 4096;
      jx_prof_event *g = realloc(events, sizeof *g * cap);
      if (g) {
        events = g;
        cap_events = cap;
      }
    }
    if (nevents < cap_events) {
      events[nevents] = *e;
      events[nevents].ts -= t_start;
      events[nevents].pid = jx_process_index();
      nevents++;
    }
  }
  pthread_mutex_unlock(&lock);
}

static void set_name(jx_prof_event *e, const char *name) {
  snprintf(e->name, sizeof e->name, "%s", name ? name : "?");
}

void jx_profiler_compute_begin(void) {
  if (compute_depth++ == 0) comm_inside = 0;
}

void jx_profiler_compute(const char *name, double t0, double t1, double flops, double bytes) {
  if (compute_depth <= 0) return;
  if (--compute_depth > 0) return; /* nested in a span of this thread that is recorded */
  jx_prof_event e = {.kind = JX_PROF_COMPUTE,
                     .tid = track(),
                     .ts = t0,
                     .dur = t1 - t0,
                     .flops = flops,
                     .bytes = bytes};
  e.self = e.dur - comm_inside;
  set_name(&e, name);
  snprintf(e.args, sizeof e.args, "\"flops\": %.0f, \"bytes\": %.0f, \"self_us\": %.3f", flops,
           bytes, e.self * 1e6);
  jx_prof_add(&e);
}

void jx_profiler_collective(const char *name, double t0, double t1, double bytes,
                            const char *engine, const char *group) {
  if (compute_depth > 0) comm_inside += t1 - t0;
  jx_prof_event e = {
      .kind = JX_PROF_COMM, .tid = track(), .ts = t0, .dur = t1 - t0, .bytes = bytes};
  set_name(&e, name);
  snprintf(e.args, sizeof e.args, "\"bytes\": %.0f, \"algorithm\": \"%s\", \"group\": \"%s\"",
           bytes, engine ? engine : "?", group ? group : "?");
  jx_prof_add(&e);
}

void jx_profiler_branch(const char *name, int branch, int64_t label, int tag, double t0,
                        double t1) {
  jx_prof_event e = {.kind = JX_PROF_BRANCH,
                     .tid = track(),
                     .ts = t0,
                     .dur = t1 - t0,
                     .label = label,
                     .branch = branch,
                     .tag = tag};
  if (label >= 0)
    snprintf(e.name, sizeof e.name, "%s %lld", name ? name : "?", (long long)label);
  else
    set_name(&e, name);
  snprintf(e.args, sizeof e.args, "\"branch\": %d, \"label\": %lld, \"tag\": %d", branch,
           (long long)label, tag);
  jx_prof_add(&e);
}

void jx_profiler_compile(const char *name, double t0, const jx_compile_times *t) {
  jx_prof_event e = {.kind = JX_PROF_COMPILE, .tid = track(), .ts = t0, .dur = t->total};
  snprintf(e.name, sizeof e.name, "compile %s", name);
  snprintf(e.args, sizeof e.args,
           "\"trace_ms\": %.3f, \"simplify_ms\": %.3f, \"codegen_ms\": %.3f, \"cc_ms\": %.3f, "
           "\"kernels\": %d, \"cache\": \"%s\"",
           t->trace * 1e3, t->simplify * 1e3, t->codegen * 1e3, t->compile * 1e3, t->kernels,
           t->cache ? t->cache : "");
  jx_prof_add(&e);
}

static void counter_hook(int device, int64_t live) {
  if (device < 0 || device >= JX_MEMSTATS_DEVICES) return;
  jx_prof_function_watch(device, live); /* every change: the functions' peaks are exact */
  double now = jx_prof_now();
  /* at most one sample per 100 us per device: a step frees and allocates many buffers */
  if (now - last_counter[device] < 1e-4) return;
  last_counter[device] = now;
  jx_prof_event e = {.kind = JX_PROF_COUNTER, .tid = device, .ts = now};
  if (jx_device_is_local(device)) {
    snprintf(e.name, sizeof e.name, "memory device %d", device);
  } else { /* slot 0 of a process without device 0: its host threads' arrays */
    e.tid = JX_PROF_HOST_TID;
    snprintf(e.name, sizeof e.name, "memory host");
  }
  snprintf(e.args, sizeof e.args, "\"live_bytes\": %lld", (long long)live);
  jx_prof_add(&e);
}

void jx_named_scope_begin(const char *name) {
  if (nscopes < 32) {
    scopes[nscopes].name = name ? name : "scope";
    scopes[nscopes].t0 = jx_prof_now();
  }
  nscopes++;
}

void jx_named_scope_end(void) {
  if (nscopes <= 0) return;
  nscopes--;
  if (nscopes >= 32 || !jx_prof_running()) return;
  jx_prof_event e = {.kind = JX_PROF_SCOPE, .tid = track(), .ts = scopes[nscopes].t0};
  e.dur = jx_prof_now() - e.ts;
  set_name(&e, scopes[nscopes].name);
  jx_prof_add(&e);
}

void jx_profiler_step(int64_t n) {
  if (!jx_prof_running()) return;
  jx_prof_event e = {.kind = JX_PROF_STEP, .tid = track(), .ts = jx_prof_now()};
  snprintf(e.name, sizeof e.name, "step %lld", (long long)n);
  snprintf(e.args, sizeof e.args, "\"step\": %lld", (long long)n);
  jx_prof_add(&e);
}

/* Whether this process can start: sets why (and records the error) when not.
 * Only the process that writes the file (process 0 of a job) opens it. */
static int can_start(const char *path, int writer, char *why, size_t cap) {
  pthread_mutex_lock(&lock);
  if (jx_prof_running())
    snprintf(why, cap, "a profile to '%s' is already running", out_path ? out_path : "?");
  pthread_mutex_unlock(&lock);
  if (!*why && (!path || !*path)) snprintf(why, cap, "no trace file path");
  if (!*why && writer) {
    FILE *f = fopen(path, "w"); /* fail now, not after the run */
    if (f)
      fclose(f);
    else
      snprintf(why, cap, "cannot write '%s'", path);
  }
  if (!*why) return 1;
  jx_error_set(strncmp(why, "cannot write", 12) == 0 ? JX_ERR_IO : JX_ERR_INVALID_ARGUMENT,
               "jx_profiler_start: %s", why);
  return 0;
}

jx_status jx_profiler_start(const char *trace_json_path) {
  int spans = jx_dist_active(), writer = !spans || jx_process_index() == 0;
  char why[256] = "";
  int ok = can_start(trace_json_path, writer, why, sizeof why);
  double origin = jx_prof_now(), offset = 0;
  int shared = 1;
  if (spans) { /* every process learns whether all can start, and the clocks align */
    jx_status st = jx_prof_sync_start(ok, why, &origin, &offset, &shared);
    if (st) return ok ? st : jx_last_status();
  }
  if (!ok) return jx_last_status();
  pthread_mutex_lock(&lock);
  free(out_path);
  out_path = strdup(trace_json_path);
  nevents = 0;
  memset(last_counter, 0, sizeof last_counter);
  t_start = origin;
  clock_offset = offset;
  clock_shared = shared;
  multi = spans;
  __atomic_fetch_or(&jx_debug_flags, JX_DEBUG_PROFILE, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&lock);
  jx_memstats_track(1);
  for (int d = 0; d < JX_MEMSTATS_DEVICES; d++) jx_memstats_reset_peak(d);
  jx_memstats_counter_hook = counter_hook;
  return JX_OK;
}

static void describe_process(jx_prof_process *me, double wall, size_t n) {
  memset(me, 0, sizeof *me);
  me->process = jx_process_index();
  me->ndevices = jx_local_device_count();
  me->first_device = me->process * me->ndevices;
  me->wall = wall;
  me->clock_offset = clock_offset;
  me->clock_shared = clock_shared;
  if (gethostname(me->host, sizeof me->host - 1)) snprintf(me->host, sizeof me->host, "?");
  me->host[sizeof me->host - 1] = '\0';
  me->peak[0] = jx_memstats_peak(0); /* arrays made outside device threads count there */
  for (int d = me->first_device; d < me->first_device + me->ndevices && d < JX_MEMSTATS_DEVICES;
       d++)
    me->peak[d] = jx_memstats_peak(d);
  me->nevents_recorded = (int64_t)n;
}

jx_status jx_profiler_stop(void) {
  pthread_mutex_lock(&lock);
  if (!jx_prof_running()) {
    pthread_mutex_unlock(&lock);
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_profiler_stop: no profiler is running");
  }
  double wall = jx_prof_now() - t_start;
  __atomic_fetch_and(&jx_debug_flags, ~JX_DEBUG_PROFILE, __ATOMIC_RELAXED);
  jx_memstats_counter_hook = NULL;
  /* no event is added once the flag is down: take them */
  jx_prof_event *mine = events;
  size_t n = nevents;
  events = NULL;
  nevents = cap_events = 0;
  int spans = multi;
  pthread_mutex_unlock(&lock);
  jx_memstats_track(0);

  jx_prof_process me;
  describe_process(&me, wall, n);
  jx_prof_trace t = {.nproc = 1, .proc = &me, .events = mine, .nevents = n, .path = out_path};
  jx_status st = JX_OK;
  if (spans) { /* process 0 gets everyone's (fresh copies); the others nothing */
    st = jx_prof_gather(&me, mine, n, &t);
    t.path = out_path;
    free(mine);
    mine = NULL;
  }
  if (t.nproc > 0) { /* this process writes the file */
    t.wall = 0;
    for (int q = 0; q < t.nproc; q++)
      if (t.proc[q].wall > t.wall) t.wall = t.proc[q].wall;
    jx_status w = jx_prof_write_trace(&t);
    jx_prof_summarize(&t);
    if (!st) st = w;
  }
  if (spans) {
    free(t.proc);
    free(t.events);
  }
  free(mine);
  return st;
}
