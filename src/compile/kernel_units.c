#include "kernel_units.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "../base/env.h"
#include "../base/error.h"
#include "toolchain.h"

/* Kernels per unit below which one compiler run is cheaper than several
 * (each run starts the compiler and reads the prelude again). */
enum { KERNELS_PER_UNIT = 8, MAX_UNITS = 64 };

/* Distinct kernels from which a program compiles in tiers: fewer compile
 * at the final level at once (a fraction of a second of compiler time,
 * where a first tier would only make their first runs slower, and a short
 * benchmark or test of them would time or check only the first tier). */
enum { TIERED_KERNELS = 16 };

/* Seconds of runs at the first tier before the final one compiles. */
#define TIER_UP_DEFAULT_S 0.2

struct jx_kernel_units {
  int nunits, n, final;
  char *sources[MAX_UNITS];
  char (*names)[JX_KERNEL_NAME_CAP]; /* per address, as given to build */
  void **fns;                        /* the final tier's addresses, written before `ready` */
  double threshold;                  /* JX_KERNEL_TIER_UP */
  pthread_mutex_t lock;
  double ran;  /* seconds of runs so far (under lock) */
  int started; /* the final tier's thread: 1 started, -1 could not start (under lock) */
  double started_at, ran_then; /* when it started, after how many seconds of runs */
  pthread_t thread;
  atomic_int ready;
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A unit compiled (or loaded) on a thread of its own. */
typedef struct {
  const char *source;
  int level;
  void *handle;
  jx_status status;
  char message[512];
} unit_job;

static void *compile_unit(void *arg) {
  unit_job *j = arg;
  j->handle = jx_kernel_object(j->source, j->level, 1);
  if (!j->handle) {
    j->status = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    snprintf(j->message, sizeof j->message, "%s", jx_last_error());
  }
  return NULL;
}

/* Compiles (or loads) sources[0, n) at `level` into handles, the units side
 * by side: a translation unit compiles on one core. */
static jx_status compile_all(char *const *sources, int n, int level, void **handles) {
  unit_job jobs[MAX_UNITS];
  pthread_t threads[MAX_UNITS];
  int started[MAX_UNITS] = {0};
  for (int k = 0; k < n; k++) jobs[k] = (unit_job){.source = sources[k], .level = level};
  /* the calling thread compiles unit 0, threads the others (or it, in turn,
   * when a thread cannot start) */
  for (int k = 1; k < n; k++)
    started[k] = pthread_create(&threads[k], NULL, compile_unit, &jobs[k]) == 0;
  for (int k = 0; k < n; k++)
    if (!started[k]) compile_unit(&jobs[k]);
  jx_status st = JX_OK;
  for (int k = 0; k < n; k++) {
    if (started[k]) pthread_join(threads[k], NULL);
    if (!st && jobs[k].status) st = jx_error_set(jobs[k].status, "%s", jobs[k].message);
    handles[k] = jobs[k].handle;
  }
  return st;
}

/* fns[k] = the address of names[k] in one of the units (for each k with a
 * name and, when only_missing, no address yet). */
static jx_status resolve(void *const *handles, int nunits, const char (*names)[JX_KERNEL_NAME_CAP],
                         void **fns, int n, int only_missing) {
  for (int k = 0; k < n; k++) {
    if (!names[k][0] || (only_missing && fns[k])) continue;
    fns[k] = NULL;
    for (int h = 0; h < nunits && !fns[k]; h++) fns[k] = dlsym(handles[h], names[k]);
    if (!fns[k])
      return jx_error_set(JX_ERR_INTERNAL, "jit: kernel %s missing from its units", names[k]);
  }
  return JX_OK;
}

/* Several units are kept as batches, where other programs' builds find the
 * kernels they share (toolchain.h's jx_kernel_find). */
static jx_status keep(void *const *handles, int nunits) {
  jx_status st = JX_OK;
  for (int k = 0; k < nunits && nunits > 1 && !st; k++) st = jx_kernel_keep(handles[k]);
  return st;
}

static void units_free(jx_kernel_units *u) {
  for (int k = 0; k < u->nunits; k++) free(u->sources[k]);
  free(u->names);
  free(u->fns);
  pthread_mutex_destroy(&u->lock);
  free(u);
}

jx_status jx_kernel_units_build(const jx_kernel_tu *t, int n,
                                const char (*names)[JX_KERNEL_NAME_CAP], void **fns,
                                jx_kernel_units **out, int *units) {
  *out = NULL;
  *units = 1;
  int first, final;
  jx_status st = jx_kernel_levels(&first, &final);
  if (st) return st;
  double threshold = TIER_UP_DEFAULT_S;
  if (jx_env_double("JX_KERNEL_TIER_UP", &threshold) < 0 || !(threshold >= 0))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jit: JX_KERNEL_TIER_UP is '%s': want seconds (a number >= 0, or inf)",
                        jx_env_string("JX_KERNEL_TIER_UP"));
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int nu = t->n / KERNELS_PER_UNIT;
  if (nu > cores) nu = (int)cores;
  if (nu > MAX_UNITS) nu = MAX_UNITS;
  if (nu < 1) nu = 1;
  *units = nu;
  jx_kernel_units *u = calloc(1, sizeof *u);
  if (!u) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
  if (pthread_mutex_init(&u->lock, NULL) != 0) {
    free(u);
    return jx_error_set(JX_ERR_INTERNAL, "jit: cannot create a lock");
  }
  u->nunits = nu;
  u->n = n;
  u->final = final;
  u->threshold = threshold;
  for (int k = 0; k < nu && !st; k++)
    if (!(u->sources[k] = jx_kernel_tu_part(t, k, nu)))
      st = jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  void *handles[MAX_UNITS];
  /* the final tier at once for a small program, or one whose final units
   * are all in a cache */
  int tiered = first != final && t->n >= TIERED_KERNELS, cached = !st && tiered;
  for (int k = 0; k < nu && cached; k++)
    cached = (handles[k] = jx_kernel_object(u->sources[k], final, 0)) != NULL;
  int level = tiered && !cached ? first : final;
  if (!st && !cached) st = compile_all(u->sources, nu, level, handles);
  if (!st) st = resolve(handles, nu, names, fns, n, 1);
  if (!st && level == final) st = keep(handles, nu);
  if (!st && level != final) {
    u->names = malloc(sizeof *u->names * (size_t)(n + 1));
    u->fns = calloc((size_t)n + 1, sizeof *u->fns);
    if (!u->names || !u->fns) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
    if (!st) memcpy(u->names, names, sizeof *u->names * (size_t)n);
  }
  if (st || level == final) {
    units_free(u);
    return st;
  }
  *out = u;
  return JX_OK;
}

