/* libjx_mpi.so: the MPI side of jx's process-spanning collectives
 * (src/parallel/mpi_plugin.h says what each entry does).
 *
 * Who makes the MPI calls. With MPI_THREAD_MULTIPLE (what the plugin asks
 * for, and what a program that initializes MPI itself must provide) the
 * thread that calls a collective makes its MPI calls itself, under the
 * group communicator's mutex: a hand-off to another thread and back costs
 * more than a small all-reduce. Otherwise one thread makes every MPI call of
 * the process (MPI_THREAD_FUNNELED): the callers queue jobs and sleep until
 * the thread marks them done. Either way initialization, communicator
 * splits and finalization run on the plugin's thread (MPI_Finalize must run
 * on the thread that initialized MPI).
 *
 * Deadlines. Every operation starts non-blocking and is polled with
 * MPI_Test until it finishes or its deadline passes, so a process that never
 * arrives costs a deadline, not a hang (a blocking MPI call cannot be given
 * one).
 *
 * All-reduce over a power-of-two number of processes is jx's own, from
 * non-blocking point-to-point messages: recursive doubling for small buffers
 * (log2 P exchanges of the whole buffer), and for large ones reduce-scatter
 * by recursive halving then all-gather by recursive doubling (Rabenseifner),
 * each exchange cut in segments so the reduction of one overlaps the
 * transfer of the next. Open MPI's MPI_Iallreduce (libnbc) is up to 2x slower
 * than its blocking MPI_Allreduce; these are as fast. Every element's
 * result is computed by one process (large) or by both partners of an
 * exchange from the same two operands (small; the ops are commutative), so
 * every process gets the same bits.
 *
 * Who did not arrive: a collective that is still pending after a short while
 * ("slow") sends a zero-byte arrival message tagged with its sequence number
 * to every other member over a duplicate of the group's communicator, and
 * reads the ones the others sent; at the deadline the members whose arrival
 * for this sequence number (or a later one) never came are named. Fast
 * collectives send nothing.
 *
 * A collective that missed its deadline cannot be cancelled in MPI: its
 * buffers stay registered with MPI, so a process should end after such an
 * error (jx_distributed_shutdown calls MPI_Abort then). */
#define _GNU_SOURCE
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../base/env.h"
#include "../../base/str_append.h"
#include "../../parallel/mpi_plugin.h"

/* the jx_dtype numbers (jx/array.h), repeated so the plugin needs no jx header */
enum { D_BOOL, D_I8, D_I16, D_I32, D_I64, D_U8, D_U16, D_U32, D_U64, D_F16, D_BF16, D_F32, D_F64 };
enum { TAG_SPACE = 32768, TAG_ALLREDUCE = 7 };
/* allreduce chunk: keeps counts in int and bounds one MPI call */
#define CHUNK_ELEMS ((size_t)1 << 26)
/* the point-to-point all-reduce: buffers up to this many bytes go by recursive
 * doubling, larger ones by Rabenseifner's algorithm in segments of SEG_BYTES (each
 * large message costs a rendezvous: 512 KiB measured a little faster than 256 KiB
 * at 1 MiB, and than 128 KiB everywhere) */
#define SMALL_BYTES ((size_t)64 << 10)
#define SEG_BYTES   ((size_t)512 << 10)
/* a little under Open MPI's shared-memory eager limit (4 KiB with its header) */
#define EAGER_BYTES ((size_t)4000)

struct jx_mpi_comm {
  MPI_Comm comm, side;
  int size, rank;
  int *world; /* world rank of each member */
  char label[256];
  unsigned seq;    /* collectives started */
  unsigned *heard; /* per member: 1 + the latest sequence number it announced, 0 none */
  int broken;
  char reason[JX_MPI_MSG];
  pthread_mutex_t mu; /* direct calls: one collective at a time */
  char *small;        /* SMALL_BYTES of scratch for the small all-reduces, under mu */
  char *big;          /* the large all-reduces' scratch (half the largest so far), under mu; */
  size_t big_cap;     /* kept: an allocation per call cost page faults above glibc's mmap */
};

typedef enum { T_INIT, T_SPLIT, T_RUN, T_FINALIZE } job_type;

typedef struct job {
  job_type type;
  double timeout_s;
  /* T_SPLIT */
  int member, key;
  uint64_t check;
  const char *label;
  jx_mpi_comm *out;
  /* T_RUN */
  jx_mpi_comm *c;
  jx_mpi_op op;
  /* T_FINALIZE */
  int abort_now, code;
  /* results */
  int rank, size, st, done;
  char msg[JX_MPI_MSG];
  struct job *next;
} job;

