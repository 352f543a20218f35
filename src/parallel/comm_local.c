/* The `local` collectives engine: the ranks are threads of this process and
 * exchange data through shared memory.
 *
 * A round (one collective) is: every rank publishes a descriptor of its call
 * (operation, count, dtype, buffer pointers) and waits for the others until
 * its deadline (the arrival barrier); the last rank to arrive checks that the
 * descriptors agree. Then each rank moves its share of the data directly
 * between the peers' buffers and waits at a closing barrier, after which no
 * rank touches another rank's buffers, so each may return. Barriers count
 * generations: a rank that races ahead into the next round arrives at the
 * next generation and cannot disturb the current one, and the published
 * descriptors stay valid until the closing barrier.
 *
 * all_reduce on large buffers is reduce-scatter + all-gather in one pass:
 * rank r reduces slice r of the count elements across all send buffers (in
 * L1-sized chunks) and writes the result into slice r of every rank's recv
 * buffer. Each element is read n times and written n times in all, with no
 * intermediate copies. Small buffers skip the slicing: each rank reduces the
 * whole buffer into a local accumulator, then (after a barrier that ends all
 * reading of send buffers, as send may be recv) copies it out.
 *
 * Failures break the communicator: once a round has failed, the ranks can no
 * longer agree on which round is which, so every later call fails at once with
 * the reason. Blocking waits are condition variables on CLOCK_MONOTONIC. */
#include "comm.h"

#include "../array/dtype.h"
#include "../base/env.h"
#include "../base/str_append.h"
#include "../base/error.h"
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MSG = 1024 };
/* Per-rank buffers at least this large are written around the cache: n ranks'
 * buffers together outgrow any last-level cache well before. */
#define STREAM_BYTES ((size_t)4 << 20)

typedef enum {
  K_ALL_REDUCE,
  K_REDUCE_SCATTER,
  K_ALL_GATHER,
  K_ALL_TO_ALL,
  K_PERMUTE,
  K_BROADCAST,
  K_BARRIER
} kind;
static const char *const kind_names[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                                         "permute",    "broadcast",      "barrier"};

/* One rank's call, as published to its peers. */
typedef struct {
  kind k;
  jx_dtype dt;
  jx_reduce_op op;
  size_t count;
  int root, dst, src;
  const char *send;
  char *recv;
} desc;

/* A deadline that wait() may set later for a request already running. */
typedef struct {
  int set;
  struct timespec at;
  double timeout_s; /* for the message */
} deadline;

struct engine_queue;
struct jx_comm_request;
static void engine_wait(struct jx_comm_request *r);

struct jx_comm_request {
  jx_comm *c;
  struct engine_queue *eq; /* another engine's request: the device's queue; NULL: c's */
  int rank;
  desc d;
  deadline dl; /* under c->mu */
  int done;    /* under c->mu */
  jx_status st;
  char msg[MSG];
  jx_comm_request *next;
};

/* A rank's asynchronous requests, run in order by a helper thread. */
typedef struct {
  jx_comm *c;
  int rank;
  pthread_t thread;
  int started;
  pthread_cond_t cv; /* a request was queued or finished */
  jx_comm_request *head, *tail, *running;
  int pending; /* queued + running */
} rank_queue;

struct jx_comm {
  int n;
  atomic_int refs;
  char *label;
  int *dev;
  const char **ptrs; /* per rank: 2n pointers of scratch for the reductions */
  pthread_mutex_t mu;
  pthread_cond_t cv; /* a barrier completed, a deadline changed, the comm broke */
  /* barrier state, under mu */
  uint64_t gen;      /* the open barrier's generation */
  int narrived;      /* ranks arrived at it */
  uint64_t *arrived; /* arrived[r] == gen + 1: rank r has arrived */
  desc *slot;        /* slot[r]: rank r's call in the current round */
  int broken;        /* under mu */
  uint64_t broken_gen;
  jx_status broken_code;
  char reason[MSG];
  int shutdown;
  rank_queue *q;
  jx_comm_engine engine; /* engine.run set: another engine runs the collectives */
};

/* ---- creation and lifetime ---- */

static int cond_init(pthread_cond_t *cv) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(cv, &a);
  pthread_condattr_destroy(&a);
  return rc;
}

