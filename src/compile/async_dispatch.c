/* Async dispatch: one thread runs the queued executables in FIFO order, so a
 * queued run's pending inputs were made by runs that ended before it. The
 * queue holds references to the program, the inputs and the output headers;
 * a run gives each output header its result's buffer, or its error to the
 * pending value that readers wait on. Both hand-offs spin briefly before
 * they sleep (base/spin.h): the idle dispatch thread polls the queue, and a
 * reader polls its pending value (array/pending.c), so a blocked call of a
 * small function costs no kernel wake-up either way. */
#include "async_dispatch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../base/job.h"
#include "../base/spin.h"
#include "../base/hooks.h"

typedef struct job {
  const jx_executable *x;
  jx_program *p;
  jx_array **in, **out; /* references held by the job */
  jx_array **res;       /* the run's results (owned by its scope) */
  jx_pending *done;
  int64_t queued_at; /* jx_now_ns */
  struct job *next;
  jx_array *refs[]; /* in, out and res: one allocation a call */
} job;

/* The dispatch thread's life: started by the first queued call, stopped by
 * jx_shutdown. While it stops it runs what is queued and nothing is queued
 * any more (a call then runs on its own thread), so every queued job ends. */
typedef enum { STOPPED, RUNNING, STOPPING } dispatch_state;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, idle = PTHREAD_COND_INITIALIZER,
                      stopped = PTHREAD_COND_INITIALIZER;
static uint64_t submitted, finished; /* jobs queued and ended, under lock */
/* Under lock; head and state are also written atomically (set_head,
 * set_state), since the idle dispatch thread polls them without the lock. */
static job *head, *tail;
static dispatch_state state;
static pthread_t thread;
static _Thread_local int on_dispatch_thread;
/* The idle dispatch thread's hand-off: it polls the queue before it sleeps
 * while recent calls came soon after it went idle (base/spin.h). */
static jx_spin_site idle_site;

/* Takes the lock, first trying for a few microseconds: the holder is a
 * submitter or the dispatch thread with a few instructions to go, and
 * sleeping on a contended mutex costs the kernel wake-up that the spinning
 * hand-offs save. */
static void lock_queue(void) {
  for (int i = 0; i < 64; i++) {
    if (pthread_mutex_trylock(&lock) == 0) return;
    jx_cpu_relax();
  }
  pthread_mutex_lock(&lock);
}

static void set_head(job *j) { __atomic_store_n(&head, j, __ATOMIC_RELEASE); }
static void set_state(dispatch_state s) { __atomic_store_n(&state, s, __ATOMIC_RELEASE); }

/* The dispatch thread's poll: a job queued, or a stop asked for. */
static int work_or_stop(const void *arg) {
  (void)arg;
  return __atomic_load_n(&head, __ATOMIC_ACQUIRE) ||
         __atomic_load_n(&state, __ATOMIC_ACQUIRE) != RUNNING;
}

static int enabled(void) { return jx_env_flag("JX_ASYNC_DISPATCH"); }

int jx_dispatch_wanted(const jx_executable *x, const jx_program *p) {
  if (on_dispatch_thread || jx_debug_flags || !enabled() || jx_executable_donates(x) ||
      jx_executable_synchronous(x))
    return 0;
  const void *top = jx_donation_swap(NULL); /* the program jx_call runs (array.h) */
  jx_donation_swap(top);
  /* with several processes, collectives stay on the thread that calls (MPI
   * may be initialized for one thread) */
  return top == p && jx_job_process_count() == 1;
}

static void job_free(job *j) {
  for (int i = 0; i < j->p->nin; i++) jx_release(j->in[i]);
  for (int o = 0; o < j->p->nout; o++) jx_release(j->out[o]);
  jx_pending_release(j->done);
  jx_program_release(j->p);
  free(j);
}

/* Runs j on this thread and hands its results (or its error) to the outputs. */
static void run_job(job *j) {
  const jx_program *p = j->p;
  jx_array **res = j->res;
  jx_scope_begin();
  jx_status st = jx_executable_run(j->x, p, j->in, res);
  /* an output that is sharded is gathered; the headers share the buffers */
  for (int o = 0; o < p->nout && !st; o++) st = jx_array_ready(res[o]);
  for (int o = 0; o < p->nout && !st; o++) {
    atomic_fetch_add_explicit(&res[o]->buf->refs, 1, memory_order_relaxed);
    __atomic_store_n(&j->out[o]->buf, res[o]->buf, __ATOMIC_RELEASE);
  }
  jx_pending_finish(j->done, st, st ? jx_last_error() : NULL);
  jx_clear_error();
  jx_scope_end();
}

