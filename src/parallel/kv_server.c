/* The key-value store's server (kv_store.h): one thread that polls the
 * listener and every client's connection. A request that must wait (get of
 * a key not yet set, wait, join before every process came) is parked on its
 * connection with its deadline; every set and add looks at the parked
 * requests of its job, and the poll wakes at the nearest deadline to answer
 * the ones that ran out. Each job's keys live in a hash table of their own. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../base/hash.h"
#include "../base/str_append.h"
#include "kv_store.h"
#include "kv_wire.h"
#include "tcp_socket.h"

#define HOST_CAP 64

typedef struct {
  char *key, *value; /* value: len bytes and a 0 */
  size_t len;
} entry;

typedef struct {
  char *token;
  int nproc;
  entry *slot; /* open addressing, a power of two long */
  size_t nslot, used;
  /* the rendezvous */
  int *joined_by; /* per process id: the connection that joined as it, or -1 */
  char (*joined_host)[HOST_CAP];
  int came, complete;
  char refusal[1024]; /* why the job cannot start: told to every process that comes */
} job;

typedef struct {
  int fd;
  job *job; /* NULL until its hello */
  char *in;
  size_t in_len, in_cap;
  /* a parked request (one at most: a client waits for each answer) */
  int parked;
  uint8_t op;
  char **keys;
  int nkeys;
  int join_id;
  double deadline, timeout_s;
  int joined_as; /* the process id it joined as (the job started), or -1 */
} conn;

struct jx_kv_server {
  int lfd, wake[2];
  pthread_t thread;
  int running;
  int joined_open;    /* connections of processes that joined, open now */
  pthread_mutex_t mu; /* jobs, against jx_kv_server_add_job from other threads */
  job **jobs;
  int njobs;
  conn **conns;
  int nconns;
  kv_buf out; /* the answer being sent */
};

/* ---- a job's keys ---- */

static entry *find(job *j, const char *key) {
  if (!j->nslot) return NULL;
  size_t i = (size_t)jx_hash_str(JX_HASH_SEED, key) & (j->nslot - 1);
  for (; j->slot[i].key; i = (i + 1) & (j->nslot - 1))
    if (!strcmp(j->slot[i].key, key)) return &j->slot[i];
  return NULL;
}

/* the entry of key, made (without a value) when new; NULL: out of memory */
static entry *find_or_make(job *j, const char *key) {
  entry *e = find(j, key);
  if (e) return e;
  if (2 * (j->used + 1) > j->nslot) { /* grow at half full */
    size_t n = j->nslot ? 2 * j->nslot : 64;
    entry *s = calloc(n, sizeof *s);
    if (!s) return NULL;
    for (size_t k = 0; k < j->nslot; k++) {
      if (!j->slot[k].key) continue;
      size_t i = (size_t)jx_hash_str(JX_HASH_SEED, j->slot[k].key) & (n - 1);
      while (s[i].key) i = (i + 1) & (n - 1);
      s[i] = j->slot[k];
    }
    free(j->slot);
    j->slot = s, j->nslot = n;
  }
  size_t i = (size_t)jx_hash_str(JX_HASH_SEED, key) & (j->nslot - 1);
  while (j->slot[i].key) i = (i + 1) & (j->nslot - 1);
  j->slot[i].key = strdup(key);
  if (!j->slot[i].key) return NULL;
  j->used++;
  return &j->slot[i];
}

static int put_value(entry *e, const void *v, size_t len) {
  char *p = malloc(len + 1);
  if (!p) return 1;
  if (len) memcpy(p, v, len);
  p[len] = 0;
  free(e->value);
  e->value = p, e->len = len;
  return 0;
}

static void free_job(job *j) {
  for (size_t i = 0; i < j->nslot; i++) free(j->slot[i].key), free(j->slot[i].value);
  free(j->slot), free(j->token), free(j->joined_by), free(j->joined_host), free(j);
}

/* ---- answers ---- */

