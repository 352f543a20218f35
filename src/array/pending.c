/* Pending values (async dispatch): the completion of a queued run that will
 * give buffers to the arrays waiting on it, or an error that every reader
 * of them then reports. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "array.h"

struct jx_pending {
  atomic_int refs;
  pthread_mutex_t m;
  pthread_cond_t cv;
  int done;
  jx_status st;
  char msg[1024];
};

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
  free(c);
}

void jx_pending_finish(jx_pending *c, jx_status st, const char *msg) {
  pthread_mutex_lock(&c->m);
  c->st = st;
  if (st) snprintf(c->msg, sizeof c->msg, "%s", msg && *msg ? msg : "the dispatched run failed");
  c->done = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->m);
}

jx_status jx_pending_wait(jx_pending *c) {
  pthread_mutex_lock(&c->m);
  while (!c->done) pthread_cond_wait(&c->cv, &c->m);
  jx_status st = c->st;
  pthread_mutex_unlock(&c->m);
  /* the run's error, reported where its result is first needed */
  if (st) jx_error_set(st, "%s", c->msg);
  return st;
}

int jx_pending_done(jx_pending *c) {
  pthread_mutex_lock(&c->m);
  int d = c->done;
  pthread_mutex_unlock(&c->m);
  return d;
}