/* A collective in flight on the MPI thread. */
typedef struct active {
  job *j;
  MPI_Request req;
  struct timespec t0;
  double slow_after;
  size_t done_elems; /* allreduce: elements finished (chunks) */
  int *ic;           /* int counts/displacements for the v-collectives */
  unsigned seq;
  int announced;
  struct active *next;
} active;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv_work = PTHREAD_COND_INITIALIZER, cv_done = PTHREAD_COND_INITIALIZER;
static job *qhead, *qtail;
static pthread_t thread;
static int started, finished, any_failure, we_initialized;
static int direct; /* MPI_THREAD_MULTIPLE: callers make their collectives' MPI calls */
static int world_rank, world_size;
static MPI_Op op_fmax, op_fmin;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void mpi_err(int rc, const char *what, char *msg, size_t cap) {
  char s[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, s, &len);
  snprintf(msg, cap, "%s failed: %s", what, s);
}

/* NaN-propagating max/min for floats (XLA's semantics; MPI_MAX's is unspecified) */
static void fmaxmin(void *in, void *inout, int *len, MPI_Datatype *dt, int is_max) {
  if (*dt == MPI_FLOAT) {
    float *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
      b[i] = isnan(a[i]) || isnan(b[i]) ? a[i] + b[i]
             : is_max                   ? fmaxf(a[i], b[i])
                                        : fminf(a[i], b[i]);
  } else {
    double *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
      b[i] = isnan(a[i]) || isnan(b[i]) ? a[i] + b[i]
             : is_max                   ? fmax(a[i], b[i])
                                        : fmin(a[i], b[i]);
  }
}
static void fmax_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
  fmaxmin(in, inout, len, dt, 1);
}
static void fmin_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
  fmaxmin(in, inout, len, dt, 0);
}

