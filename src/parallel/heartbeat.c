/* Heartbeats over the job's store (heartbeat.h). */
#include "../base/env.h"
#include "heartbeat.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coordinator.h"
#include "kv_store.h"
#include "tcp_socket.h"

static jx_kv *kv; /* this thread's own connection: a wait on it blocks no one else */
static pthread_t thread;
static int running, stopping, my_id, nproc;
static double timeout_s, interval_s;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

double jx_heartbeat_timeout(void) {
  const char *v = jx_env_string("JX_HEARTBEAT_TIMEOUT");
  char *end;
  double t = v && *v ? strtod(v, &end) : 30;
  return v && *v && (*end || t < 0) ? 30 : t;
}

static int is_stopping(void) { return __atomic_load_n(&stopping, __ATOMIC_ACQUIRE); }

/* Process 0 serves the store: once it knows of a loss it waits (two
 * intervals at most) until the others have read it ("lost/seen") before its
 * process ends, by end_process or by its program's exit. */
static int loss_known;
static void wait_until_seen(void) {
  char msg[256];
  int64_t seen = 0;
  for (double until = jx_tcp_now() + 2 * interval_s; jx_tcp_now() < until;) {
    if (jx_kv_add(kv, "lost/seen", 0, &seen, msg, sizeof msg) || seen >= nproc - 2) return;
    usleep(20 * 1000);
  }
}
static void linger_at_exit(void) {
  if (__atomic_load_n(&loss_known, __ATOMIC_ACQUIRE) && !is_stopping()) wait_until_seen();
}

/* The job lost a process (what says which and why): every collective of
 * this process fails at once with that reason (jx_coordinator_interrupt),
 * so the program sees the error; the process ends (status 1) a second later
 * if the program has not ended it. from_store: what was read from "lost". */
static void end_process(const char *what, int from_store) {
  if (is_stopping()) return; /* leaving anyway */
  char msg[256];
  int64_t seen = 0;
  if (my_id != 0 && from_store) jx_kv_add(kv, "lost/seen", 1, &seen, msg, sizeof msg);
  __atomic_store_n(&loss_known, 1, __ATOMIC_RELEASE);
  fprintf(stderr,
          "jx: process %d of %d: %s; its collectives fail and it ends (status 1), as every "
          "process of the job does\n",
          my_id, nproc, what);
  fflush(stderr);
  jx_coordinator_interrupt(what);
  if (my_id == 0) wait_until_seen();
  usleep(1000 * 1000); /* the program's own error path, naming the lost process */
  fflush(stdout);
  _exit(1);
}

/* Process 0: names the first process lost, once, in "lost". */
typedef struct {
  int64_t count;
  double since; /* when the count last moved */
} watch;

static void end_process(const char *what, int from_store);
/* ... and acts on it at once (before the others, which read it from the store) */
static void declare_lost(const char *text, char *msg, size_t cap) {
  int64_t first = 0;
  if (!jx_kv_add(kv, "lost/claims", 1, &first, msg, cap) && first == 1 &&
      !jx_kv_set(kv, "lost", text, strlen(text), msg, cap))
    end_process(text, 0);
}

static void check_processes(watch *w, double now) {
  char msg[512], key[64], text[512];
  for (int q = 1; q < nproc; q++) {
    int64_t count = 0;
    snprintf(key, sizeof key, "heartbeat/%d", q);
    if (jx_kv_add(kv, key, 0, &count, msg, sizeof msg)) return; /* the loop names the store */
    void *v = NULL;
    size_t len;
    snprintf(key, sizeof key, "left/%d", q);
    if (!jx_kv_get(kv, key, 0, &v, &len, msg, sizeof msg)) { /* shutting down in good order */
      free(v);
      w[q].since = now;
      continue;
    }
    snprintf(key, sizeof key, "closed/%d", q);
    if (!jx_kv_get(kv, key, 0, &v, &len, msg, sizeof msg)) {
      free(v);
      snprintf(text, sizeof text,
               "process %d was lost: it ended without leaving the job (its connection to the "
               "coordinator closed)",
               q);
      declare_lost(text, msg, sizeof msg);
      return;
    }
    if (count != w[q].count) {
      w[q].count = count;
      w[q].since = now;
    } else if (now - w[q].since > timeout_s - interval_s) {
      /* seen up to an interval after its last beat: lost by the timeout after that beat */
      snprintf(text, sizeof text,
               "process %d was lost: no heartbeat for %g s (JX_HEARTBEAT_TIMEOUT; the process was "
               "killed or hung, or its host is gone)",
               q, timeout_s);
      declare_lost(text, msg, sizeof msg);
      return;
    }
  }
}

static void *beat(void *arg) {
  (void)arg;
  char key[64], msg[1024], what[1200];
  watch *w = my_id == 0 ? calloc((size_t)nproc, sizeof *w) : NULL;
  double now = jx_tcp_now();
  for (int q = 0; w && q < nproc; q++) w[q].since = now;
  snprintf(key, sizeof key, "heartbeat/%d", my_id);
  while (!is_stopping()) {
    int64_t count;
    if (jx_kv_add(kv, key, 1, &count, msg, sizeof msg)) {
      if (is_stopping()) break;
      snprintf(what, sizeof what,
               "process 0 was lost: the job's coordinator (process 0's store) did not take a "
               "heartbeat (%s)",
               msg);
      end_process(what, 0);
    }
    now = jx_tcp_now();
    double checked = now;
    if (w) check_processes(w, now);
    /* until the next beat, wait for "lost" in short slices (a stop is seen within one);
     * process 0 watches twice per interval */
    for (double next = now + interval_s, t; !is_stopping() && (t = jx_tcp_now()) < next;) {
      if (w && t - checked >= interval_s / 2) check_processes(w, checked = t);
      void *lost = NULL;
      size_t len;
      if (!jx_kv_get(kv, "lost", next - t < 0.25 ? next - t : 0.25, &lost, &len, msg, sizeof msg)) {
        snprintf(what, sizeof what, "%.*s", (int)len, (char *)lost);
        free(lost);
        end_process(what, 1);
      }
    }
  }
  free(w);
  return NULL;
}

int jx_heartbeat_start(int id, int n, char *msg, size_t cap) {
  timeout_s = jx_heartbeat_timeout();
  if (timeout_s <= 0 || n < 2) return 0;
  interval_s = timeout_s / 5 < 0.1 ? 0.1 : timeout_s / 5;
  my_id = id;
  nproc = n;
  char why[512];
  kv = jx_coordinator_connect(timeout_s, why, sizeof why);
  if (!kv) {
    snprintf(msg, cap, "heartbeats: %s", why);
    return 1;
  }
  __atomic_store_n(&stopping, 0, __ATOMIC_RELEASE);
  if (pthread_create(&thread, NULL, beat, NULL)) {
    jx_kv_close(kv);
    kv = NULL;
    snprintf(msg, cap, "heartbeats: cannot start the thread");
    return 1;
  }
  running = 1;
  static int registered;
  if (id == 0 && !registered) registered = !atexit(linger_at_exit);
  return 0;
}

void jx_heartbeat_stop(int left) {
  pthread_mutex_lock(&mu);
  if (running) {
    __atomic_store_n(&stopping, 1, __ATOMIC_RELEASE);
    pthread_join(thread, NULL);
    running = 0;
    char key[64], msg[256];
    snprintf(key, sizeof key, "left/%d", my_id);
    if (left) jx_kv_set(kv, key, "1", 1, msg, sizeof msg); /* before the store connection closes */
    jx_kv_close(kv);
    kv = NULL;
  }
  pthread_mutex_unlock(&mu);
}
