#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "env.h"
#include "spin.h"

enum { MAX_THREADS = 256 };

/* Spin-then-sleep: a worker polls for the next job for SPIN_NS before it
 * sleeps on the condition variable, and the caller polls as long for the
 * workers to finish. A jitted program runs one short kernel (or GEMM piece)
 * after another, tens of microseconds apart: sleeping and waking through
 * the kernel for every one of them cost about a fifth of an MLP step. The
 * spin is bounded in time, so an idle pool costs nothing for long (on the
 * 2-core machine, 0.25 ms beat 0.03 and 0.1 ms on a quiet machine; under
 * load from other processes shorter spins do better). */
enum { SPIN_NS = 250000, CHECK_EVERY = 64 };

typedef struct {
  pthread_mutex_t lock; /* serializes parallel_for calls */
  pthread_mutex_t m;    /* guards the sleeping sides: sleepers, waiting */
  pthread_cond_t work, done;
  pthread_t threads[MAX_THREADS];
  int nthreads; /* workers, not counting the caller */
  int started;
  atomic_int stopping;
  atomic_ullong generation; /* bumped for each job, after its fields are written */
  int sleepers;             /* workers waiting on `work` (under m) */
  int waiting;              /* the caller waits on `done` (under m) */
  /* the current job */
  jx_range_fn fn;
  void *ctx;
  int64_t n, chunk;
  atomic_llong next;  /* next chunk start */
  atomic_int pending; /* workers still on this job */
  atomic_int busy;    /* threads on the current job, the caller included; 0 between jobs */
} pool_t;

static pool_t pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                      .m = PTHREAD_MUTEX_INITIALIZER,
                      .work = PTHREAD_COND_INITIALIZER,
                      .done = PTHREAD_COND_INITIALIZER};
static _Thread_local int inside; /* 1 on a worker or during a job: nested calls run inline */

static void run_chunks(void) {
  for (;;) {
    int64_t b = atomic_fetch_add(&pool.next, pool.chunk);
    if (b >= pool.n) break;
    int64_t e = b + pool.chunk < pool.n ? b + pool.chunk : pool.n;
    pool.fn(pool.ctx, b, e);
  }
}

/* The next generation after `seen`: spins, then sleeps. */
static uint64_t next_job(uint64_t seen) {
  uint64_t g;
  int64_t until = jx_now_ns() + SPIN_NS;
  for (int s = 1;; s++) {
    g = atomic_load(&pool.generation);
    if (g != seen || atomic_load(&pool.stopping)) return g;
    jx_cpu_relax();
    if (s % CHECK_EVERY == 0 && jx_now_ns() > until) break;
  }
  pthread_mutex_lock(&pool.m);
  pool.sleepers++;
  while ((g = atomic_load(&pool.generation)) == seen && !atomic_load(&pool.stopping))
    pthread_cond_wait(&pool.work, &pool.m);
  pool.sleepers--;
  pthread_mutex_unlock(&pool.m);
  return g;
}

static void *worker(void *arg) {
  (void)arg;
  inside = 1;
  uint64_t seen = 0;
  for (;;) {
    seen = next_job(seen);
    if (atomic_load(&pool.stopping)) break;
    run_chunks();
    if (atomic_fetch_sub(&pool.pending, 1) == 1) {
      pthread_mutex_lock(&pool.m);
      if (pool.waiting) pthread_cond_signal(&pool.done);
      pthread_mutex_unlock(&pool.m);
    }
  }
  return NULL;
}

static int wanted_threads(void) {
  const char *v = jx_env_string("JX_NUM_THREADS");
  long n = v ? strtol(v, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > MAX_THREADS) n = MAX_THREADS;
  return (int)n;
}

static void start(void) {
  int n = wanted_threads() - 1;
  atomic_store(&pool.stopping, 0);
  pool.nthreads = 0;
  for (int i = 0; i < n; i++) {
    if (pthread_create(&pool.threads[i], NULL, worker, NULL) != 0) break;
    pool.nthreads++;
  }
  pool.started = 1;
}

int jx_pool_threads(void) {
  pthread_mutex_lock(&pool.lock);
  if (!pool.started) start();
  int n = pool.nthreads + 1;
  pthread_mutex_unlock(&pool.lock);
  return n;
}

int jx_pool_inside(void) { return inside; }

int jx_pool_busy_threads(void) { return atomic_load_explicit(&pool.busy, memory_order_relaxed); }

void jx_pool_run_inline(int on) { inside = on != 0; }

void jx_parallel_for(int64_t n, int64_t grain, jx_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (inside || n <= grain) {
    fn(ctx, 0, n);
    return;
  }
  pthread_mutex_lock(&pool.lock);
  if (!pool.started) start();
  int64_t pieces = pool.nthreads + 1;
  int64_t chunk = (n + pieces - 1) / pieces;
  if (chunk < grain) chunk = grain;
  if (pool.nthreads == 0 || chunk >= n) {
    pthread_mutex_unlock(&pool.lock);
    fn(ctx, 0, n);
    return;
  }
  if (!jx_machine_has_room(pool.nthreads + 1)) {
    /* the other threads would queue for a core: the caller runs the same
     * chunks, in order, so the results are those of the split */
    pthread_mutex_unlock(&pool.lock);
    inside = 1;
    for (int64_t b = 0; b < n; b += chunk) fn(ctx, b, b + chunk < n ? b + chunk : n);
    inside = 0;
    return;
  }
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.chunk = chunk;
  atomic_store(&pool.next, 0);
  atomic_store(&pool.pending, pool.nthreads);
  atomic_store_explicit(&pool.busy, pool.nthreads + 1, memory_order_relaxed);
  atomic_fetch_add(&pool.generation, 1); /* publishes the job to spinning workers */
  pthread_mutex_lock(&pool.m);
  if (pool.sleepers) pthread_cond_broadcast(&pool.work);
  pthread_mutex_unlock(&pool.m);
  inside = 1;
  run_chunks();
  inside = 0;
  int64_t until = jx_now_ns() + SPIN_NS;
  for (int s = 1; atomic_load(&pool.pending) > 0; s++) {
    jx_cpu_relax();
    if (s % CHECK_EVERY == 0 && jx_now_ns() > until) break;
  }
  if (atomic_load(&pool.pending) > 0) {
    pthread_mutex_lock(&pool.m);
    pool.waiting = 1;
    while (atomic_load(&pool.pending) > 0) pthread_cond_wait(&pool.done, &pool.m);
    pool.waiting = 0;
    pthread_mutex_unlock(&pool.m);
  }
  atomic_store_explicit(&pool.busy, 0, memory_order_relaxed);
  pthread_mutex_unlock(&pool.lock);
}
