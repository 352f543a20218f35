/* The profile's outputs: the Chrome trace file (one process track per
 * process of the job, pid = process index; a thread track per device, tid =
 * its global number, and "host" = tid 1000 for threads outside devices) and
 * the summary on stderr. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "debug_internal.h"
#include "profiler_internal.h"

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static const char *cat_name(int kind) {
  static const char *const names[] = {"compute", "collective", "compile",  "scope",
                                      "step",    "memory",     "function", "branch"};
  return names[kind];
}

typedef struct {
  int pid, tid;
} track_key;

static int by_track(const void *x, const void *y) {
  const track_key *a = x, *b = y;
  if (a->pid != b->pid) return (a->pid > b->pid) - (a->pid < b->pid);
  return (a->tid > b->tid) - (a->tid < b->tid);
}

/* The distinct (process, thread) tracks of t's events other than counters,
 * sorted; NULL when out of memory. */
static track_key *tracks_of(const jx_prof_trace *t, size_t *n) {
  track_key *k = malloc(sizeof *k * (t->nevents + 1));
  *n = 0;
  if (!k) return NULL;
  for (size_t i = 0; i < t->nevents; i++)
    if (t->events[i].kind != JX_PROF_COUNTER)
      k[(*n)++] = (track_key){t->events[i].pid, t->events[i].tid};
  qsort(k, *n, sizeof *k, by_track);
  size_t u = 0;
  for (size_t i = 0; i < *n; i++)
    if (!u || by_track(&k[u - 1], &k[i])) k[u++] = k[i];
  *n = u;
  return k;
}

static void track_name(char *out, size_t cap, int tid) {
  if (tid == JX_PROF_HOST_TID)
    snprintf(out, cap, "host");
  else
    snprintf(out, cap, "device %d", tid);
}

jx_status jx_prof_write_trace(const jx_prof_trace *t) {
  FILE *f = fopen(t->path, "w");
  if (!f) return jx_error_set(JX_ERR_IO, "jx_profiler_stop: cannot write '%s'", t->path);
  fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  for (int q = 0; q < t->nproc; q++) {
    const jx_prof_process *p = &t->proc[q];
    char name[128];
    snprintf(name, sizeof name, "process %d (%s)", p->process, p->host);
    fprintf(f, "%s{\"ph\": \"M\", \"pid\": %d, \"name\": \"process_name\", \"args\": {\"name\": ",
            q ? ",\n" : "", p->process);
    json_str(f, name);
    fprintf(f, "}}");
    fprintf(f,
            ",\n{\"ph\": \"M\", \"pid\": %d, \"name\": \"process_sort_index\", \"args\": "
            "{\"sort_index\": %d}}",
            p->process, p->process);
    fprintf(f,
            ",\n{\"ph\": \"M\", \"pid\": %d, \"name\": \"process_labels\", \"args\": {\"labels\": "
            "\"clock offset %+.1f us (%s)\", \"clock_offset_us\": %.3f}}",
            p->process, p->clock_offset * 1e6,
            p->process == 0   ? "the reference"
            : p->clock_shared ? "the same clock"
                              : "measured",
            p->clock_offset * 1e6);
  }
  size_t ntracks;
  track_key *tracks = tracks_of(t, &ntracks);
  for (size_t i = 0; tracks && i < ntracks; i++) {
    char name[32];
    track_name(name, sizeof name, tracks[i].tid);
    fprintf(f,
            ",\n{\"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"name\": \"thread_name\", \"args\": "
            "{\"name\": \"%s\"}}",
            tracks[i].pid, tracks[i].tid, name);
    fprintf(f,
            ",\n{\"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"name\": \"thread_sort_index\", "
            "\"args\": {\"sort_index\": %d}}",
            tracks[i].pid, tracks[i].tid, tracks[i].tid);
  }
  free(tracks);
  for (size_t i = 0; i < t->nevents; i++) {
    const jx_prof_event *e = &t->events[i];
    fprintf(f, ",\n{\"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"cat\": \"%s\", \"name\": ", e->pid,
            e->tid, e->ts * 1e6, cat_name(e->kind));
    json_str(f, e->name);
    if (e->kind == JX_PROF_STEP)
      fprintf(f, ", \"ph\": \"i\", \"s\": \"t\"");
    else if (e->kind == JX_PROF_COUNTER)
      fprintf(f, ", \"ph\": \"C\"");
    else
      fprintf(f, ", \"ph\": \"X\", \"dur\": %.3f", e->dur * 1e6);
    fprintf(f, ", \"args\": {%s}}", e->args);
  }
  fprintf(f, "\n]}\n");
  int bad = ferror(f);
  if (fclose(f) || bad)
    return jx_error_set(JX_ERR_IO, "jx_profiler_stop: cannot write '%s'", t->path);
  return JX_OK;
}

/* ---- the summary ---- */

typedef struct {
  int pid, tid;
  jx_profile_split split;
} track_split;

typedef struct {
  char name[96];
  double estimated, measured;
  int runs;
} function_row;