static void destroy(jx_comm *c) {
  if (c->engine.destroy) c->engine.destroy(c->engine.self);
  pthread_mutex_lock(&c->mu);
  c->shutdown = 1;
  pthread_cond_broadcast(&c->cv);
  for (int r = 0; r < c->n; r++) pthread_cond_broadcast(&c->q[r].cv);
  pthread_mutex_unlock(&c->mu);
  for (int r = 0; r < c->n; r++) {
    if (c->q[r].started) pthread_join(c->q[r].thread, NULL);
    pthread_cond_destroy(&c->q[r].cv);
  }
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c->q);
  free(c->slot);
  free(c->arrived);
  free(c->ptrs);
  free(c->dev);
  free(c->label);
  free(c);
}

jx_comm *jx_comm_local_create(int n, const char *label, const int *device_ids) {
  if (n < 1 || n > (1 << 20)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_comm_local_create: %d ranks; a communicator has 1 to 2^20 ranks", n);
    return NULL;
  }
  jx_comm *c = calloc(1, sizeof *c);
  if (!c) goto oom;
  c->n = n;
  atomic_init(&c->refs, 1);
  c->label = strdup(label ? label : "local communicator");
  c->dev = malloc((size_t)n * sizeof *c->dev);
  c->ptrs = malloc((size_t)n * 2 * (size_t)n * sizeof *c->ptrs);
  c->arrived = calloc((size_t)n, sizeof *c->arrived);
  c->slot = calloc((size_t)n, sizeof *c->slot);
  c->q = calloc((size_t)n, sizeof *c->q);
  if (!c->label || !c->dev || !c->ptrs || !c->arrived || !c->slot || !c->q) {
    free(c->q);
    free(c->slot);
    free(c->arrived);
    free(c->ptrs);
    free(c->dev);
    free(c->label);
    free(c);
    goto oom;
  }
  for (int r = 0; r < n; r++) {
    c->dev[r] = device_ids ? device_ids[r] : r;
    c->q[r].c = c;
    c->q[r].rank = r;
    cond_init(&c->q[r].cv);
  }
  pthread_mutex_init(&c->mu, NULL);
  cond_init(&c->cv);
  return c;
oom:
  jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_comm_local_create: out of memory for %d ranks", n);
  return NULL;
}

jx_comm *jx_comm_engine_create(int n, const char *label, const int *device_ids, jx_comm_engine e) {
  jx_comm *c = jx_comm_local_create(n, label, device_ids);
  if (c)
    c->engine = e;
  else if (e.destroy)
    e.destroy(e.self);
  return c;
}

jx_comm *jx_comm_retain(jx_comm *c) {
  if (c) atomic_fetch_add(&c->refs, 1);
  return c;
}

void jx_comm_release(jx_comm *c) {
  if (c && atomic_fetch_sub(&c->refs, 1) == 1) destroy(c);
}

int jx_comm_runs_ahead(const jx_comm *c) { return c != NULL; }

int jx_comm_size(const jx_comm *c) { return c ? c->n : 0; }
const char *jx_comm_label(const jx_comm *c) { return c ? c->label : ""; }

double jx_comm_default_timeout(void) {
  const char *s = jx_env_string("JX_COLLECTIVE_TIMEOUT");
  if (s && *s) {
    char *end;
    double v = strtod(s, &end);
    if (end != s && v > 0 && isfinite(v)) return v;
  }
  return 300;
}

static deadline make_deadline(double timeout_s) {
  deadline d = {1, {0, 0}, timeout_s > 0 ? timeout_s : jx_comm_default_timeout()};
  double t = d.timeout_s > 1e9 ? 1e9 : d.timeout_s; /* keeps tv_sec in range */
  clock_gettime(CLOCK_MONOTONIC, &d.at);
  double whole = floor(t);
  d.at.tv_sec += (time_t)whole;
  d.at.tv_nsec += (long)((t - whole) * 1e9);
  if (d.at.tv_nsec >= 1000000000L) {
    d.at.tv_sec++;
    d.at.tv_nsec -= 1000000000L;
  }
  return d;
}

/* ---- messages ---- */

/* "all_reduce on mesh axis 'data' (4 ranks)" */
static void prefix(const jx_comm *c, kind k, char *buf, size_t size) {
  snprintf(buf, size, "%s on %s (%d rank%s)", kind_names[k], c->label, c->n, c->n == 1 ? "" : "s");
}

static void describe(const desc *d, char *buf, size_t size) {
  int w = snprintf(buf, size, "%s(count=%zu, %s", kind_names[d->k], d->count, jx_dtype_name(d->dt));
  if (w < 0 || (size_t)w >= size) return;
  if (d->k == K_ALL_REDUCE || d->k == K_REDUCE_SCATTER)
    snprintf(buf + w, size - (size_t)w, ", %s)", jx_reduce_op_name(d->op));
  else if (d->k == K_BROADCAST)
    snprintf(buf + w, size - (size_t)w, ", root=%d)", d->root);
  else if (d->k == K_PERMUTE)
    snprintf(buf + w, size - (size_t)w, ", dst=%d, src=%d)", d->dst, d->src);
  else
    snprintf(buf + w, size - (size_t)w, ")");
}

