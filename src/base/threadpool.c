#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

enum { MAX_THREADS = 256 };

typedef struct {
  pthread_mutex_t lock; /* serializes parallel_for calls */
  pthread_mutex_t m;
  pthread_cond_t work, done;
  pthread_t threads[MAX_THREADS];
  int nthreads; /* workers, not counting the caller */
  int started, stopping;
  uint64_t generation; /* bumped for each job */
  /* the current job */
  jx_range_fn fn;
  void *ctx;
  int64_t n, chunk;
  atomic_llong next; /* next chunk start */
  int pending;       /* workers still on this job */
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

static void *worker(void *arg) {
  (void)arg;
  inside = 1;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool.m);
  for (;;) {
    while (!pool.stopping && pool.generation == seen) pthread_cond_wait(&pool.work, &pool.m);
    if (pool.stopping) break;
    seen = pool.generation;
    pthread_mutex_unlock(&pool.m);
    run_chunks();
    pthread_mutex_lock(&pool.m);
    if (--pool.pending == 0) pthread_cond_signal(&pool.done);
  }
  pthread_mutex_unlock(&pool.m);
  return NULL;
}

static int wanted_threads(void) {
  const char *v = getenv("JX_NUM_THREADS");
  long n = v ? strtol(v, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > MAX_THREADS) n = MAX_THREADS;
  return (int)n;
}

static void start(void) {
  int n = wanted_threads() - 1;
  pool.stopping = 0;
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
  pthread_mutex_lock(&pool.m);
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.chunk = chunk;
  atomic_store(&pool.next, 0);
  pool.pending = pool.nthreads;
  pool.generation++;
  pthread_cond_broadcast(&pool.work);
  pthread_mutex_unlock(&pool.m);
  inside = 1;
  run_chunks();
  inside = 0;
  pthread_mutex_lock(&pool.m);
  while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.m);
  pthread_mutex_unlock(&pool.m);
  pthread_mutex_unlock(&pool.lock);
}