static void answer(jx_kv_server *s, conn *c, int status, const void *body, size_t len) {
  kv_begin(&s->out, (uint8_t)status);
  kv_put(&s->out, body, len);
  kv_seal(&s->out);
  /* clients read their answer at once: a client that does not within a few
   * seconds is gone or stopped, and loses its connection */
  if (s->out.failed || jx_tcp_send_all(c->fd, s->out.p, s->out.len, jx_tcp_now() + 5))
    shutdown(c->fd, SHUT_RDWR);
}

static void answer_text(jx_kv_server *s, conn *c, int status, const char *text) {
  answer(s, c, status, text, strlen(text));
}

static void unpark(conn *c) {
  for (int i = 0; i < c->nkeys; i++) free(c->keys[i]);
  free(c->keys);
  c->keys = NULL, c->nkeys = 0, c->parked = 0;
}

/* ---- the rendezvous ---- */

static void put_ids(char *buf, size_t cap, const int *ids, int n) {
  jx_str_append(buf, cap, "%s", n == 1 ? "process" : "processes");
  for (int i = 0; i < n; i++) jx_str_append(buf, cap, "%s%d", i ? ", " : " ", ids[i]);
}

/* every parked join of c's job gets the refusal */
static void refuse_job(jx_kv_server *s, job *j) {
  for (int i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    if (c->job == j && c->parked && c->op == KV_JOIN) {
      answer_text(s, c, 1, j->refusal);
      unpark(c);
    }
  }
}

static void join(jx_kv_server *s, conn *c, int id, int nproc, const char *host, double timeout_s) {
  job *j = c->job;
  if (!j->refusal[0]) {
    if (nproc != j->nproc)
      snprintf(j->refusal, sizeof j->refusal,
               "process %d (at %s) was started with %d processes, but the job has %d", id, host,
               nproc, j->nproc);
    else if (id < 0 || id >= j->nproc)
      snprintf(j->refusal, sizeof j->refusal,
               "a process (at %s) says it is process %d, but the process ids of a job of %d are "
               "0 to %d",
               host, id, j->nproc, j->nproc - 1);
    else if (j->joined_by[id] >= 0)
      snprintf(j->refusal, sizeof j->refusal,
               "two processes say they are process %d (at %s and at %s): every process needs an "
               "id of its own",
               id, j->joined_host[id], host);
  }
  if (j->refusal[0]) {
    answer_text(s, c, 1, j->refusal);
    refuse_job(s, j);
    return;
  }
  j->joined_by[id] = c->fd;
  snprintf(j->joined_host[id], HOST_CAP, "%s", host);
  j->came++;
  c->parked = 1, c->op = KV_JOIN, c->join_id = id;
  c->timeout_s = timeout_s, c->deadline = jx_tcp_now() + timeout_s;
  if (j->came < j->nproc) return;
  j->complete = 1;
  for (int i = 0; i < s->nconns; i++) {
    conn *o = s->conns[i];
    if (o->job == j && o->parked && o->op == KV_JOIN) {
      o->joined_as = o->join_id;
      __atomic_add_fetch(&s->joined_open, 1, __ATOMIC_RELAXED);
      answer(s, o, 0, NULL, 0);
      unpark(o);
    }
  }
}

/* A parked join's deadline passed: every process parked in the job's
 * rendezvous hears which processes did not come (those joining later time
 * out at their own deadline), as the job cannot start. */
static void join_expired(jx_kv_server *s, job *j) {
  int *missing = malloc(sizeof *missing * (size_t)j->nproc), m = 0;
  char ids[512] = "";
  for (int q = 0; q < j->nproc && missing; q++)
    if (j->joined_by[q] < 0) missing[m++] = q;
  put_ids(ids, sizeof ids, missing, m);
  free(missing);
  int came = j->came;
  for (int i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    if (c->job != j || !c->parked || c->op != KV_JOIN) continue;
    char text[1024];
    snprintf(text, sizeof text, "%s did not arrive within %g s (%d of %d came)", ids, c->timeout_s,
             came, j->nproc);
    answer_text(s, c, 1, text);
    unpark(c);
  }
}

/* ---- requests ---- */

static int all_set(job *j, char **keys, int n) {
  for (int i = 0; i < n; i++)
    if (!find(j, keys[i]) || !find(j, keys[i])->value) return 0;
  return 1;
}