/* The last summary's figures, for the tests (debug_internal.h). */
static track_split *last_splits;
static size_t nlast_splits;
static function_row *last_functions;
static size_t nlast_functions;

typedef struct {
  int pid, tid, comm;
  double a, b, self;
} span;

static int by_track_start(const void *x, const void *y) {
  const span *s = x, *r = y;
  if (s->pid != r->pid) return (s->pid > r->pid) - (s->pid < r->pid);
  if (s->tid != r->tid) return (s->tid > r->tid) - (s->tid < r->tid);
  return (s->a > r->a) - (s->a < r->a);
}

/* Per track: compute, communication, and idle = the wall time no busy span covers. */
static void split_tracks(const jx_prof_trace *t) {
  free(last_splits);
  last_splits = NULL;
  nlast_splits = 0;
  span *s = malloc(sizeof *s * (t->nevents + 1));
  track_split *out = malloc(sizeof *out * (t->nevents + 1));
  if (!s || !out) {
    free(s);
    free(out);
    return;
  }
  size_t n = 0, ntracks = 0;
  double wall = t->wall;
  for (size_t i = 0; i < t->nevents; i++) {
    const jx_prof_event *e = &t->events[i];
    if (e->kind != JX_PROF_COMPUTE && e->kind != JX_PROF_COMM) continue;
    s[n++] = (span){e->pid,
                    e->tid,
                    e->kind == JX_PROF_COMM,
                    fmax(0, e->ts),
                    fmin(wall, e->ts + e->dur),
                    e->kind == JX_PROF_COMM ? e->dur : e->self};
  }
  qsort(s, n, sizeof *s, by_track_start);
  for (size_t i = 0; i < n;) {
    track_split *ts = &out[ntracks++];
    *ts = (track_split){s[i].pid, s[i].tid, {.wall = wall}};
    double covered = 0, a = 0, b = -1;
    size_t j = i;
    for (; j < n && s[j].pid == s[i].pid && s[j].tid == s[i].tid; j++) {
      if (s[j].comm)
        ts->split.comm += s[j].self;
      else
        ts->split.compute += s[j].self;
      ts->split.events++;
      if (s[j].a > b) {
        if (b > a) covered += b - a;
        a = s[j].a;
        b = s[j].b;
      } else if (s[j].b > b) {
        b = s[j].b;
      }
    }
    if (b > a) covered += b - a;
    ts->split.idle = wall - covered;
    i = j;
  }
  free(s);
  last_splits = out;
  nlast_splits = ntracks;
}

typedef struct {
  const char *name;
  int calls;
  double self, flops, bytes;
} kernel_row;

static int by_time(const void *x, const void *y) {
  double a = ((const kernel_row *)x)->self, b = ((const kernel_row *)y)->self;
  return (a < b) - (a > b);
}

static void top_steps(const jx_prof_trace *t) {
  kernel_row *rows = calloc(t->nevents + 1, sizeof *rows);
  size_t nrows = 0;
  for (size_t i = 0; rows && i < t->nevents; i++) {
    const jx_prof_event *e = &t->events[i];
    if (e->kind != JX_PROF_COMPUTE) continue;
    size_t r = 0;
    while (r < nrows && strcmp(rows[r].name, e->name) != 0) r++;
    if (r == nrows) rows[nrows++].name = e->name;
    rows[r].calls++;
    rows[r].self += e->self;
    rows[r].flops += e->flops;
    rows[r].bytes += e->bytes;
  }
  if (rows && nrows) {
    qsort(rows, nrows, sizeof *rows, by_time);
    fprintf(stderr, "  top steps by time (all devices): %-40s %6s %10s %9s %8s\n", "", "calls",
            "total", "GFLOP/s", "GB/s");
    for (size_t r = 0; r < nrows && r < 10; r++) {
      double s = rows[r].self > 0 ? rows[r].self : 1e-12;
      fprintf(stderr, "    %-72.72s %6d %7.2f ms %9.2f %8.2f\n", rows[r].name, rows[r].calls,
              rows[r].self * 1e3, rows[r].flops / s * 1e-9, rows[r].bytes / s * 1e-9);
    }
  }
  free(rows);
}

static double mib(double bytes) { return bytes / (1 << 20); }

/* Per jitted function (and estimate: one per signature): the cost model's
 * peak beside the largest measured over its runs on every device. */