/* Marks c broken (the first reason is kept) and wakes every waiter. Under mu. */
static void break_locked(jx_comm *c, jx_status code, const char *reason) {
  if (!c->broken) {
    c->broken = 1;
    c->broken_gen = c->gen;
    c->broken_code = code;
    snprintf(c->reason, sizeof c->reason, "%s", reason);
  }
  pthread_cond_broadcast(&c->cv);
}

/* ---- agreement: the last rank to arrive checks every rank's call ---- */

static int reduces(kind k) { return k == K_ALL_REDUCE || k == K_REDUCE_SCATTER; }

/* 0 when the ranks' calls fit together; else 1 and the reason in why */
static int check_round(const jx_comm *c, char *why, size_t size) {
  const desc *a = &c->slot[0];
  char pre[MSG / 4], da[MSG / 4], db[MSG / 4];
  prefix(c, a->k, pre, sizeof pre);
  for (int q = 1; q < c->n; q++) {
    const desc *b = &c->slot[q];
    if (b->k != a->k || b->count != a->count || b->dt != a->dt ||
        (reduces(a->k) && b->op != a->op) || (a->k == K_BROADCAST && b->root != a->root)) {
      describe(a, da, sizeof da);
      describe(b, db, sizeof db);
      snprintf(why, size,
               "%s: the ranks called different operations: rank 0 (device %d) called %s "
               "but rank %d (device %d) called %s",
               pre, c->dev[0], da, q, c->dev[q], db);
      return 1;
    }
  }
  if (a->k != K_PERMUTE) return 0;
  for (int r = 0; r < c->n; r++) {
    int d = c->slot[r].dst, s = c->slot[r].src;
    for (int o = 0; o < r && d >= 0; o++)
      if (c->slot[o].dst == d) {
        snprintf(why, size, "%s: ranks %d and %d (devices %d and %d) both send to rank %d", pre, o,
                 r, c->dev[o], c->dev[r], d);
        return 1;
      }
    if (d >= 0 && c->slot[d].src != r) {
      snprintf(why, size, "%s: rank %d (device %d) sends to rank %d, but rank %d receives from %d",
               pre, r, c->dev[r], d, d, c->slot[d].src);
      return 1;
    }
    if (s >= 0 && c->slot[s].dst != r) {
      snprintf(why, size, "%s: rank %d (device %d) receives from rank %d, but rank %d sends to %d",
               pre, r, c->dev[r], s, s, c->slot[s].dst);
      return 1;
    }
  }
  return 0;
}

/* "devices 2, 3 did not arrive within 0.5 s" for barrier generation g. Under mu. */
static void timeout_reason(const jx_comm *c, uint64_t g, const char *pre, double timeout_s,
                           char *why, size_t size) {
  int missing = 0;
  for (int q = 0; q < c->n; q++) missing += c->arrived[q] != g + 1;
  snprintf(why, size, "%s: %s ", pre, missing == 1 ? "device" : "devices");
  int listed = 0;
  for (int q = 0; q < c->n && listed < 32; q++)
    if (c->arrived[q] != g + 1) jx_str_append(why, size, "%s%d", listed++ ? ", " : "", c->dev[q]);
  if (listed < missing) jx_str_append(why, size, ", ... (%d in all)", missing);
  jx_str_append(why, size, " did not arrive within %g s", timeout_s);
}

/* ---- barriers ---- */

/* The arrival barrier of a round: publishes d and waits for every rank until dl
 * (which may change while waiting; it is read under mu). */