/* answers c's parked get or wait if its keys are set now: 1 when it did */
static int try_parked(jx_kv_server *s, conn *c) {
  if (!all_set(c->job, c->keys, c->nkeys)) return 0;
  if (c->op == KV_GET) {
    entry *e = find(c->job, c->keys[0]);
    answer(s, c, 0, e->value, e->len);
  } else {
    answer(s, c, 0, NULL, 0);
  }
  unpark(c);
  return 1;
}

static void wake_waiters(jx_kv_server *s, job *j) {
  for (int i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    if (c->job == j && c->parked && c->op != KV_JOIN) try_parked(s, c);
  }
}

static void expired(jx_kv_server *s, conn *c) {
  if (c->op == KV_JOIN) {
    join_expired(s, c->job);
    return;
  }
  char text[1024] = "";
  int listed = 0;
  for (int i = 0; i < c->nkeys; i++)
    if (!find(c->job, c->keys[i]) || !find(c->job, c->keys[i])->value)
      jx_str_append(text, sizeof text, "%s'%s'", listed++ ? ", " : "", c->keys[i]);
  jx_str_append(text, sizeof text, " %s not set within %g s", listed == 1 ? "was" : "were",
                c->timeout_s);
  answer_text(s, c, 1, text);
  unpark(c);
}

static char *dup_field(const char *p, size_t n) {
  char *x = malloc(n + 1);
  if (x) memcpy(x, p, n), x[n] = 0;
  return x;
}

static void handle(jx_kv_server *s, conn *c, const char *body, size_t len) {
  kv_reader r = {body + 1, len - 1, 0, 0};
  uint8_t op = (uint8_t)body[0];
  size_t n = 0;
  if (op == KV_HELLO) {
    const char *t = kv_get_bytes(&r, &n);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->njobs && t && !c->job; i++)
      if (strlen(s->jobs[i]->token) == n && !memcmp(s->jobs[i]->token, t, n)) c->job = s->jobs[i];
    pthread_mutex_unlock(&s->mu);
    if (c->job)
      answer(s, c, 0, NULL, 0);
    else
      answer_text(s, c, 1,
                  "it serves no job with this process's token (JX_JOB_TOKEN): the process "
                  "belongs to another job");
    return;
  }
  if (!c->job) {
    answer_text(s, c, 1, "a request before the job's token");
    return;
  }
  job *j = c->job;
  const char *k = kv_get_bytes(&r, &n);
  char *key = k ? dup_field(k, n) : NULL;
  switch (op) {
  case KV_SET: {
    const char *v = kv_get_bytes(&r, &n);
    entry *e = !r.bad && key ? find_or_make(j, key) : NULL;
    if (!e || put_value(e, v, n)) {
      answer_text(s, c, 1, r.bad ? "a malformed set" : "the coordinator is out of memory");
      break;
    }
    answer(s, c, 0, NULL, 0);
    wake_waiters(s, j);
    break;
  }
  case KV_ADD: {
    int64_t delta = kv_get_i64(&r), v = 0;
    entry *e = !r.bad && key ? find_or_make(j, key) : NULL;
    char text[32];
    if (e && e->value) v = strtoll(e->value, NULL, 10);
    v = (int64_t)((uint64_t)v + (uint64_t)delta);
    snprintf(text, sizeof text, "%" PRId64, v);
    if (!e || put_value(e, text, strlen(text))) {
      answer_text(s, c, 1, r.bad ? "a malformed add" : "the coordinator is out of memory");
      break;
    }
    answer(s, c, 0, &v, sizeof v);
    wake_waiters(s, j);
    break;
  }
  case KV_GET:
  case KV_WAIT: {
    int count = 1;
    if (op == KV_WAIT) { /* the field read as the key is the count */
      count = key ? atoi(key) : -1;
      free(key);
      key = NULL;
    }
    char **keys = count >= 0 ? calloc((size_t)count + 1, sizeof *keys) : NULL;
    int ok = keys != NULL;
    if (op == KV_GET && keys) keys[0] = key, key = NULL;
    for (int i = 0; op == KV_WAIT && ok && i < count; i++) {
      const char *x = kv_get_bytes(&r, &n);
      ok = x && (keys[i] = dup_field(x, n)) != NULL;
    }
    int64_t ms = kv_get_i64(&r);
    c->op = op, c->keys = keys, c->nkeys = keys ? count : 0, c->parked = 1;
    if (!ok || r.bad) {
      answer_text(s, c, 1, "a malformed get or wait, or the coordinator is out of memory");
      unpark(c);
      break;
    }
    c->timeout_s = (double)ms / 1000, c->deadline = jx_tcp_now() + c->timeout_s;
    try_parked(s, c);
    break;
  }
  case KV_JOIN: {
    /* the key field carries the id */
    int id = key ? atoi(key) : -1;
    int64_t nproc = kv_get_i64(&r);
    const char *h = kv_get_bytes(&r, &n);
    char host[HOST_CAP];
    snprintf(host, sizeof host, "%.*s", h ? (int)(n < HOST_CAP ? n : HOST_CAP - 1) : 0, h ? h : "");
    int64_t ms = kv_get_i64(&r);
    if (r.bad)
      answer_text(s, c, 1, "a malformed join");
    else
      join(s, c, id, (int)nproc, host, (double)ms / 1000);
    break;
  }
  default: answer_text(s, c, 1, "an unknown request");
  }
  free(key);
}