static void *tier_up(void *arg) {
  jx_kernel_units *u = arg;
#if defined(__linux__)
  /* below the program's own threads: Linux keeps a nice value per thread,
   * and the unit threads and compiler runs started from here inherit it */
  (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
#endif
  void *handles[MAX_UNITS];
  jx_status st = compile_all(u->sources, u->nunits, u->final, handles);
  if (!st)
    st = resolve(handles, u->nunits, (const char(*)[JX_KERNEL_NAME_CAP])u->names, u->fns, u->n, 0);
  if (!st) st = keep(handles, u->nunits);
  if (jx_env_flag("JX_LOG_COMPILES")) {
    if (st)
      fprintf(stderr, "jx: kernels stay at their first tier: %s\n", jx_last_error());
    else
      fprintf(stderr, "jx: %d kernel unit%s at -O%d in %.1f ms, after %.3f s of runs\n", u->nunits,
              u->nunits > 1 ? "s" : "", u->final, (now_s() - u->started_at) * 1e3, u->ran_then);
  }
  if (!st) atomic_store_explicit(&u->ready, 1, memory_order_release);
  return NULL;
}

void jx_kernel_units_ran(jx_kernel_units *u, double seconds) {
  if (!u) return;
  pthread_mutex_lock(&u->lock);
  u->ran += seconds;
  if (!u->started && u->ran >= u->threshold) {
    u->started_at = now_s();
    u->ran_then = u->ran;
    u->started = pthread_create(&u->thread, NULL, tier_up, u) == 0 ? 1 : -1;
  }
  pthread_mutex_unlock(&u->lock);
}

int jx_kernel_units_ready(const jx_kernel_units *u) {
  return atomic_load_explicit(&u->ready, memory_order_acquire);
}

void *jx_kernel_units_final(const jx_kernel_units *u, int k) {
  return u && jx_kernel_units_ready(u) ? u->fns[k] : NULL;
}

void jx_kernel_units_free(jx_kernel_units *u) {
  if (!u) return;
  pthread_mutex_lock(&u->lock);
  int started = u->started;
  pthread_mutex_unlock(&u->lock);
  if (started == 1) pthread_join(u->thread, NULL);
  units_free(u);
}