static jx_status arrive(jx_comm *c, int rank, const desc *d, const deadline *dl, char *msg) {
  char pre[MSG / 4], why[MSG];
  prefix(c, d->k, pre, sizeof pre);
  pthread_mutex_lock(&c->mu);
  if (c->broken || c->shutdown) {
    jx_status st = c->broken ? c->broken_code : JX_ERR_INVALID_ARGUMENT;
    snprintf(msg, MSG, "%s: the communicator is unusable after an earlier failure: %.600s", pre,
             c->broken ? c->reason : "it was released");
    pthread_mutex_unlock(&c->mu);
    return st;
  }
  uint64_t g = c->gen;
  if (c->arrived[rank] == g + 1) {
    snprintf(why, sizeof why,
             "%s: rank %d (device %d) arrived twice in one round (two threads "
             "acting as the same rank?)",
             pre, rank, c->dev[rank]);
    break_locked(c, JX_ERR_INVALID_ARGUMENT, why);
  } else {
    c->arrived[rank] = g + 1;
    c->slot[rank] = *d;
    if (++c->narrived == c->n) {
      c->narrived = 0;
      if (check_round(c, why, sizeof why)) break_locked(c, JX_ERR_INVALID_ARGUMENT, why);
      c->gen = g + 1;
      pthread_cond_broadcast(&c->cv);
    }
    while (c->gen == g && !c->broken && !c->shutdown) {
      int rc = dl->set ? pthread_cond_timedwait(&c->cv, &c->mu, &dl->at)
                       : pthread_cond_wait(&c->cv, &c->mu);
      if (rc == ETIMEDOUT && c->gen == g && !c->broken) {
        timeout_reason(c, g, pre, dl->timeout_s, why, sizeof why);
        break_locked(c, JX_ERR_TIMEOUT, why);
      }
    }
  }
  jx_status st = JX_OK;
  if (c->broken && c->broken_gen == g) {
    st = c->broken_code;
    snprintf(msg, MSG, "%s", c->reason);
  } else if (c->gen == g) { /* released while waiting */
    st = JX_ERR_INVALID_ARGUMENT;
    snprintf(msg, MSG, "%s: the communicator was released while rank %d waited", pre, rank);
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

/* A barrier inside a round, after every rank has arrived: no deadline (the
 * peers are busy with bounded copying), and no early exit on a broken
 * communicator, since a rank that left early could free a buffer a peer still
 * reads. */
static void rejoin(jx_comm *c, int rank) {
  pthread_mutex_lock(&c->mu);
  uint64_t g = c->gen;
  c->arrived[rank] = g + 1;
  if (++c->narrived == c->n) {
    c->narrived = 0;
    c->gen = g + 1;
    pthread_cond_broadcast(&c->cv);
  }
  while (c->gen == g && !c->shutdown) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
}

/* ---- the data movement of one round ---- */

static jx_status run(jx_comm *c, int rank, const desc *d, const deadline *dl, char *msg) {
  jx_status st = arrive(c, rank, d, dl, msg);
  if (st || d->k == K_BARRIER || d->count == 0) return st;
  const int n = c->n;
  const size_t es = jx_dtype_size(d->dt), cnt = d->count, bytes = cnt * es;
  const desc *s = c->slot; /* stable until the closing barrier */
  const char **srcs = c->ptrs + (size_t)rank * 2 * (size_t)n;
  char **dsts = (char **)(srcs + n);
  const int stream = bytes >= STREAM_BYTES;
  switch (d->k) {
  case K_ALL_REDUCE:
    if (cnt <= JX_COMM_CHUNK) {
      double acc[JX_COMM_CHUNK]; /* any dtype; double for alignment */
      char *out = (char *)acc;
      for (int q = 0; q < n; q++) srcs[q] = s[q].send;
      jx_comm_reduce_range(d->dt, d->op, srcs, n, &out, 1, cnt, 0);
      rejoin(c, rank); /* every rank has read every send buffer: recv may be written */
      jx_comm_copy(d->recv, acc, bytes, 0);
      return JX_OK;
    } else {
      /* slices of whole 64-byte lines, so no two ranks write the same line */
      size_t unit = es < 64 ? 64 / es : 1, units = (cnt + unit - 1) / unit;
      size_t lo = (size_t)rank * units / (size_t)n * unit,
             hi = ((size_t)rank + 1) * units / (size_t)n * unit;
      if (hi > cnt) hi = cnt;
      if (lo < hi) {
        for (int q = 0; q < n; q++) {
          srcs[q] = s[q].send + lo * es;
          dsts[q] = s[q].recv + lo * es;
        }
        jx_comm_reduce_range(d->dt, d->op, srcs, n, dsts, n, hi - lo, stream);
      }
    }
    break;
  case K_REDUCE_SCATTER:
    for (int q = 0; q < n; q++) srcs[q] = s[q].send + (size_t)rank * bytes;
    dsts[0] = d->recv;
    jx_comm_reduce_range(d->dt, d->op, srcs, n, dsts, 1, cnt, stream);
    break;
  case K_ALL_GATHER:
    for (int i = 0; i < n; i++) { /* start at a different peer on each rank */
      int q = (rank + i) % n;
      jx_comm_copy(d->recv + (size_t)q * bytes, s[q].send, bytes, stream);
    }
    break;
  case K_ALL_TO_ALL:
    for (int i = 0; i < n; i++) {
      int q = (rank + i) % n;
      jx_comm_copy(d->recv + (size_t)q * bytes, s[q].send + (size_t)rank * bytes, bytes, stream);
    }
    break;
  case K_PERMUTE:
    if (d->src >= 0)
      jx_comm_copy(d->recv, s[d->src].send, bytes, stream);
    else
      memset(d->recv, 0, bytes);
    break;
  case K_BROADCAST:
    if (rank != d->root) jx_comm_copy(d->recv, s[d->root].send, bytes, stream);
    break;
  case K_BARRIER: break;
  }
  rejoin(c, rank); /* no peer reads or writes this rank's buffers any more */
  return JX_OK;
}

/* ---- argument checks: a bad call breaks the communicator, so its peers fail at
 * once instead of at their deadline ---- */

static jx_status check_call(jx_comm *c, int rank, const desc *d, char *msg) {
  if (!c) {
    snprintf(msg, MSG, "jx_comm_%s: the communicator is NULL", kind_names[d->k]);
    return JX_ERR_INVALID_ARGUMENT;
  }
  char pre[MSG / 4];
  jx_status st = JX_ERR_INVALID_ARGUMENT;
  if (rank < 0 || rank >= c->n) {
    prefix(c, d->k, pre, sizeof pre);
    snprintf(msg, MSG, "%s: rank %d is out of range [0, %d)", pre, rank, c->n);
    goto bad;
  }
  size_t es = jx_dtype_valid(d->dt) ? jx_dtype_size(d->dt) : 1;
  size_t blocks =
      (d->k == K_REDUCE_SCATTER || d->k == K_ALL_GATHER || d->k == K_ALL_TO_ALL) ? (size_t)c->n : 1;
  /* which check fails (0: none); the message is written only then, as it costs more
   * than a small collective */
  int why = !jx_dtype_valid(d->dt)                                    ? 1
            : reduces(d->k) && (unsigned)d->op > JX_REDUCE_MIN        ? 2
            : d->count > SIZE_MAX / 2 / es / blocks                   ? 3
            : d->k == K_BROADCAST && (d->root < 0 || d->root >= c->n) ? 4
            : d->k == K_PERMUTE && (d->dst < -1 || d->dst >= c->n || d->src < -1 || d->src >= c->n)
                ? 5
            : d->k != K_BARRIER && d->count > 0 &&
                    (!d->recv || (!d->send && (d->k != K_PERMUTE || d->dst >= 0)))
                ? 6
                : 0;
  if (!why) return JX_OK;
  prefix(c, d->k, pre, sizeof pre);
  snprintf(msg, MSG, "%s: rank %d (device %d) ", pre, rank, c->dev[rank]);
  switch (why) {
  case 1:
    jx_str_append(msg, MSG, "passed an invalid dtype %d", (int)d->dt);
    st = JX_ERR_DTYPE;
    break;
  case 2: jx_str_append(msg, MSG, "passed an invalid reduction op %d", (int)d->op); break;
  case 3: jx_str_append(msg, MSG, "passed count %zu, too large for memory", d->count); break;
  case 4: jx_str_append(msg, MSG, "passed root %d, out of range [0, %d)", d->root, c->n); break;
  case 5:
    jx_str_append(msg, MSG, "passed dst %d, src %d; each must be -1 or in [0, %d)", d->dst, d->src,
                  c->n);
    break;
  default: jx_str_append(msg, MSG, "passed a NULL buffer with count %zu", d->count); break;
  }
bad:
  pthread_mutex_lock(&c->mu);
  break_locked(c, st, msg);
  pthread_mutex_unlock(&c->mu);
  return st;
}

/* ---- asynchronous requests ---- */

/* Another engine's collective, on the calling thread (timeout_s <= 0: the engine's default). */
static jx_status run_engine(jx_comm *c, int rank, const desc *d, double timeout_s, char *msg) {
  jx_comm_op op = {
      (jx_comm_kind)d->k, d->dt, d->op, d->count, d->root, d->dst, d->src, d->send, d->recv};
  msg[0] = 0;
  return c->engine.run(c->engine.self, rank, &op, timeout_s, msg, MSG); /* <= 0: its default */
}

static void *rank_worker(void *arg) {
  rank_queue *q = arg;
  jx_comm *c = q->c;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!q->head && !c->shutdown) pthread_cond_wait(&q->cv, &c->mu);
    if (!q->head) break;
    jx_comm_request *r = q->head;
    q->head = r->next;
    if (!q->head) q->tail = NULL;
    q->running = r;
    pthread_mutex_unlock(&c->mu);
    jx_status st = run(c, q->rank, &r->d, &r->dl, r->msg);
    pthread_mutex_lock(&c->mu);
    r->st = st;
    r->done = 1;
    q->running = NULL;
    q->pending--;
    pthread_cond_broadcast(&q->cv);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* Puts r at the end of a queue (under the queue's mutex). */
static void append(jx_comm_request **head, jx_comm_request **tail, int *pending,
                   jx_comm_request *r) {
  if (*tail)
    (*tail)->next = r;
  else
    *head = r;
  *tail = r;
  (*pending)++;
}

/* A request for call d of rank, holding a reference to c; NULL with the
 * reason in msg when out of memory. */
static jx_comm_request *new_request(jx_comm *c, int rank, const desc *d, char *msg) {
  jx_comm_request *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(msg, MSG, "jx_comm_start_%s: out of memory", kind_names[d->k]);
    return NULL;
  }
  r->c = jx_comm_retain(c);
  r->rank = rank;
  r->d = *d;
  return r;
}

/* Queues d on rank's helper thread; NULL with the reason in msg on failure. */
static jx_comm_request *enqueue(jx_comm *c, int rank, const desc *d, char *msg) {
  jx_comm_request *r = new_request(c, rank, d, msg);
  if (!r) return NULL;
  rank_queue *q = &c->q[rank];
  pthread_mutex_lock(&c->mu);
  if (!q->started) {
    if (pthread_create(&q->thread, NULL, rank_worker, q) != 0) {
      pthread_mutex_unlock(&c->mu);
      snprintf(msg, MSG, "jx_comm_start_%s: cannot start a thread for rank %d", kind_names[d->k],
               rank);
      jx_comm_release(c);
      free(r);
      return NULL;
    }
    q->started = 1;
  }
  append(&q->head, &q->tail, &q->pending, r);
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&c->mu);
  return r;
}

static void tighten(deadline *x, const deadline *d) {
  if (!x->set || x->at.tv_sec > d->at.tv_sec ||
      (x->at.tv_sec == d->at.tv_sec && x->at.tv_nsec > d->at.tv_nsec))
    *x = *d;
}

jx_status jx_comm_wait(jx_comm_request *r, double timeout_s) {
  if (!r)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_comm_wait: the request is NULL (its start "
                                                 "failed; the starting thread has the error)");
  jx_comm *c = r->c;
  if (r->eq) {
    engine_wait(r);
    jx_status st = r->st;
    if (st) jx_error_set(st, "%s", r->msg);
    jx_comm_release(c);
    free(r);
    return st;
  }
  rank_queue *q = &c->q[r->rank];
  pthread_mutex_lock(&c->mu);
  if (!r->done) {
    /* the deadline also covers the earlier requests r runs after */
    deadline dl = make_deadline(timeout_s);
    if (q->running) tighten(&q->running->dl, &dl);
    for (jx_comm_request *x = q->head; x; x = x->next) {
      tighten(&x->dl, &dl);
      if (x == r) break;
    }
    pthread_cond_broadcast(&c->cv);
    while (!r->done) pthread_cond_wait(&q->cv, &c->mu);
  }
  pthread_mutex_unlock(&c->mu);
  jx_status st = r->st;
  if (st) jx_error_set(st, "%s", r->msg);
  jx_comm_release(c);
  free(r);
  return st;
}

/* ---- other engines' requests: one queue per device ----
 * Collectives over MPI must be issued in one order on every process. Each
 * device starts its collectives in program order, and all of a device's
 * requests to other engines, whatever their communicator, run in that order
 * on one helper thread of the device; so the leaders (comm_hier.c) issue
 * their MPI calls in program order too. Per-communicator threads would not:
 * two communicators over the same devices share one MPI communicator. */
typedef struct engine_queue {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* a request was queued or finished */
  pthread_t thread;
  int started;
  jx_comm_request *head, *tail;
  int pending; /* queued + running */
} engine_queue;

enum { MAX_ENGINE_DEVICES = 1 << 16 };
static engine_queue *engine_queues[MAX_ENGINE_DEVICES];
static pthread_mutex_t engine_queues_mu = PTHREAD_MUTEX_INITIALIZER;

/* The queue of global device dev, made on first use; NULL when out of memory. */
static engine_queue *device_queue(int dev) {
  if (dev < 0 || dev >= MAX_ENGINE_DEVICES) return NULL;
  pthread_mutex_lock(&engine_queues_mu);
  engine_queue *q = engine_queues[dev];
  if (!q && (q = calloc(1, sizeof *q))) {
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    __atomic_store_n(&engine_queues[dev], q, __ATOMIC_RELEASE); /* see engine_pending */
  }
  pthread_mutex_unlock(&engine_queues_mu);
  return q;
}

static void *engine_worker(void *arg) {
  engine_queue *q = arg;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->head) pthread_cond_wait(&q->cv, &q->mu);
    jx_comm_request *r = q->head;
    q->head = r->next;
    if (!q->head) q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    jx_status st = run_engine(r->c, r->rank, &r->d, 0, r->msg);
    pthread_mutex_lock(&q->mu);
    r->st = st;
    r->done = 1;
    q->pending--;
    pthread_cond_broadcast(&q->cv);
  }
  return NULL; /* the queues live as long as the process */
}