/* ---- connections ---- */

static void drop(jx_kv_server *s, int i) {
  conn *c = s->conns[i];
  job *j = c->job;
  if (j && c->joined_as >= 0) { /* its process ended (or left the job): say so */
    __atomic_sub_fetch(&s->joined_open, 1, __ATOMIC_RELAXED);
    char key[32];
    snprintf(key, sizeof key, "closed/%d", c->joined_as);
    entry *e = find_or_make(j, key);
    if (e && !put_value(e, "", 0)) wake_waiters(s, j);
  }
  /* a process that leaves before the job started is missing again */
  if (j && !j->complete && c->parked && c->op == KV_JOIN && j->joined_by[c->join_id] == c->fd) {
    j->joined_by[c->join_id] = -1;
    j->came--;
  }
  unpark(c);
  close(c->fd);
  free(c->in);
  free(c);
  s->conns[i] = s->conns[--s->nconns];
}

/* reads what arrived on connection i and handles its whole messages: 0, or
 * 1 when it closed (dropped) */
static int serve(jx_kv_server *s, int i) {
  conn *c = s->conns[i];
  for (;;) {
    if (c->in_cap - c->in_len < 4096) {
      size_t cap = c->in_cap ? 2 * c->in_cap : 8192;
      char *p = realloc(c->in, cap);
      if (!p) break;
      c->in = p, c->in_cap = cap;
    }
    ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (r > 0) {
      c->in_len += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    drop(s, i);
    return 1;
  }
  size_t at = 0;
  while (!c->parked && c->in_len - at >= 4) {
    uint32_t len;
    memcpy(&len, c->in + at, sizeof len);
    if (len < 1 || len > KV_MAX_MESSAGE) {
      drop(s, i);
      return 1;
    }
    if (c->in_len - at - 4 < len) break;
    handle(s, c, c->in + at + 4, len);
    at += 4 + len;
  }
  memmove(c->in, c->in + at, c->in_len - at);
  c->in_len -= at;
  return 0;
}

static void *server_main(void *arg) {
  jx_kv_server *s = arg;
  struct pollfd *pf = NULL;
  int pf_cap = 0;
  for (;;) {
    if (pf_cap < s->nconns + 2) {
      pf_cap = 2 * (s->nconns + 2);
      struct pollfd *p = realloc(pf, sizeof *pf * (size_t)pf_cap);
      if (!p) break;
      pf = p;
    }
    pf[0] = (struct pollfd){s->wake[0], POLLIN, 0};
    pf[1] = (struct pollfd){s->lfd, POLLIN, 0};
    double now = jx_tcp_now(), next = now + 3600;
    for (int i = 0; i < s->nconns; i++) {
      conn *c = s->conns[i];
      pf[i + 2] = (struct pollfd){c->fd, POLLIN, 0};
      if (c->parked && c->deadline < next) next = c->deadline;
    }
    int n = s->nconns, ms = next <= now ? 0 : (int)((next - now) * 1000) + 1;
    if (poll(pf, (nfds_t)n + 2, ms) < 0 && errno != EINTR) break;
    if (pf[0].revents) break;
    for (int i = n - 1; i >= 0; i--) /* backwards: drop moves the last one into i */
      if (pf[i + 2].revents) serve(s, i);
    now = jx_tcp_now();
    for (int i = 0; i < s->nconns; i++)
      if (s->conns[i]->parked && s->conns[i]->deadline <= now) expired(s, s->conns[i]);
    if (pf[1].revents & POLLIN)
      for (int fd; (fd = jx_tcp_accept(s->lfd, 0)) >= 0;) {
        conn *c = calloc(1, sizeof *c);
        conn **cs = c ? realloc(s->conns, sizeof *cs * (size_t)(s->nconns + 1)) : NULL;
        if (!cs) {
          free(c);
          close(fd);
          continue;
        }
        s->conns = cs;
        c->fd = fd;
        c->joined_as = -1;
        s->conns[s->nconns++] = c;
      }
  }
  free(pf);
  return NULL;
}

jx_kv_server *jx_kv_server_start(int port, const char *token, int nproc, int *bound_port, char *msg,
                                 size_t cap) {
  jx_kv_server *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(msg, cap, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&s->mu, NULL);
  if (jx_kv_server_add_job(s, token, nproc, msg, cap)) {
    pthread_mutex_destroy(&s->mu);
    free(s);
    return NULL;
  }
  s->wake[0] = s->wake[1] = -1;
  s->lfd = jx_tcp_listen(port, bound_port, msg, cap);
  if (s->lfd < 0 || pipe2(s->wake, O_CLOEXEC)) {
    if (s->lfd >= 0) snprintf(msg, cap, "pipe: %s", strerror(errno));
    jx_kv_server_stop(s);
    return NULL;
  }
  if (pthread_create(&s->thread, NULL, server_main, s)) {
    snprintf(msg, cap, "cannot start the coordinator's thread");
    jx_kv_server_stop(s);
    return NULL;
  }
  s->running = 1;
  return s;
}

int jx_kv_server_add_job(jx_kv_server *s, const char *token, int nproc, char *msg, size_t cap) {
  job *j = calloc(1, sizeof *j);
  if (j) {
    j->token = strdup(token);
    j->nproc = nproc;
    j->joined_by = malloc(sizeof *j->joined_by * (size_t)nproc);
    j->joined_host = calloc((size_t)nproc, sizeof *j->joined_host);
  }
  if (!j || !j->token || !j->joined_by || !j->joined_host) {
    if (j) free_job(j);
    snprintf(msg, cap, "out of memory");
    return 1;
  }
  for (int q = 0; q < nproc; q++) j->joined_by[q] = -1;
  pthread_mutex_lock(&s->mu);
  int taken = 0;
  for (int i = 0; i < s->njobs; i++) taken |= !strcmp(s->jobs[i]->token, token);
  job **js = taken ? NULL : realloc(s->jobs, sizeof *js * (size_t)(s->njobs + 1));
  if (js) s->jobs = js, s->jobs[s->njobs++] = j;
  pthread_mutex_unlock(&s->mu);
  if (!js) {
    free_job(j);
    snprintf(msg, cap,
             taken ? "the coordinator already serves a job with this token" : "out of memory");
    return 1;
  }
  return 0;
}

int jx_kv_server_processes(jx_kv_server *s) {
  return __atomic_load_n(&s->joined_open, __ATOMIC_RELAXED);
}

void jx_kv_server_stop(jx_kv_server *s) {
  if (!s) return;
  char b = 1;
  if (s->running && write(s->wake[1], &b, 1) == 1) pthread_join(s->thread, NULL);
  while (s->nconns) drop(s, s->nconns - 1);
  for (int i = 0; i < s->njobs; i++) free_job(s->jobs[i]);
  free(s->jobs), free(s->conns), free(s->out.p);
  for (int i = 0; i < 2; i++)
    if (s->wake[i] >= 0) close(s->wake[i]);
  if (s->lfd >= 0) close(s->lfd);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
