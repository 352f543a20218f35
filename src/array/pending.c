/* Pending values (async dispatch): the completion of a queued run that will
 * give buffers to the arrays waiting on it, or an error that every reader
 * of them then reports. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/spin.h"
#include "array.h"

/* Kept small (the message is apart): one is made per dispatched call, and
 * an allocation over 1 KiB makes malloc consolidate its free lists. */
struct jx_pending {
  atomic_int refs;
  pthread_mutex_t m;
  pthread_cond_t cv;
  atomic_int done; /* set last (release): st, msg and done_at are readable once it is */
  jx_status st;
  int64_t done_at; /* when the run finished (jx_now_ns) */
  char *msg;       /* the error's message (malloc'ed), or NULL */
};

static const char *const run_failed = "the dispatched run failed";

/* The readers' hand-off: a reader polls before it sleeps while recent runs
 * ended soon after their readers began to wait (base/spin.h). */
static jx_spin_site readers;

jx_pending *jx_pending_new(void) {
  jx_pending *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  atomic_init(&c->refs, 1);
  pthread_mutex_init(&c->m, NULL);
  pthread_cond_init(&c->cv, NULL);
  return c;
}

void jx_pending_retain(jx_pending *c) {
  atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void jx_pending_release(jx_pending *c) {
  if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
  pthread_mutex_destroy(&c->m);
  pthread_cond_destroy(&c->cv);
  free(c->msg);
  free(c);
}

void jx_pending_finish(jx_pending *c, jx_status st, const char *msg) {
  pthread_mutex_lock(&c->m);
  c->st = st;
  if (st) {
    free(c->msg);
    c->msg = strdup(msg && *msg ? msg : run_failed); /* NULL: run_failed */
  }
  c->done_at = jx_now_ns();
  atomic_store_explicit(&c->done, 1, memory_order_release);
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->m);
}

static int is_done(const void *c) {
  return atomic_load_explicit(&((const jx_pending *)c)->done, memory_order_acquire);
}

jx_status jx_pending_wait(jx_pending *c) {
  if (!is_done(c)) {
    int64_t since = jx_now_ns();
    if (!jx_spin_until(&readers, is_done, c)) {
      pthread_mutex_lock(&c->m);
      while (!is_done(c)) pthread_cond_wait(&c->cv, &c->m);
      pthread_mutex_unlock(&c->m);
    }
    jx_spin_note(&readers, c->done_at - since);
  }
  jx_status st = c->st;
  /* the run's error, reported where its result is first needed */
  if (st) jx_error_set(st, "%s", c->msg ? c->msg : run_failed);
  return st;
}

int jx_pending_done(jx_pending *c) { return is_done(c); }
