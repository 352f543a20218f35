/* The profiler: events recorded while it runs, written at stop as a Chrome
 * trace (catapult JSON: {"traceEvents": [...]}) with one track per device,
 * and summarized on stderr.
 *
 * Time on a device track is compute (an executable's kernel and equation
 * steps, eager ops) or communication (collectives); a collective inside a
 * compute step is subtracted from that step, so the two never count the
 * same time. Idle is measured on its own, as the wall time not covered by
 * any busy span, so compute + communication + idle = wall holds only when
 * the spans are accounted right (the tests check it). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jx/jx.h>

#include "../base/error.h"
#include "../base/memstats.h"
#include "../parallel/device.h"
#include "debug_internal.h"
#include "hooks.h"

int jx_debug_flags;
_Thread_local jx_compile_times jx_last_build_times;

static int env_on(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

__attribute__((constructor)) static void read_env(void) {
  jx_debug_flags |=
      (env_on("JX_DEBUG_NANS") ? JX_DEBUG_NANS : 0) | (env_on("JX_DEBUG_INFS") ? JX_DEBUG_INFS : 0);
}

double jx_prof_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { K_COMPUTE, K_COMM, K_COMPILE, K_SCOPE, K_STEP, K_COUNTER };
enum { HOST_TID = 1000, MAX_TRACKS = 1001 };

typedef struct {
  uint8_t kind;
  int tid;
  double ts, dur, self; /* seconds since start; self: compute less the collectives inside */
  double flops, bytes;
  char name[96];
  char args[224]; /* the members of the event's "args" object, JSON */
} event;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static event *events;
static size_t nevents, cap_events;
static double t_start, t_stop;
static char *out_path;
static double last_counter[JX_MEMSTATS_DEVICES];
static jx_profile_split last_split[MAX_TRACKS];
static uint8_t last_has[MAX_TRACKS];

static _Thread_local int compute_depth;
static _Thread_local double comm_inside;
static _Thread_local struct {
  const char *name;
  double t0;
} scopes[32];
static _Thread_local int nscopes;

static int running(void) {
  return __atomic_load_n(&jx_debug_flags, __ATOMIC_RELAXED) & JX_DEBUG_PROFILE;
}

static int track(void) {
  int d = jx_current_device();
  return d >= 0 && d < HOST_TID ? d : HOST_TID;
}

/* Appends an event under the lock; NULL when not running or out of memory. */
static void add(const event *e) {
  pthread_mutex_lock(&lock);
  if (running()) {
    if (nevents == cap_events) {
      size_t cap = cap_events ? 2 * cap_events : 4096;
      event *g = realloc(events, sizeof *g * cap);
      if (g) {
        events = g;
        cap_events = cap;
      }
    }
    if (nevents < cap_events) {
      events[nevents] = *e;
      events[nevents].ts -= t_start;
      nevents++;
    }
  }
  pthread_mutex_unlock(&lock);
}

static void set_name(event *e, const char *name) {
  snprintf(e->name, sizeof e->name, "%s", name ? name : "?");
}

void jx_prof_compute_begin(void) {
  if (compute_depth++ == 0) comm_inside = 0;
}

void jx_prof_compute(const char *name, double t0, double t1, double flops, double bytes) {
  if (compute_depth <= 0) return;
  if (--compute_depth > 0) return; /* nested in a span of this thread that is recorded */
  event e = {
      .kind = K_COMPUTE, .tid = track(), .ts = t0, .dur = t1 - t0, .flops = flops, .bytes = bytes};
  e.self = e.dur - comm_inside;
  set_name(&e, name);
  snprintf(e.args, sizeof e.args, "\"flops\": %.0f, \"bytes\": %.0f, \"self_us\": %.3f", flops,
           bytes, e.self * 1e6);
  add(&e);
}

void jx_prof_collective(const char *name, double t0, double t1, double bytes, const char *engine,
                        const char *group) {
  if (compute_depth > 0) comm_inside += t1 - t0;
  event e = {.kind = K_COMM, .tid = track(), .ts = t0, .dur = t1 - t0, .bytes = bytes};
  set_name(&e, name);
  snprintf(e.args, sizeof e.args, "\"bytes\": %.0f, \"algorithm\": \"%s\", \"group\": \"%s\"",
           bytes, engine ? engine : "?", group ? group : "?");
  add(&e);
}

void jx_prof_compile(const char *name, double t0, const jx_compile_times *t) {
  event e = {.kind = K_COMPILE, .tid = track(), .ts = t0, .dur = t->total};
  snprintf(e.name, sizeof e.name, "compile %s", name);
  snprintf(e.args, sizeof e.args,
           "\"trace_ms\": %.3f, \"simplify_ms\": %.3f, \"codegen_ms\": %.3f, \"cc_ms\": %.3f, "
           "\"kernels\": %d, \"cache\": \"%s\"",
           t->trace * 1e3, t->simplify * 1e3, t->codegen * 1e3, t->compile * 1e3, t->kernels,
           t->cache ? t->cache : "");
  add(&e);
}