static MPI_Datatype mpi_type(int dt, size_t *es) {
  switch (dt) {
  case D_BOOL: *es = 1; return MPI_UINT8_T;
  case D_I8: *es = 1; return MPI_INT8_T;
  case D_I16: *es = 2; return MPI_INT16_T;
  case D_I32: *es = 4; return MPI_INT32_T;
  case D_I64: *es = 8; return MPI_INT64_T;
  case D_U8: *es = 1; return MPI_UINT8_T;
  case D_U16: *es = 2; return MPI_UINT16_T;
  case D_U32: *es = 4; return MPI_UINT32_T;
  case D_U64: *es = 8; return MPI_UINT64_T;
  case D_F32: *es = 4; return MPI_FLOAT;
  case D_F64: *es = 8; return MPI_DOUBLE;
  default: *es = 0; return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(int dt, int op) {
  int fl = dt == D_F32 || dt == D_F64;
  if (dt == D_BOOL) return op == JX_MPI_SUM || op == JX_MPI_MAX ? MPI_MAX : MPI_MIN; /* or, and */
  switch (op) {
  case JX_MPI_SUM: return MPI_SUM;
  case JX_MPI_PROD: return MPI_PROD;
  case JX_MPI_MAX: return fl ? op_fmax : MPI_MAX;
  default: return fl ? op_fmin : MPI_MIN;
  }
}

static const char *kind_name(int k) {
  static const char *const n[] = {"all_reduce", "all_gather", "broadcast",
                                  "barrier",    "all_to_all", "reduce_scatter"};
  return k >= 0 && k <= JX_MPI_REDUCE_SCATTER ? n[k] : "?";
}

/* ---- the MPI thread's work ---- */

static void do_init(job *j) {
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (inited) {
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
      snprintf(j->msg, sizeof j->msg,
               "MPI was initialized by the program with thread level %d; jx makes its MPI calls "
               "from a thread of its own and needs MPI_THREAD_MULTIPLE then (or let "
               "jx_distributed_initialize initialize MPI)",
               provided);
      j->st = 1;
      return;
    }
  } else {
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      mpi_err(rc, "MPI_Init_thread", j->msg, sizeof j->msg);
      j->st = 1;
      return;
    }
    we_initialized = 1;
  }
  /* JX_MPI_FUNNELED=1 keeps every call on this thread (to compare, or to work
   * around an MPI whose MPI_THREAD_MULTIPLE misbehaves) */
  direct = provided >= MPI_THREAD_MULTIPLE && !jx_env_flag("JX_MPI_FUNNELED");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Op_create(fmax_fn, 1, &op_fmax);
  MPI_Op_create(fmin_fn, 1, &op_fmin);
  /* the rendezvous: every process arrives within the deadline */
  MPI_Request r;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  double end = now_s() + j->timeout_s;
  int flag = 0;
  while (!flag) {
    MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    if (flag) break;
    if (now_s() > end) {
      snprintf(j->msg, sizeof j->msg,
               "jx_distributed_initialize: process %d of %d waited %g s for the other processes "
               "to start (JX_COLLECTIVE_TIMEOUT or jx_distributed_options.timeout_s)",
               world_rank, world_size, j->timeout_s);
      j->st = 1;
      any_failure = 1;
      return;
    }
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  j->rank = world_rank;
  j->size = world_size;
}

static void do_split(job *j) {
  uint64_t v[2] = {j->check, ~j->check}, r[2];
  MPI_Request req;
  MPI_Iallreduce(v, r, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD, &req);
  double end = now_s() + j->timeout_s;
  int flag = 0;
  for (;;) {
    MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (flag) break;
    if (now_s() > end) {
      snprintf(j->msg, sizeof j->msg,
               "making the communicators of %s: the other processes did not all arrive within %g "
               "s (every process must create the same meshes that span processes, in the same "
               "order)",
               j->label, j->timeout_s);
      j->st = 1;
      any_failure = 1;
      return;
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  if (r[0] != j->check || ~r[1] != j->check) {
    snprintf(j->msg, sizeof j->msg,
             "making the communicators of %s: the processes disagree on what they make (every "
             "process must create the same meshes that span processes, in the same order)",
             j->label);
    j->st = 1;
    any_failure = 1;
    return;
  }
  MPI_Comm nc = MPI_COMM_NULL;
  int rc = MPI_Comm_split(MPI_COMM_WORLD, j->member ? 0 : MPI_UNDEFINED, j->key, &nc);
  if (rc != MPI_SUCCESS) {
    mpi_err(rc, "MPI_Comm_split", j->msg, sizeof j->msg);
    j->st = 1;
    return;
  }
  if (!j->member) return;
  jx_mpi_comm *c = calloc(1, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  c->small = malloc(SMALL_BYTES);
  MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
  MPI_Comm_size(nc, &c->size);
  MPI_Comm_rank(nc, &c->rank);
  MPI_Comm_dup(nc, &c->side);
  c->comm = nc;
  c->world = calloc((size_t)c->size, sizeof *c->world);
  c->heard = calloc((size_t)c->size, sizeof *c->heard);
  int *mine = malloc(sizeof *mine * (size_t)c->size);
  for (int q = 0; q < c->size; q++) mine[q] = q;
  MPI_Group g, w;
  MPI_Comm_group(nc, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &w);
  MPI_Group_translate_ranks(g, c->size, mine, w, c->world);
  MPI_Group_free(&g);
  MPI_Group_free(&w);
  free(mine);
  snprintf(c->label, sizeof c->label, "%s", j->label);
  j->out = c;
}

static int to_ints(const int64_t *v, int n, int *out) {
  for (int q = 0; q < n; q++) {
    if (v[q] < 0 || v[q] > 0x7fffffff) return 1;
    out[q] = (int)v[q];
  }
  return 0;
}

/* Starts (the next chunk of) a's collective; 0 or an error in a->j. */
static int start_op(active *a) {
  job *j = a->j;
  jx_mpi_comm *c = j->c;
  const jx_mpi_op *o = &j->op;
  int rc = MPI_SUCCESS, n = c->size;
  switch (o->kind) {
  case JX_MPI_ALLREDUCE: {
    size_t es;
    MPI_Datatype t = mpi_type(o->dtype, &es);
    if (t == MPI_DATATYPE_NULL) {
      snprintf(j->msg, sizeof j->msg, "all_reduce: dtype %d cannot be reduced over MPI", o->dtype);
      return 1;
    }
    size_t len = o->count - a->done_elems;
    if (len > CHUNK_ELEMS) len = CHUNK_ELEMS;
    char *recv = (char *)o->recv + a->done_elems * es;
    const void *send =
        o->send == o->recv ? MPI_IN_PLACE : (const char *)o->send + a->done_elems * es;
    rc = MPI_Iallreduce(send, recv, (int)len, t, mpi_op(o->dtype, o->op), c->comm, &a->req);
    break;
  }
  case JX_MPI_ALLGATHERV:
    a->ic = malloc(sizeof *a->ic * 2 * (size_t)n);
    if (to_ints(o->rcounts, n, a->ic) || to_ints(o->rdispls, n, a->ic + n)) {
      snprintf(j->msg, sizeof j->msg, "all_gather: more than 2 GiB per process");
      return 1;
    }
    rc = MPI_Iallgatherv(o->send ? o->send : MPI_IN_PLACE, a->ic[c->rank], MPI_BYTE, o->recv, a->ic,
                         a->ic + n, MPI_BYTE, c->comm, &a->req);
    break;
  case JX_MPI_BCAST:
    if (o->count > 0x7fffffff) {
      snprintf(j->msg, sizeof j->msg, "broadcast: more than 2 GiB");
      return 1;
    }
    rc = MPI_Ibcast(o->recv, (int)o->count, MPI_BYTE, o->root, c->comm, &a->req);
    break;
  case JX_MPI_BARRIER: rc = MPI_Ibarrier(c->comm, &a->req); break;
  case JX_MPI_ALLTOALLV:
    a->ic = malloc(sizeof *a->ic * 4 * (size_t)n);
    if (to_ints(o->scounts, n, a->ic) || to_ints(o->sdispls, n, a->ic + n) ||
        to_ints(o->rcounts, n, a->ic + 2 * n) || to_ints(o->rdispls, n, a->ic + 3 * n)) {
      snprintf(j->msg, sizeof j->msg, "all_to_all: more than 2 GiB per process");
      return 1;
    }
    rc = MPI_Ialltoallv(o->send, a->ic, a->ic + n, MPI_BYTE, o->recv, a->ic + 2 * n, a->ic + 3 * n,
                        MPI_BYTE, c->comm, &a->req);
    break;
  case JX_MPI_REDUCE_SCATTER: {
    size_t es;
    MPI_Datatype t = mpi_type(o->dtype, &es);
    if (t == MPI_DATATYPE_NULL) {
      snprintf(j->msg, sizeof j->msg, "reduce_scatter: dtype %d cannot be reduced over MPI",
               o->dtype);
      return 1;
    }
    a->ic = malloc(sizeof *a->ic * (size_t)n);
    if (to_ints(o->rcounts, n, a->ic)) {
      snprintf(j->msg, sizeof j->msg, "reduce_scatter: more than 2^31 elements per process");
      return 1;
    }
    rc = MPI_Ireduce_scatter(o->send ? o->send : MPI_IN_PLACE, o->recv, a->ic, t,
                             mpi_op(o->dtype, o->op), c->comm, &a->req);
    break;
  }
  default: snprintf(j->msg, sizeof j->msg, "unknown MPI operation %d", o->kind); return 1;
  }
  if (rc != MPI_SUCCESS) {
    mpi_err(rc, kind_name(o->kind), j->msg, sizeof j->msg);
    return 1;
  }
  return 0;
}

static int tag_of(unsigned seq) { return (int)(seq % TAG_SPACE); }

/* Reads the arrival messages waiting on c's side channel. */
static void drain_arrivals(jx_mpi_comm *c) {
  for (;;) {
    int flag = 0;
    MPI_Message m;
    MPI_Status s;
    MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->side, &flag, &m, &s);
    if (!flag) return;
    char b;
    MPI_Mrecv(&b, 0, MPI_BYTE, &m, MPI_STATUS_IGNORE);
    /* the announced sequence number, the one nearest to ours with that tag */
    unsigned t = (unsigned)s.MPI_TAG, base = c->seq - (unsigned)tag_of(c->seq);
    unsigned seq = base + t;
    if ((int)(seq - c->seq) > TAG_SPACE / 2) seq -= TAG_SPACE;
    if ((int)(c->seq - seq) > TAG_SPACE / 2) seq += TAG_SPACE;
    if (c->heard[s.MPI_SOURCE] == 0 || (int)(seq + 1 - c->heard[s.MPI_SOURCE]) > 0)
      c->heard[s.MPI_SOURCE] = seq + 1;
  }
}

static void announce_seq(jx_mpi_comm *c, unsigned seq) {
  for (int q = 0; q < c->size; q++) {
    if (q == c->rank) continue;
    MPI_Request r;
    if (MPI_Isend(NULL, 0, MPI_BYTE, q, tag_of(seq), c->side, &r) == MPI_SUCCESS)
      MPI_Request_free(&r);
  }
}

static void announce(active *a) {
  announce_seq(a->j->c, a->seq);
  a->announced = 1;
}

/* The deadline's message: "all_reduce over MPI among processes 0,1: process 1 did
 * not arrive within 3 s". */
static void deadline_message(jx_mpi_comm *c, unsigned seq, int kind, double timeout_s, char *msg,
                             size_t cap) {
  drain_arrivals(c);
  int missing = 0;
  for (int q = 0; q < c->size; q++)
    missing += q != c->rank && (c->heard[q] == 0 || (int)(c->heard[q] - 1 - seq) < 0);
  snprintf(msg, cap, "%s over MPI among processes", kind_name(kind));
  for (int q = 0; q < c->size; q++) jx_str_append(msg, cap, "%s%d", q ? "," : " ", c->world[q]);
  if (!missing) { /* they all announced but MPI did not finish: name no one */
    jx_str_append(msg, cap, ": did not finish within %g s (the processes arrived)", timeout_s);
    return;
  }
  jx_str_append(msg, cap, ": %s", missing == 1 ? "process" : "processes");
  int listed = 0;
  for (int q = 0; q < c->size; q++)
    if (q != c->rank && (c->heard[q] == 0 || (int)(c->heard[q] - 1 - seq) < 0))
      jx_str_append(msg, cap, "%s%d", listed++ ? ", " : " ", c->world[q]);
  jx_str_append(msg, cap, " did not arrive within %g s", timeout_s);
}

static void timeout_message(active *a) {
  deadline_message(a->j->c, a->seq, a->j->op.kind, a->j->timeout_s, a->j->msg, sizeof a->j->msg);
}

static void complete(job *j, int st) {
  pthread_mutex_lock(&mu);
  j->st = st;
  if (st) any_failure = 1;
  __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&cv_done);
  pthread_mutex_unlock(&mu);
}

static void finish(active *a, int st) {
  if (st && a->j->c && !a->j->c->broken) {
    a->j->c->broken = 1;
    snprintf(a->j->c->reason, sizeof a->j->c->reason, "%s", a->j->msg);
  }
  free(a->ic);
  complete(a->j, st);
  free(a);
}

static void *mpi_main(void *arg) {
  (void)arg;
  active *act = NULL;
  double last_activity = now_s();
  for (;;) {
    /* idle: look for work a little while before sleeping (a collective often follows) */
    while (!act && !__atomic_load_n(&qhead, __ATOMIC_ACQUIRE) && now_s() - last_activity < 2e-4)
      sched_yield();
    pthread_mutex_lock(&mu);
    while (!qhead && !act && !finished) pthread_cond_wait(&cv_work, &mu);
    job *list = qhead;
    qhead = qtail = NULL;
    int stop = finished && !list && !act;
    pthread_mutex_unlock(&mu);
    if (stop) break;
    if (list) last_activity = now_s();
    while (list) {
      job *j = list;
      list = j->next;
      j->next = NULL;
      if (j->type == T_INIT) {
        do_init(j);
        complete(j, j->st);
      } else if (j->type == T_SPLIT) {
        do_split(j);
        complete(j, j->st);
      } else if (j->type == T_FINALIZE) {
        int rc;
        if (j->abort_now || any_failure)
          rc = MPI_Abort(MPI_COMM_WORLD, j->code ? j->code : 1);
        else if (we_initialized) /* else the program that initialized MPI finalizes it */
          rc = MPI_Finalize();
        else
          rc = MPI_SUCCESS;
        pthread_mutex_lock(&mu);
        finished = 1;
        pthread_mutex_unlock(&mu);
        complete(j, rc != MPI_SUCCESS);
      } else {
        jx_mpi_comm *c = j->c;
        if (c->broken) {
          snprintf(j->msg, sizeof j->msg,
                   "the MPI communicator is unusable after an earlier failure: %.700s", c->reason);
          complete(j, 1);
          continue;
        }
        active *a = calloc(1, sizeof *a);
        a->j = j;
        a->seq = c->seq++;
        clock_gettime(CLOCK_MONOTONIC, &a->t0);
        a->slow_after = j->timeout_s / 5 < 0.5 ? j->timeout_s / 5 : 0.5;
        if ((a->seq & 255) == 0) drain_arrivals(c);
        if (start_op(a)) {
          finish(a, 1);
          continue;
        }
        a->next = act;
        act = a;
      }
    }
    /* poll every collective in flight */
    double t = now_s();
    for (active **p = &act; *p;) {
      active *a = *p;
      job *j = a->j;
      int flag = 0, rc = MPI_Test(&a->req, &flag, MPI_STATUS_IGNORE);
      double waited = t - ((double)a->t0.tv_sec + 1e-9 * (double)a->t0.tv_nsec);
      int st = -1;
      if (rc != MPI_SUCCESS) {
        mpi_err(rc, kind_name(j->op.kind), j->msg, sizeof j->msg);
        st = 1;
      } else if (flag) {
        if (j->op.kind == JX_MPI_ALLREDUCE) {
          size_t len = j->op.count - a->done_elems;
          a->done_elems += len > CHUNK_ELEMS ? CHUNK_ELEMS : len;
          if (a->done_elems < j->op.count) {
            st = start_op(a) ? 1 : -1;
          } else {
            st = 0;
          }
        } else {
          st = 0;
        }
      } else if (waited > j->timeout_s) {
        timeout_message(a);
        st = 1;
      } else if (waited > a->slow_after) {
        if (!a->announced) announce(a);
        drain_arrivals(j->c);
      }
      if (st >= 0) {
        *p = a->next;
        finish(a, st);
        last_activity = now_s();
      } else {
        p = &a->next;
      }
    }
    /* Open MPI's non-blocking collectives progress only inside MPI_Test: poll
     * without pause while they are young, then yield, then sleep a little */
    double idle = now_s() - last_activity;
    if (act && idle > 2e-3) {
      if (idle < 5e-2) {
        sched_yield();
      } else {
        struct timespec ts = {0, idle < 1 ? 100000 : 1000000};
        nanosleep(&ts, NULL);
      }
    }
  }
  return NULL;
}

/* Queues j for the MPI thread and waits for it. */
static int submit(job *j) {
  pthread_mutex_lock(&mu);
  if (finished) {
    pthread_mutex_unlock(&mu);
    snprintf(j->msg, sizeof j->msg, "MPI was already finalized (jx_distributed_shutdown)");
    return 1;
  }
  if (qtail)
    qtail->next = j;
  else
    __atomic_store_n(&qhead, j, __ATOMIC_RELEASE);
  qtail = j;
  pthread_cond_signal(&cv_work);
  pthread_mutex_unlock(&mu);
  /* most collectives finish within microseconds: yield a while before sleeping */
  double t0 = now_s();
  while (!__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) && now_s() - t0 < 1e-4) sched_yield();
  pthread_mutex_lock(&mu);
  while (!j->done) pthread_cond_wait(&cv_done, &mu);
  pthread_mutex_unlock(&mu);
  return j->st;
}

static int p_init(double timeout_s, int *rank, int *size, char *msg, size_t cap) {
  pthread_mutex_lock(&mu);
  if (!started) {
    if (pthread_create(&thread, NULL, mpi_main, NULL) != 0) {
      pthread_mutex_unlock(&mu);
      snprintf(msg, cap, "cannot start the MPI thread");
      return 1;
    }
    started = 1;
  }
  pthread_mutex_unlock(&mu);
  job j = {.type = T_INIT, .timeout_s = timeout_s};
  int st = submit(&j);
  if (st) snprintf(msg, cap, "%s", j.msg);
  *rank = j.rank;
  *size = j.size;
  return st;
}

static int p_split(int member, int key, uint64_t check, const char *label, double timeout_s,
                   jx_mpi_comm **out, char *msg, size_t cap) {
  job j = {.type = T_SPLIT,
           .member = member,
           .key = key,
           .check = check,
           .label = label,
           .timeout_s = timeout_s};
  int st = submit(&j);
  if (st) snprintf(msg, cap, "%s", j.msg);
  *out = j.out;
  return st;
}

/* ---- direct calls (MPI_THREAD_MULTIPLE): the caller's thread polls ---- */

/* One collective's deadline and its arrival bookkeeping. */
typedef struct {
  jx_mpi_comm *c;
  unsigned seq;
  int kind, announced;
  double t0; /* the clock at its first read, after 16 polls (< 0: not read yet) */
  double timeout_s, slow_after;
  double spin_s; /* spin this long before yielding the core (see run_direct) */
} poller;

/* Waits for reqs[0..n) to finish within the deadline; 0, or 1 with the reason
 * in msg (the requests may still be pending then). Spins on MPI_Test at first
 * (Open MPI progresses only inside its calls), then yields, then sleeps.
 * MPI_Test for one request: after progressing it looks again, where
 * MPI_Testall would report "not yet" and cost another call. */
static int wait_reqs(poller *pl, int n, MPI_Request *reqs, char *msg, size_t cap) {
  for (long it = 0;; it++) {
    int flag = 0, rc = n == 1 ? MPI_Test(reqs, &flag, MPI_STATUS_IGNORE)
                              : MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      mpi_err(rc, kind_name(pl->kind), msg, cap);
      return 1;
    }
    if (flag) return 0;
    if ((it & 15) != 15) continue; /* a clock read costs more than a test */
    /* the deadline counts from here: a collective that finishes within 16 polls (most
     * small ones) reads no clock at all; this is microseconds after it started */
    double t = now_s();
    if (pl->t0 < 0) pl->t0 = t;
    double waited = t - pl->t0;
    if (waited > pl->timeout_s) {
      deadline_message(pl->c, pl->seq, pl->kind, pl->timeout_s, msg, cap);
      return 1;
    }
    if (waited > pl->slow_after) {
      if (!pl->announced) announce_seq(pl->c, pl->seq);
      pl->announced = 1;
      drain_arrivals(pl->c);
    }
    if (waited > 5e-2 + pl->spin_s) {
      struct timespec ts = {0, waited < 1 ? 100000 : 1000000};
      nanosleep(&ts, NULL);
    } else if (waited > pl->spin_s) {
      sched_yield();
    }
  }
}