static int engine_pending(const jx_comm *c, int rank) {
  /* every blocking call asks: read the table without its lock (a device without a queue
   * never had a request; the rank's own starts, which made it, ran on this thread) */
  int dev = c->dev[rank];
  engine_queue *q = dev >= 0 && dev < MAX_ENGINE_DEVICES
                        ? __atomic_load_n(&engine_queues[dev], __ATOMIC_ACQUIRE)
                        : NULL;
  if (!q) return 0;
  pthread_mutex_lock(&q->mu);
  int n = q->pending;
  pthread_mutex_unlock(&q->mu);
  return n;
}

static jx_comm_request *engine_enqueue(jx_comm *c, int rank, const desc *d, char *msg) {
  engine_queue *q = device_queue(c->dev[rank]);
  if (!q) {
    snprintf(msg, MSG, "jx_comm_start_%s: out of memory", kind_names[d->k]);
    return NULL;
  }
  jx_comm_request *r = new_request(c, rank, d, msg);
  if (!r) return NULL;
  r->eq = q;
  pthread_mutex_lock(&q->mu);
  if (!q->started) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&q->thread, &a, engine_worker, q);
    pthread_attr_destroy(&a);
    if (rc != 0) {
      pthread_mutex_unlock(&q->mu);
      snprintf(msg, MSG, "jx_comm_start_%s: cannot start a thread for device %d", kind_names[d->k],
               c->dev[rank]);
      jx_comm_release(c);
      free(r);
      return NULL;
    }
    q->started = 1;
  }
  append(&q->head, &q->tail, &q->pending, r);
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  return r;
}