static void counter_hook(int device, int64_t live) {
  double now = jx_prof_now();
  if (device < 0 || device >= JX_MEMSTATS_DEVICES) return;
  /* at most one sample per 100 us per device: a step frees and allocates many buffers */
  if (now - last_counter[device] < 1e-4) return;
  last_counter[device] = now;
  event e = {.kind = K_COUNTER, .tid = device, .ts = now};
  snprintf(e.name, sizeof e.name, "memory device %d", device);
  snprintf(e.args, sizeof e.args, "\"live_bytes\": %lld", (long long)live);
  add(&e);
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
  if (nscopes >= 32 || !running()) return;
  event e = {.kind = K_SCOPE, .tid = track(), .ts = scopes[nscopes].t0};
  e.dur = jx_prof_now() - e.ts;
  set_name(&e, scopes[nscopes].name);
  add(&e);
}

void jx_profiler_step(int64_t n) {
  if (!running()) return;
  event e = {.kind = K_STEP, .tid = track(), .ts = jx_prof_now()};
  snprintf(e.name, sizeof e.name, "step %lld", (long long)n);
  snprintf(e.args, sizeof e.args, "\"step\": %lld", (long long)n);
  add(&e);
}

jx_status jx_profiler_start(const char *trace_json_path) {
  if (!trace_json_path || !*trace_json_path)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_profiler_start: no trace file path");
  pthread_mutex_lock(&lock);
  if (running()) {
    pthread_mutex_unlock(&lock);
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_profiler_start: a profile to '%s' is already running", out_path);
  }
  FILE *f = fopen(trace_json_path, "w"); /* fail now, not after the run */
  if (!f) {
    pthread_mutex_unlock(&lock);
    return jx_error_set(JX_ERR_IO, "jx_profiler_start: cannot write '%s'", trace_json_path);
  }
  fclose(f);
  free(out_path);
  out_path = strdup(trace_json_path);
  nevents = 0;
  memset(last_counter, 0, sizeof last_counter);
  t_start = jx_prof_now();
  __atomic_fetch_or(&jx_debug_flags, JX_DEBUG_PROFILE, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&lock);
  jx_memstats_track(1);
  for (int d = 0; d < JX_MEMSTATS_DEVICES; d++) jx_memstats_reset_peak(d);
  jx_memstats_counter_hook = counter_hook;
  return JX_OK;
}

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
  static const char *const names[] = {"compute", "collective", "compile",
                                      "scope",   "step",       "memory"};
  return names[kind];
}

static jx_status write_trace(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return jx_error_set(JX_ERR_IO, "jx_profiler_stop: cannot write '%s'", path);
  fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  fprintf(f, "{\"ph\": \"M\", \"pid\": 1, \"name\": \"process_name\", \"args\": {\"name\": "
             "\"jx\"}}");
  uint8_t seen[MAX_TRACKS] = {0};
  for (size_t i = 0; i < nevents; i++) {
    int t = events[i].tid;
    if (t < 0 || t >= MAX_TRACKS || seen[t] || events[i].kind == K_COUNTER) continue;
    seen[t] = 1;
    char name[32];
    if (t == HOST_TID)
      snprintf(name, sizeof name, "host");
    else
      snprintf(name, sizeof name, "device %d", t);
    fprintf(f,
            ",\n{\"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"name\": \"thread_name\", \"args\": "
            "{\"name\": \"%s\"}}",
            t, name);
    fprintf(f,
            ",\n{\"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"name\": \"thread_sort_index\", "
            "\"args\": {\"sort_index\": %d}}",
            t, t);
  }
  for (size_t i = 0; i < nevents; i++) {
    const event *e = &events[i];
    fprintf(f, ",\n{\"pid\": 1, \"tid\": %d, \"ts\": %.3f, \"cat\": \"%s\", \"name\": ", e->tid,
            e->ts * 1e6, cat_name(e->kind));
    json_str(f, e->name);
    if (e->kind == K_STEP)
      fprintf(f, ", \"ph\": \"i\", \"s\": \"t\"");
    else if (e->kind == K_COUNTER)
      fprintf(f, ", \"ph\": \"C\"");
    else
      fprintf(f, ", \"ph\": \"X\", \"dur\": %.3f", e->dur * 1e6);
    fprintf(f, ", \"args\": {%s}}", e->args);
  }
  fprintf(f, "\n]}\n");
  int bad = ferror(f);
  if (fclose(f) || bad) return jx_error_set(JX_ERR_IO, "jx_profiler_stop: cannot write '%s'", path);
  return JX_OK;
}