static void function_memory(const jx_prof_trace *t) {
  free(last_functions);
  last_functions = calloc(t->nevents + 1, sizeof *last_functions);
  nlast_functions = 0;
  function_row *rows = last_functions;
  for (size_t i = 0; rows && i < t->nevents; i++) {
    const jx_prof_event *e = &t->events[i];
    if (e->kind != JX_PROF_FUNCTION) continue;
    size_t r = 0;
    while (r < nlast_functions &&
           (strcmp(rows[r].name, e->name) != 0 || rows[r].estimated != e->estimated_peak))
      r++;
    if (r == nlast_functions) {
      snprintf(rows[r].name, sizeof rows[r].name, "%s", e->name);
      rows[r].estimated = e->estimated_peak;
      rows[r].measured = -1;
      nlast_functions++;
    }
    rows[r].runs++;
    rows[r].measured = fmax(rows[r].measured, e->measured_peak);
  }
  if (!nlast_functions) return;
  fprintf(stderr, "  peak memory per jitted function (cost model, as jx_fn_cost; measured):\n");
  for (size_t r = 0; r < nlast_functions && r < 20; r++) {
    fprintf(stderr, "    %-40.40s %5d runs  estimated %10.0f B (%7.2f MiB)", rows[r].name,
            rows[r].runs, rows[r].estimated, mib(rows[r].estimated));
    if (rows[r].measured >= 0)
      fprintf(stderr, "  measured %10.0f B (%7.2f MiB)  measured/estimated %.2f\n",
              rows[r].measured, mib(rows[r].measured),
              rows[r].estimated > 0 ? rows[r].measured / rows[r].estimated : NAN);
    else
      fprintf(stderr, "  measured: -\n");
  }
  if (nlast_functions > 20) fprintf(stderr, "    (%zu more)\n", nlast_functions - 20);
}

static void peak_memory(const jx_prof_trace *t) {
  for (int q = 0; q < t->nproc; q++) {
    const jx_prof_process *p = &t->proc[q];
    if (t->nproc > 1)
      fprintf(stderr, "  peak memory, process %d (%s):", p->process, p->host);
    else
      fprintf(stderr, "  peak memory:");
    for (int d = p->first_device; d < p->first_device + p->ndevices && d < JX_MEMSTATS_DEVICES; d++)
      fprintf(stderr, " device %d %.1f MiB%s", d, mib((double)p->peak[d]),
              d + 1 < p->first_device + p->ndevices ? "," : "");
    if (p->first_device > 0 && p->peak[0] > 0) /* its host thread's arrays count on slot 0 */
      fprintf(stderr, ", host %.1f MiB", mib((double)p->peak[0]));
    fprintf(stderr, "\n");
  }
}

void jx_prof_summarize(const jx_prof_trace *t) {
  fprintf(stderr, "jx profile: %.3f s wall, %zu events, trace in %s\n", t->wall, t->nevents,
          t->path);
  if (t->nproc > 1) {
    fprintf(stderr, "  %d processes; clocks aligned to process 0's:", t->nproc);
    for (int q = 1; q < t->nproc; q++)
      fprintf(stderr, " process %d %s%s", q,
              t->proc[q].clock_shared ? "same clock" : "offset measured",
              q + 1 < t->nproc ? "," : "\n");
  }
  for (int q = 0; q < t->nproc; q++) {
    size_t got = 0;
    for (size_t i = 0; i < t->nevents; i++) got += t->events[i].pid == t->proc[q].process;
    if ((int64_t)got < t->proc[q].nevents_recorded)
      fprintf(stderr, "  process %d: %lld of its %lld events dropped (over 2 GiB in all)\n",
              t->proc[q].process, (long long)(t->proc[q].nevents_recorded - (int64_t)got),
              (long long)t->proc[q].nevents_recorded);
  }
  split_tracks(t);
  fprintf(stderr, "  %-16s %12s %14s %12s\n", "track", "compute", "communication", "idle");
  double wall = t->wall > 0 ? t->wall : 1e-12;
  for (size_t i = 0; i < nlast_splits; i++) {
    const jx_profile_split *s = &last_splits[i].split;
    char name[48], track[32];
    track_name(track, sizeof track, last_splits[i].tid);
    if (t->nproc > 1)
      snprintf(name, sizeof name, "%s (p%d)", track, last_splits[i].pid);
    else
      snprintf(name, sizeof name, "%s", track);
    fprintf(stderr, "  %-16s %8.1f ms %4.0f%% %8.1f ms %4.0f%% %6.1f ms %3.0f%%\n", name,
            s->compute * 1e3, 100 * s->compute / wall, s->comm * 1e3, 100 * s->comm / wall,
            s->idle * 1e3, 100 * s->idle / wall);
  }
  top_steps(t);
  jx_prof_summarize_pipelines(t);
  function_memory(t);
  peak_memory(t);
}

int jx_profiler_last_split(int device, jx_profile_split *out) {
  for (size_t i = 0; i < nlast_splits; i++) {
    const track_split *s = &last_splits[i];
    if (device >= 0 ? s->tid == device : s->tid == JX_PROF_HOST_TID && s->pid == 0) {
      *out = s->split;
      return 0;
    }
  }
  return 1;
}

int jx_profiler_last_function(const char *name, double *estimated, double *measured, int *runs) {
  for (size_t i = 0; name && i < nlast_functions; i++)
    if (strcmp(last_functions[i].name, name) == 0) {
      *estimated = last_functions[i].estimated;
      *measured = last_functions[i].measured;
      *runs = last_functions[i].runs;
      return 0;
    }
  return 1;
}