/* Waits for another engine's request (its own deadline bounds it). */
static void engine_wait(jx_comm_request *r) {
  engine_queue *q = r->eq;
  pthread_mutex_lock(&q->mu);
  while (!r->done) pthread_cond_wait(&q->cv, &q->mu);
  pthread_mutex_unlock(&q->mu);
}

static jx_comm_request *start(jx_comm *c, int rank, const desc *d) {
  char msg[MSG];
  jx_status st = check_call(c, rank, d, msg);
  jx_comm_request *r = st              ? NULL
                       : c->engine.run ? engine_enqueue(c, rank, d, msg)
                                       : enqueue(c, rank, d, msg);
  if (!r) jx_error_set(st ? st : JX_ERR_OUT_OF_MEMORY, "%s", msg);
  return r;
}

/* A blocking call runs on the calling thread, unless the rank has requests in
 * flight: then it queues behind them, to keep the rank's order. */
static jx_status call(jx_comm *c, int rank, const desc *d, double timeout_s) {
  char msg[MSG];
  jx_status st = check_call(c, rank, d, msg);
  if (!st && c->engine.run) {
    if (engine_pending(c, rank)) { /* behind the device's requests in flight */
      jx_comm_request *r = engine_enqueue(c, rank, d, msg);
      if (r) return jx_comm_wait(r, timeout_s);
      st = JX_ERR_OUT_OF_MEMORY;
    } else {
      st = run_engine(c, rank, d, timeout_s, msg);
    }
  } else if (!st) {
    pthread_mutex_lock(&c->mu);
    int pending = c->q[rank].pending; /* only this rank's thread adds to it */
    pthread_mutex_unlock(&c->mu);
    if (pending) {
      jx_comm_request *r = enqueue(c, rank, d, msg);
      if (r) return jx_comm_wait(r, timeout_s);
      st = JX_ERR_OUT_OF_MEMORY;
    } else {
      deadline dl = make_deadline(timeout_s);
      st = run(c, rank, d, &dl, msg);
    }
  }
  if (st) jx_error_set(st, "%s", msg);
  return st;
}