typedef struct {
  double a, b;
} span;

static int by_start(const void *x, const void *y) {
  double a = ((const span *)x)->a, b = ((const span *)y)->a;
  return (a > b) - (a < b);
}

/* Wall time covered by the busy spans of track t, clipped to [0, wall]. */
static double busy_union(int t, double wall) {
  size_t n = 0;
  for (size_t i = 0; i < nevents; i++)
    n += events[i].tid == t && (events[i].kind == K_COMPUTE || events[i].kind == K_COMM);
  span *s = malloc(sizeof *s * (n + 1));
  if (!s) return NAN;
  n = 0;
  for (size_t i = 0; i < nevents; i++)
    if (events[i].tid == t && (events[i].kind == K_COMPUTE || events[i].kind == K_COMM))
      s[n++] = (span){fmax(0, events[i].ts), fmin(wall, events[i].ts + events[i].dur)};
  qsort(s, n, sizeof *s, by_start);
  double covered = 0, a = 0, b = -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i].a > b) {
      if (b > a) covered += b - a;
      a = s[i].a;
      b = s[i].b;
    } else if (s[i].b > b) {
      b = s[i].b;
    }
  }
  if (b > a) covered += b - a;
  free(s);
  return covered;
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

static void summarize(double wall) {
  memset(last_has, 0, sizeof last_has);
  fprintf(stderr, "jx profile: %.3f s wall, %zu events, trace in %s\n", wall, nevents, out_path);
  fprintf(stderr, "  %-9s %12s %14s %12s\n", "track", "compute", "communication", "idle");
  for (int t = 0; t < MAX_TRACKS; t++) {
    jx_profile_split s = {.wall = wall};
    for (size_t i = 0; i < nevents; i++) {
      if (events[i].tid != t) continue;
      if (events[i].kind == K_COMPUTE) s.compute += events[i].self;
      if (events[i].kind == K_COMM) s.comm += events[i].dur;
      s.events += events[i].kind == K_COMPUTE || events[i].kind == K_COMM;
    }
    if (!s.events) continue;
    s.idle = wall - busy_union(t, wall);
    last_split[t] = s;
    last_has[t] = 1;
    char name[16];
    if (t == HOST_TID)
      snprintf(name, sizeof name, "host");
    else
      snprintf(name, sizeof name, "device %d", t);
    fprintf(stderr, "  %-9s %8.1f ms %4.0f%% %8.1f ms %4.0f%% %6.1f ms %3.0f%%\n", name,
            s.compute * 1e3, 100 * s.compute / wall, s.comm * 1e3, 100 * s.comm / wall,
            s.idle * 1e3, 100 * s.idle / wall);
  }
  /* kernels by name over all tracks */
  kernel_row *rows = calloc(nevents + 1, sizeof *rows);
  size_t nrows = 0;
  for (size_t i = 0; rows && i < nevents; i++) {
    if (events[i].kind != K_COMPUTE) continue;
    size_t r = 0;
    while (r < nrows && strcmp(rows[r].name, events[i].name) != 0) r++;
    if (r == nrows) rows[nrows++].name = events[i].name;
    rows[r].calls++;
    rows[r].self += events[i].self;
    rows[r].flops += events[i].flops;
    rows[r].bytes += events[i].bytes;
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
  int ndev = jx_device_count();
  fprintf(stderr, "  peak memory:");
  for (int d = 0; d < ndev && d < JX_MEMSTATS_DEVICES; d++)
    fprintf(stderr, " device %d %.1f MiB%s", d, (double)jx_memstats_peak(d) / (1 << 20),
            d + 1 < ndev ? "," : "");
  fprintf(stderr, "\n");
}

jx_status jx_profiler_stop(void) {
  pthread_mutex_lock(&lock);
  if (!running()) {
    pthread_mutex_unlock(&lock);
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_profiler_stop: no profiler is running");
  }
  t_stop = jx_prof_now();
  __atomic_fetch_and(&jx_debug_flags, ~JX_DEBUG_PROFILE, __ATOMIC_RELAXED);
  jx_memstats_counter_hook = NULL;
  pthread_mutex_unlock(&lock);
  jx_memstats_track(0);
  /* no event is added once the flag is down; one being added holds the lock */
  pthread_mutex_lock(&lock);
  jx_status st = write_trace(out_path);
  summarize(t_stop - t_start);
  nevents = 0;
  pthread_mutex_unlock(&lock);
  return st;
}

int jx_profiler_last_split(int device, jx_profile_split *out) {
  int t = device < 0 ? HOST_TID : device;
  if (t >= MAX_TRACKS || !last_has[t]) return 1;
  *out = last_split[t];
  return 0;
}