static int is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

/* elements [send_lo, send_hi) of buf exchanged with partner: sends them from buf, receives
 * the partner's [recv_lo, recv_hi) into rbuf, whose first element is element rbase, in
 * segments of seg elements, reducing each received segment into acc (+ the same offsets)
 * as it arrives (NULL: none) */
typedef struct {
  poller *pl;
  MPI_Datatype t;
  MPI_Op op;
  size_t es, seg;
  char *msg;
  size_t cap;
} xchg;

static int exchange(xchg *x, int partner, char *buf, size_t send_lo, size_t send_hi, char *rbuf,
                    size_t rbase, size_t recv_lo, size_t recv_hi, char *acc) {
  jx_mpi_comm *c = x->pl->c;
  size_t ns = (send_hi - send_lo + x->seg - 1) / x->seg,
         nr = (recv_hi - recv_lo + x->seg - 1) / x->seg;
  /* the requests of a few segments live on the stack: no allocation per call (after a
   * failure nothing reads them again; MPI keeps its own state) */
  MPI_Request few[16];
  MPI_Request *r = ns + nr <= 16 ? few : malloc(sizeof *r * (ns + nr));
  if (!r) {
    snprintf(x->msg, x->cap, "all_reduce: out of memory");
    return 1;
  }
  int rc = MPI_SUCCESS;
  size_t k = 0;
  for (size_t i = 0; i < nr && rc == MPI_SUCCESS; i++, k++) {
    size_t lo = recv_lo + i * x->seg, len = recv_hi - lo < x->seg ? recv_hi - lo : x->seg;
    rc = MPI_Irecv(rbuf + (lo - rbase) * x->es, (int)len, x->t, partner, TAG_ALLREDUCE, c->comm,
                   &r[k]);
  }
  for (size_t i = 0; i < ns && rc == MPI_SUCCESS; i++, k++) {
    size_t lo = send_lo + i * x->seg, len = send_hi - lo < x->seg ? send_hi - lo : x->seg;
    rc = MPI_Isend(buf + lo * x->es, (int)len, x->t, partner, TAG_ALLREDUCE, c->comm, &r[k]);
  }
  int st = 0;
  if (rc != MPI_SUCCESS) { /* requests already posted stay pending: the comm breaks */
    mpi_err(rc, "all_reduce", x->msg, x->cap);
    st = 1;
  }
  /* MPI may read a send buffer until the send completes (the receiver copies a large
   * message straight out of it): where the reduction writes what is being sent
   * (recursive doubling), the sends finish first */
  int overlap = acc == buf && send_lo < recv_hi && recv_lo < send_hi;
  if (!st && overlap) st = wait_reqs(x->pl, (int)ns, r + nr, x->msg, x->cap);
  for (size_t i = 0; i < nr && !st; i++) {
    st = wait_reqs(x->pl, 1, &r[i], x->msg, x->cap);
    if (acc && !st) { /* acc = received op acc (the ops are commutative: both partners agree) */
      size_t lo = recv_lo + i * x->seg, len = recv_hi - lo < x->seg ? recv_hi - lo : x->seg;
      MPI_Reduce_local(rbuf + (lo - rbase) * x->es, acc + lo * x->es, (int)len, x->t, x->op);
    }
  }
  if (!st && !overlap) st = wait_reqs(x->pl, (int)ns, r + nr, x->msg, x->cap);
  if (r != few) free(r);
  return st;
}