/* ---- the public entry points ---- */

#define DESC(K, SEND, RECV, COUNT, DT, OP, ROOT, DST, SRC)                                         \
  (desc) {                                                                                         \
    .k = (K), .dt = (DT), .op = (OP), .count = (COUNT), .root = (ROOT), .dst = (DST),              \
    .src = (SRC), .send = (const char *)(SEND), .recv = (char *)(RECV)                             \
  }

jx_status jx_comm_all_reduce(jx_comm *c, int rank, const void *send, void *recv, size_t count,
                             jx_dtype dt, jx_reduce_op op, double timeout_s) {
  desc d = DESC(K_ALL_REDUCE, send, recv, count, dt, op, 0, -1, -1);
  return call(c, rank, &d, timeout_s);
}
jx_status jx_comm_reduce_scatter(jx_comm *c, int rank, const void *send, void *recv, size_t count,
                                 jx_dtype dt, jx_reduce_op op, double timeout_s) {
  desc d = DESC(K_REDUCE_SCATTER, send, recv, count, dt, op, 0, -1, -1);
  return call(c, rank, &d, timeout_s);
}
jx_status jx_comm_all_gather(jx_comm *c, int rank, const void *send, void *recv, size_t count,
                             jx_dtype dt, double timeout_s) {
  desc d = DESC(K_ALL_GATHER, send, recv, count, dt, 0, 0, -1, -1);
  return call(c, rank, &d, timeout_s);
}
jx_status jx_comm_all_to_all(jx_comm *c, int rank, const void *send, void *recv, size_t count,
                             jx_dtype dt, double timeout_s) {
  desc d = DESC(K_ALL_TO_ALL, send, recv, count, dt, 0, 0, -1, -1);
  return call(c, rank, &d, timeout_s);
}
jx_status jx_comm_permute(jx_comm *c, int rank, const void *send, void *recv, size_t count,
                          jx_dtype dt, int dst, int src, double timeout_s) {
  desc d = DESC(K_PERMUTE, send, recv, count, dt, 0, 0, dst, src);
  return call(c, rank, &d, timeout_s);
}
jx_status jx_comm_broadcast(jx_comm *c, int rank, void *buf, size_t count, jx_dtype dt, int root,
                            double timeout_s) {
  desc d = DESC(K_BROADCAST, buf, buf, count, dt, 0, root, -1, -1);
  return call(c, rank, &d, timeout_s);
}
jx_status jx_comm_barrier(jx_comm *c, int rank, double timeout_s) {
  desc d = DESC(K_BARRIER, NULL, NULL, 0, JX_F32, 0, 0, -1, -1);
  return call(c, rank, &d, timeout_s);
}

