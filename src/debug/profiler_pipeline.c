/* The summary's pipeline lines. A pipeline's switch (parallel/
 * pipeline_train.c) records, per device and tick, the action it ran
 * (forward, backward, the last stage's forward+backward, idle) with its
 * microbatch and the schedule's tag; from those events, per schedule:
 *   - the bubble in ticks: 1 - busy device-ticks / device-ticks run, a
 *     forward or a backward being one busy tick and the last stage's
 *     forward+backward two (the schedule gives it a forward's tick and a
 *     backward's; its second tick runs as idle);
 *   - the bubble in wall time: 1 - the time devices spent in actions / the
 *     devices times each run's span (the first action's start to the last
 *     one's end, over the devices);
 * beside the schedule's own, (p - 1) / (m + p - 1) for GPipe and 1F1B and
 * (p - 1) / (v m + p - 1) interleaved. The tick bubble counts what each
 * device ran; the wall-time one is what a machine with a core per device
 * shows (where devices share cores, busy devices slow each other down and
 * it is no measure of the schedule). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../parallel/pipeline_schedule.h"
#include "debug_internal.h"
#include "profiler_internal.h"

static jx_profile_pipeline *last;
static size_t nlast;

static const char *schedule_name(jx_pipeline_schedule s) {
  return s == JX_PIPELINE_GPIPE ? "GPipe" : s == JX_PIPELINE_1F1B ? "1F1B" : "interleaved 1F1B";
}

typedef struct {
  int pid, tid;
  double a, b;
  int kind;
} action_ev;

static int by_device_time(const void *x, const void *y) {
  const action_ev *s = x, *r = y;
  if (s->pid != r->pid) return (s->pid > r->pid) - (s->pid < r->pid);
  if (s->tid != r->tid) return (s->tid > r->tid) - (s->tid < r->tid);
  return (s->a > r->a) - (s->a < r->a);
}

/* The figures of the events tagged tag (ev: scratch for all events). */
static void measure(const jx_prof_trace *t, int tag, action_ev *ev, jx_profile_pipeline *out) {
  size_t n = 0;
  for (size_t i = 0; i < t->nevents; i++) {
    const jx_prof_event *e = &t->events[i];
    if (e->kind == JX_PROF_BRANCH && e->tag == tag)
      ev[n++] = (action_ev){e->pid, e->tid, e->ts, e->ts + e->dur, e->branch};
  }
  qsort(ev, n, sizeof *ev, by_device_time);
  pipe_profile p = {0};
  int known = !pipe_profile_of(tag, &p);
  *out = (jx_profile_pipeline){.tag = tag, .theory = -1, .time_bubble = -1};
  if (known) {
    out->schedule = p.schedule;
    out->stages = p.nstages;
    out->virtual_stages = p.virtual_stages;
    out->microbatches = p.microbatches;
    out->theory =
        (double)(p.nstages - 1) / ((double)p.virtual_stages * p.microbatches + p.nstages - 1);
    out->schedule_bubble = 1.0 - (double)p.busy_ticks / ((double)p.nticks * p.nstages);
  }
  double busy_ticks = 0, busy_time = 0;
  for (size_t i = 0; i < n; i++) {
    int k = ev[i].kind;
    if (k == PIPE_FORWARD || k == PIPE_FIRST_FORWARD) out->forwards++;
    if (k == PIPE_BACKWARD || k == PIPE_FIRST_BACKWARD) out->backwards++;
    if (k == PIPE_FORWARD_BACKWARD) out->forward_backwards++;
    if (k == PIPE_IDLE) out->idles++;
    busy_ticks += k == PIPE_IDLE ? 0 : k == PIPE_FORWARD_BACKWARD ? 2 : 1;
    if (k != PIPE_IDLE) busy_time += ev[i].b - ev[i].a;
    if (!i || ev[i - 1].pid != ev[i].pid || ev[i - 1].tid != ev[i].tid) out->devices++;
  }
  out->ticks = (int64_t)n;
  out->tick_bubble = n ? 1.0 - busy_ticks / (double)n : 0;
  /* runs: each device's events in consecutive groups of the schedule's ticks */
  if (!known || !out->devices || n % ((size_t)out->devices * (size_t)p.nticks)) return;
  int runs = (int)(n / ((size_t)out->devices * (size_t)p.nticks));
  size_t per_device = (size_t)runs * (size_t)p.nticks;
  double spans = 0;
  for (int r = 0; r < runs; r++) {
    double a = INFINITY, b = -INFINITY;
    for (int d = 0; d < out->devices; d++) {
      const action_ev *first = &ev[(size_t)d * per_device + (size_t)r * (size_t)p.nticks];
      const action_ev *lastev = first + p.nticks - 1;
      a = fmin(a, first->a);
      b = fmax(b, lastev->b);
    }
    spans += b - a;
  }
  out->runs = runs;
  if (spans > 0) out->time_bubble = 1.0 - busy_time / (spans * out->devices);
}

void jx_prof_summarize_pipelines(const jx_prof_trace *t) {
  free(last);
  last = NULL;
  nlast = 0;
  int *tags = calloc(t->nevents + 1, sizeof *tags);
  action_ev *ev = malloc(sizeof *ev * (t->nevents + 1));
  last = calloc(t->nevents + 1, sizeof *last);
  size_t ntags = 0;
  for (size_t i = 0; tags && ev && last && i < t->nevents; i++) {
    const jx_prof_event *e = &t->events[i];
    if (e->kind != JX_PROF_BRANCH || e->tag < 1) continue;
    size_t k = 0;
    while (k < ntags && tags[k] != e->tag) k++;
    if (k == ntags) tags[ntags++] = e->tag;
  }
  for (size_t k = 0; ev && last && k < ntags; k++) {
    jx_profile_pipeline *m = &last[nlast++];
    measure(t, tags[k], ev, m);
    if (m->theory < 0) {
      fprintf(stderr, "  pipeline (schedule unknown): %d devices, bubble %.1f%% of ticks\n",
              m->devices, 100 * m->tick_bubble);
      continue;
    }
    fprintf(stderr,
            "  pipeline %s, %d stages x %d virtual, %d microbatches: %d devices, %d runs; %lld "
            "forwards, %lld backwards, %lld forward+backwards, %lld idle ticks\n",
            schedule_name(m->schedule), m->stages, m->virtual_stages, m->microbatches, m->devices,
            m->runs, (long long)m->forwards, (long long)m->backwards,
            (long long)m->forward_backwards, (long long)m->idles);
    fprintf(stderr, "    bubble measured: %.1f%% of device-ticks", 100 * m->tick_bubble);
    if (m->time_bubble >= 0) fprintf(stderr, ", %.1f%% of wall time", 100 * m->time_bubble);
    fprintf(stderr, "; theory (p-1)/(%sm+p-1) = %.1f%%", m->virtual_stages > 1 ? "v" : "",
            100 * m->theory);
    if (fabs(m->schedule_bubble - m->theory) > 5e-4) /* overlap's table: a tick more per hop */
      fprintf(stderr, ", the schedule's table %.1f%%", 100 * m->schedule_bubble);
    fprintf(stderr, "\n");
  }
  free(tags);
  free(ev);
}

int jx_profiler_last_pipeline(size_t k, jx_profile_pipeline *out) {
  if (k >= nlast) return 1;
  *out = last[k];
  return 0;
}