/* In-place all-reduce of buf[count] over c (a power-of-two number of members). */
static int allreduce_p2p(poller *pl, const jx_mpi_op *o, char *msg, size_t cap) {
  jx_mpi_comm *c = pl->c;
  size_t es, count = o->count;
  MPI_Datatype t = mpi_type(o->dtype, &es);
  char *buf = o->recv;
  if (o->send != o->recv && count) memcpy(buf, o->send, count * es);
  int n = c->size, me = c->rank;
  if (n == 1 || !count) return 0;
  size_t bytes = count * es;
  xchg x = {pl, t, mpi_op(o->dtype, o->op), es, 0, msg, cap};
  if (bytes <= SMALL_BYTES) { /* recursive doubling: log2 n exchanges of everything */
    /* the comm's own scratch (under its mutex): no allocation per call, and after a
     * failure MPI may still write into it, but the comm is never used again */
    char *tmp = c->small;
    if (!tmp) {
      snprintf(msg, cap, "all_reduce: out of memory");
      return 1;
    }
    /* up to EAGER_BYTES per message: MPI sends those at once (eager), larger ones wait
     * for the receiver (rendezvous); in between, eager pieces are faster */
    x.seg = bytes <= 4 * EAGER_BYTES ? EAGER_BYTES / es : count;
    for (int mask = 1; mask < n; mask <<= 1)
      if (exchange(&x, me ^ mask, buf, 0, count, tmp, 0, 0, count, buf)) return 1;
    return 0;
  }
  /* Rabenseifner: block b is elements [b*count/n, (b+1)*count/n). Each step receives
   * into the scratch within the half kept at the first step, which it covers. */
#define EDGE(b) ((size_t)(b)*count / (size_t)n)
  int first_lo = me & (n / 2) ? n / 2 : 0;
  size_t base = EDGE(first_lo), half = EDGE(first_lo + n / 2) - base;
  if (half * es > c->big_cap) {
    /* the old scratch is kept if this fails; after a failure MPI may still write into it,
     * but the comm is never used again */
    char *big = malloc(half * es);
    if (!big) {
      snprintf(msg, cap, "all_reduce: out of memory");
      return 1;
    }
    free(c->big);
    c->big = big;
    c->big_cap = half * es;
  }
  x.seg = SEG_BYTES / es;
  int lo = 0, hi = n;
  for (int mask = n / 2; mask >= 1; mask /= 2) { /* reduce-scatter by recursive halving */
    int mid = (lo + hi) / 2, keep_low = (me & mask) == 0;
    int klo = keep_low ? lo : mid, khi = keep_low ? mid : hi;
    int slo = keep_low ? mid : lo, shi = keep_low ? hi : mid;
    if (exchange(&x, me ^ mask, buf, EDGE(slo), EDGE(shi), c->big, base, EDGE(klo), EDGE(khi), buf))
      return 1;
    lo = klo, hi = khi;
  }
  for (int mask = 1; mask < n; mask <<= 1) { /* all-gather by recursive doubling */
    int olo = me & ~(mask - 1), plo = (me ^ mask) & ~(mask - 1);
    if (exchange(&x, me ^ mask, buf, EDGE(olo), EDGE(olo + mask), buf, 0, EDGE(plo),
                 EDGE(plo + mask), NULL))
      return 1;
  }
#undef EDGE
  return 0;
}