jx_comm_request *jx_comm_start_all_reduce(jx_comm *c, int rank, const void *send, void *recv,
                                          size_t count, jx_dtype dt, jx_reduce_op op) {
  desc d = DESC(K_ALL_REDUCE, send, recv, count, dt, op, 0, -1, -1);
  return start(c, rank, &d);
}
jx_comm_request *jx_comm_start_reduce_scatter(jx_comm *c, int rank, const void *send, void *recv,
                                              size_t count, jx_dtype dt, jx_reduce_op op) {
  desc d = DESC(K_REDUCE_SCATTER, send, recv, count, dt, op, 0, -1, -1);
  return start(c, rank, &d);
}
jx_comm_request *jx_comm_start_all_gather(jx_comm *c, int rank, const void *send, void *recv,
                                          size_t count, jx_dtype dt) {
  desc d = DESC(K_ALL_GATHER, send, recv, count, dt, 0, 0, -1, -1);
  return start(c, rank, &d);
}
jx_comm_request *jx_comm_start_all_to_all(jx_comm *c, int rank, const void *send, void *recv,
                                          size_t count, jx_dtype dt) {
  desc d = DESC(K_ALL_TO_ALL, send, recv, count, dt, 0, 0, -1, -1);
  return start(c, rank, &d);
}
jx_comm_request *jx_comm_start_permute(jx_comm *c, int rank, const void *send, void *recv,
                                       size_t count, jx_dtype dt, int dst, int src) {
  desc d = DESC(K_PERMUTE, send, recv, count, dt, 0, 0, dst, src);
  return start(c, rank, &d);
}
jx_comm_request *jx_comm_start_broadcast(jx_comm *c, int rank, void *buf, size_t count, jx_dtype dt,
                                         int root) {
  desc d = DESC(K_BROADCAST, buf, buf, count, dt, 0, root, -1, -1);
  return start(c, rank, &d);
}
jx_comm_request *jx_comm_start_barrier(jx_comm *c, int rank) {
  desc d = DESC(K_BARRIER, NULL, NULL, 0, JX_F32, 0, 0, -1, -1);
  return start(c, rank, &d);
}