static void *dispatch_main(void *arg) {
  (void)arg;
  on_dispatch_thread = 1;
  lock_queue();
  for (;;) {
    if (!head && state == RUNNING) {
      int64_t idle_from = jx_now_ns();
      pthread_mutex_unlock(&lock);
      jx_spin_until(&idle_site, work_or_stop, NULL);
      lock_queue();
      while (!head && state == RUNNING) pthread_cond_wait(&wake, &lock);
      if (head) jx_spin_note(&idle_site, head->queued_at - idle_from);
    }
    if (!head) break; /* stopping, and nothing can be queued any more */
    job *j = head;
    set_head(j->next);
    if (!head) tail = NULL;
    pthread_mutex_unlock(&lock);
    run_job(j);
    job_free(j);
    lock_queue();
    finished++;
    pthread_cond_broadcast(&idle);
  }
  pthread_mutex_unlock(&lock);
  jx_thread_end(); /* this thread's scopes */
  return NULL;
}

void jx_dispatch_wait_all(void) {
  if (on_dispatch_thread) return;
  pthread_mutex_lock(&lock);
  uint64_t target = submitted; /* every queued job ends, even while the thread stops */
  while (finished < target) pthread_cond_wait(&idle, &lock);
  pthread_mutex_unlock(&lock);
}

/* jx_shutdown: lets the queue finish and stops the thread (a later call
 * starts it again). A second caller meanwhile waits for the first's stop. */
static void stop_thread(void) {
  if (on_dispatch_thread) return;
  pthread_mutex_lock(&lock);
  if (state == RUNNING) {
    set_state(STOPPING);
    pthread_cond_signal(&wake);
    pthread_t t = thread;
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    pthread_mutex_lock(&lock);
    set_state(STOPPED);
    pthread_cond_broadcast(&stopped);
  }
  while (state == STOPPING) pthread_cond_wait(&stopped, &lock);
  pthread_mutex_unlock(&lock);
}

jx_status jx_dispatch_submit(const jx_executable *x, const jx_program *p, jx_array *const *in,
                             jx_array **out) {
  job *j = calloc(1, sizeof *j + sizeof *j->refs * (size_t)(p->nin + 2 * p->nout));
  if (j) {
    j->in = j->refs;
    j->out = j->in + p->nin;
    j->res = j->out + p->nout;
    j->done = jx_pending_new();
  }
  if (!j || !j->done) {
    free(j);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_call: out of memory");
  }
  j->x = x;
  j->p = jx_program_retain((jx_program *)p);
  for (int i = 0; i < p->nin; i++) j->in[i] = jx_keep(in[i]);
  for (int o = 0; o < p->nout; o++) {
    jx_aval a = p->avals[p->out[o]];
    jx_array *h = jx_array_unbacked(a.dtype, a.shape, a.weak);
    if (!h->poisoned) {
      jx_pending_retain(j->done);
      jx_array_set_pending(h, j->done);
    }
    j->out[o] = jx_keep(h);
  }
  for (int o = 0; o < p->nout; o++)
    if (j->out[o]->poisoned) {
      jx_status st = jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
      jx_pending_finish(j->done, st, jx_last_error()); /* no header waits forever */
      job_free(j);
      return st;
    }
  for (int o = 0; o < p->nout; o++) out[o] = j->out[o]; /* the caller's scope owns them */
  lock_queue();
  if (state == STOPPED && pthread_create(&thread, NULL, dispatch_main, NULL) == 0) {
    set_state(RUNNING);
    __atomic_store_n(&jx_before_shutdown, stop_thread, __ATOMIC_RELEASE);
  }
  int queued = state == RUNNING; /* else stopping (or no thread): run it here */
  if (queued) {
    j->next = NULL;
    j->queued_at = jx_now_ns();
    if (tail)
      tail->next = j;
    else
      set_head(j);
    tail = j;
    submitted++;
    pthread_cond_signal(&wake);
  }
  pthread_mutex_unlock(&lock);
  if (!queued) {
    run_job(j);
    job_free(j);
  }
  return JX_OK;
}