/* A collective on the calling thread (MPI_THREAD_MULTIPLE). */
static int run_direct(jx_mpi_comm *c, const jx_mpi_op *op, double timeout_s, char *msg,
                      size_t cap) {
  pthread_mutex_lock(&c->mu);
  if (c->broken) {
    snprintf(msg, cap, "the MPI communicator is unusable after an earlier failure: %.700s",
             c->reason);
    pthread_mutex_unlock(&c->mu);
    return 1;
  }
  poller pl = {.c = c, .seq = c->seq++, .kind = op->kind, .t0 = -1, .timeout_s = timeout_s};
  pl.slow_after = timeout_s / 5 < 0.5 ? timeout_s / 5 : 0.5;
  /* Spin while the data may still be moving: 2 ms, plus the time to move the buffer at a
   * pessimistic 1 GB/s. A fixed 2 ms made a 4 MiB all-reduce (~2 ms) yield its core on a
   * busy machine, and wait a time slice to get it back (3x MPI_Allreduce's time, which
   * never yields). Past that the peers are late: yield, then sleep. */
  size_t es = 0;
  mpi_type(op->dtype, &es);
  pl.spin_s = 2e-3 + 1e-9 * (double)(op->count * (es ? es : 1));
  if ((pl.seq & 255) == 0) drain_arrivals(c);
  int st;
  if (op->kind == JX_MPI_ALLREDUCE && is_pow2(c->size) &&
      mpi_type(op->dtype, &es) != MPI_DATATYPE_NULL && op->count / c->size < CHUNK_ELEMS) {
    st = allreduce_p2p(&pl, op, msg, cap);
  } else { /* MPI's non-blocking collective (all-reduce: in chunks of int counts) */
    job j = {.type = T_RUN, .c = c, .op = *op, .timeout_s = timeout_s};
    active a = {.j = &j, .seq = pl.seq};
    for (;;) {
      st = start_op(&a);
      if (!st) st = wait_reqs(&pl, 1, &a.req, j.msg, sizeof j.msg);
      free(a.ic);
      a.ic = NULL;
      if (st || op->kind != JX_MPI_ALLREDUCE) break;
      size_t len = op->count - a.done_elems;
      a.done_elems += len > CHUNK_ELEMS ? CHUNK_ELEMS : len;
      if (a.done_elems >= op->count) break;
    }
    if (st) snprintf(msg, cap, "%s", j.msg);
  }
  if (st) {
    c->broken = 1;
    snprintf(c->reason, sizeof c->reason, "%s", msg);
    __atomic_store_n(&any_failure, 1, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

static int p_run(jx_mpi_comm *c, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap) {
  if (direct) return run_direct(c, op, timeout_s, msg, cap);
  job j = {.type = T_RUN, .c = c, .op = *op, .timeout_s = timeout_s};
  int st = submit(&j);
  if (st) snprintf(msg, cap, "%s", j.msg);
  return st;
}

static int p_finalize(int abort_now, int code) {
  if (!started) return 0;
  job j = {.type = T_FINALIZE, .abort_now = abort_now, .code = code};
  int st = submit(&j);
  pthread_join(thread, NULL);
  return st;
}

static const char *p_version(void) {
  static char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  char *nl = strchr(v, '\n');
  if (nl) *nl = 0;
  return v;
}

static const jx_mpi_api api = {JX_MPI_ABI, p_init, p_split, p_run, p_finalize, p_version};

__attribute__((visibility("default"))) const jx_mpi_api *jx_mpi_plugin_api(void) { return &api; }
