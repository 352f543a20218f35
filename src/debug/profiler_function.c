/* The memory of each jitted function's runs while a profiler runs: beside
 * every run of an executable (the outermost one on each thread), the peak
 * of live buffers that jx_fn_cost's model predicts for its program, and the
 * peak measured on the thread's device while it ran.
 *
 * The model counts the program's inputs and constants as live throughout
 * and adds what the run allocates, so the measured figure is the same sum:
 * the run's inputs and constants plus the most the device's live bytes rose
 * above where they stood when the run began. Other arrays alive on the
 * device before the run (the caller's) are left out of both. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include <jx/transform.h>

#include "../compile/cost.h"
#include "../parallel/device.h"
#include "../base/hooks.h"
#include "profiler_internal.h"

/* The runs being watched on each device's memory: a thread's window is
 * registered in its device's slots while its run lasts, and the counter
 * hook raises the peak of every registered window. Runs on one device at
 * once: its thread's and the host thread's (arrays made outside device
 * threads count on device 0), so a few slots suffice; a run that finds
 * none free has no measured figure. */
enum { WINDOWS_PER_DEVICE = 4 };
typedef struct {
  _Atomic int64_t peak;
} window;
static _Atomic(window *) watching[JX_MEMSTATS_DEVICES][WINDOWS_PER_DEVICE];
static pthread_mutex_t estimate_lock = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local int depth;
static _Thread_local window mine;
static _Thread_local struct {
  const jx_program *p;
  int slot, registered;
  double t0, estimate, inputs;
  int64_t live0;
} run;

void jx_prof_function_watch(int slot, int64_t live) {
  for (int k = 0; k < WINDOWS_PER_DEVICE; k++) {
    window *w = atomic_load_explicit(&watching[slot][k], memory_order_acquire);
    if (!w) continue;
    int64_t p = atomic_load_explicit(&w->peak, memory_order_relaxed);
    while (live > p && !atomic_compare_exchange_weak_explicit(
                           &w->peak, &p, live, memory_order_relaxed, memory_order_relaxed)) {
    }
  }
}

/* The cost model's peak for p, computed on p's first profiled run and kept
 * with its executable (program_cost in compile/cost.c, as jx_fn_cost). */
static double estimate_of(const jx_program *p, jx_prof_estimate *cache) {
  pthread_mutex_lock(&estimate_lock);
  if (!cache->known) {
    jx_cost c = {0};
    jx_program_cost(p, &c);
    cache->bytes = c.peak_bytes_per_device;
    cache->known = 1;
  }
  double b = cache->bytes;
  pthread_mutex_unlock(&estimate_lock);
  return b;
}

void jx_profiler_function_begin(const jx_program *p, jx_prof_estimate *estimate) {
  if (depth++ > 0) return; /* a nested program (a loop's body) is part of this run */
  int d = jx_current_device();
  run.p = p;
  run.slot = d < 0 ? 0 : d < JX_MEMSTATS_DEVICES ? d : JX_MEMSTATS_DEVICES - 1;
  run.estimate = estimate_of(p, estimate);
  run.inputs = 0;
  for (int i = 0; i < p->nin; i++) run.inputs += jx_aval_bytes(p->avals[p->in[i]]);
  for (int i = 0; i < p->nconst; i++) run.inputs += jx_aval_bytes(p->avals[p->constvar[i]]);
  run.live0 = jx_memstats_live(run.slot);
  atomic_store(&mine.peak, run.live0);
  run.registered = 0;
  for (int k = 0; k < WINDOWS_PER_DEVICE && !run.registered; k++) {
    window *none = NULL;
    run.registered = atomic_compare_exchange_strong(&watching[run.slot][k], &none, &mine);
  }
  run.t0 = jx_prof_now();
}

void jx_profiler_function_end(void) {
  if (depth <= 0 || --depth > 0) return;
  double t1 = jx_prof_now();
  for (int k = 0; k < WINDOWS_PER_DEVICE && run.registered; k++) {
    window *w = &mine;
    if (atomic_compare_exchange_strong(&watching[run.slot][k], &w, NULL)) break;
  }
  int d = jx_current_device();
  jx_prof_event e = {.kind = JX_PROF_FUNCTION,
                     .tid = d >= 0 && d < JX_PROF_HOST_TID ? d : JX_PROF_HOST_TID,
                     .ts = run.t0,
                     .dur = t1 - run.t0,
                     .estimated_peak = run.estimate};
  e.measured_peak = run.registered ? run.inputs + (double)(atomic_load(&mine.peak) - run.live0)
                                   : -1; /* not measured */
  snprintf(e.name, sizeof e.name, "%s", run.p->name ? run.p->name : "?");
  snprintf(e.args, sizeof e.args, "\"estimated_peak_bytes\": %.0f, \"measured_peak_bytes\": %.0f",
           e.estimated_peak, e.measured_peak);
  jx_prof_add(&e);
}
