/* A fake NCCL for tests: the symbols src/cuda/cuda_nccl.c loads, with ranks
 * that are threads (or one thread in a group) of one process and device
 * memory that is host memory (nccl_fake_driver.c). Load it with
 * JX_NCCL_PATH and JX_CUDA_DRIVER_PATH both naming this library.
 *
 * What it models: ncclGetUniqueId and ncclCommInitRank meet in a registry
 * keyed by the id; a collective is a round of its communicator (the n-th
 * call of every rank), pending on the caller's stream until the last rank
 * arrives, which then computes it for all from the definitions; ncclSend
 * and ncclRecv pair up by (sender, receiver, n-th message); ncclCommSplit
 * groups the ranks by color, ordered by key; blocking calls (init, split)
 * made inside ncclGroupStart/End finish at ncclGroupEnd, so that one thread
 * may drive several devices. ncclCommAbort fails whatever is pending on its
 * communicator: its own waiters wake, and peers with work in those rounds
 * see ncclRemoteError from ncclCommGetAsyncError. Ranks that disagree on a
 * round (kind, count, type, op, root) get ncclInvalidUsage.
 *
 * What it is not: fast, or a check of NCCL's own rules beyond those above;
 * reductions run in double (floats) or 64-bit integers, in rank order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_driver.h"
#include "cuda/cuda_nccl.h"
#include "nccl_fake.h"

enum { SUCCESS = 0, SYSTEM_ERROR = 2, INVALID_ARGUMENT = 4, INVALID_USAGE = 5, REMOTE_ERROR = 6 };
enum { ROUND_ALL_REDUCE, ROUND_ALL_GATHER, ROUND_REDUCE_SCATTER, ROUND_BROADCAST, ROUND_SPLIT };

typedef struct clique clique;

struct ncclComm {
  clique *q;
  int rank;
  struct CUctx_st *ctx;
  uint64_t seq;              /* rounds called so far */
  uint64_t *sent, *received; /* per peer: messages so far */
  ncclResult_t async;
};

typedef struct {
  int present, kind, dtype, op, root, color, key;
  size_t count;
  const void *send;
  void *recv;
  ncclComm_t *out; /* split */
  fake_work *work;
} contribution;

typedef struct round {
  uint64_t seq;
  int arrived;
  contribution *c; /* per rank */
  struct round *next;
} round;

typedef struct message {
  int src, dst;
  uint64_t seq;
  const void *send;
  void *recv;
  size_t bytes;
  fake_work *send_work, *recv_work;
  struct message *next;
} message;

struct clique {
  int nranks, joined, live;
  ncclUniqueId id;
  ncclComm_t *members;
  fake_work *all_joined; /* done when every rank called ncclCommInitRank */
  round *rounds;
  message *messages;
  clique *next_pending; /* in the registry until every rank joined */
};

static clique *pending_init;
static uint64_t ids_made;
static _Thread_local int group_depth;
static _Thread_local fake_deps group_waits;
/* streams that began a group's work: the group's operations run together,
 * so only its first one on a stream waits for what the stream waited for */
static _Thread_local CUstream group_streams[64];
static _Thread_local int group_nstreams;

/* ---- elements ---- */

static size_t type_size(int dt) {
  switch (dt) {
  case JX_NCCL_INT8:
  case JX_NCCL_UINT8: return 1;
  case JX_NCCL_FLOAT16:
  case JX_NCCL_BFLOAT16: return 2;
  case JX_NCCL_INT32:
  case JX_NCCL_UINT32:
  case JX_NCCL_FLOAT32: return 4;
  case JX_NCCL_INT64:
  case JX_NCCL_UINT64:
  case JX_NCCL_FLOAT64: return 8;
  default: return 0;
  }
}

static int is_float(int dt) {
  return dt == JX_NCCL_FLOAT16 || dt == JX_NCCL_BFLOAT16 || dt == JX_NCCL_FLOAT32 ||
         dt == JX_NCCL_FLOAT64;
}

static float half_to_float(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  float v;
  if (exp == 0)
    v = (float)man / 1024.0f / 16384.0f; /* subnormal: man * 2^-24 */
  else if (exp == 31)
    v = man ? __builtin_nanf("") : __builtin_inff();
  else
    v = (1.0f + (float)man / 1024.0f) *
        (float)(exp >= 15 ? (double)(1 << (exp - 15)) : 1.0 / (double)(1 << (15 - exp)));
  return sign ? -v : v;
}

static uint16_t float_to_half(float f) { /* to nearest even */
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  int exp = (int)((x >> 23) & 255) - 127 + 15;
  uint32_t man = x & 0x7fffff;
  if (((x >> 23) & 255) == 255) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return sign;
    man |= 0x800000;
    int shift = 14 - exp;
    uint32_t half = man >> shift, rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t h = ((uint32_t)exp << 10) | (man >> 13), rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static double get_float(int dt, const char *p, size_t i) {
  switch (dt) {
  case JX_NCCL_FLOAT16: {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return half_to_float(h);
  }
  case JX_NCCL_BFLOAT16: {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
  }
  case JX_NCCL_FLOAT32: {
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
  }
  default: {
    double d;
    memcpy(&d, p + 8 * i, 8);
    return d;
  }
  }
}

static void put_float(int dt, char *p, size_t i, double v) {
  switch (dt) {
  case JX_NCCL_FLOAT16: {
    uint16_t h = float_to_half((float)v);
    memcpy(p + 2 * i, &h, 2);
    return;
  }
  case JX_NCCL_BFLOAT16: {
    float f = (float)v;
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t h = (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
    memcpy(p + 2 * i, &h, 2);
    return;
  }
  case JX_NCCL_FLOAT32: {
    float f = (float)v;
    memcpy(p + 4 * i, &f, 4);
    return;
  }
  default: memcpy(p + 8 * i, &v, 8); return;
  }
}

/* Integers travel as uint64_t: sums and products wrap as the type does once stored. */
static uint64_t get_int(int dt, const char *p, size_t i) {
  switch (dt) {
  case JX_NCCL_INT8: return (uint64_t)(int64_t)((const int8_t *)p)[i];
  case JX_NCCL_UINT8: return ((const uint8_t *)p)[i];
  case JX_NCCL_INT32: {
    int32_t v;
    memcpy(&v, p + 4 * i, 4);
    return (uint64_t)(int64_t)v;
  }
  case JX_NCCL_UINT32: {
    uint32_t v;
    memcpy(&v, p + 4 * i, 4);
    return v;
  }
  default: {
    uint64_t v;
    memcpy(&v, p + 8 * i, 8);
    return v;
  }
  }
}

static void put_int(int dt, char *p, size_t i, uint64_t v) {
  size_t n = type_size(dt);
  memcpy(p + n * i, &v, n); /* little-endian: the low bytes */
}

static int is_signed(int dt) {
  return dt == JX_NCCL_INT8 || dt == JX_NCCL_INT32 || dt == JX_NCCL_INT64;
}

static uint64_t combine_int(int dt, int op, uint64_t a, uint64_t b) {
  int less = is_signed(dt) ? (int64_t)a < (int64_t)b : a < b;
  switch (op) {
  case JX_NCCL_SUM: return a + b;
  case JX_NCCL_PROD: return a * b;
  case JX_NCCL_MAX: return less ? b : a;
  default: return less ? a : b;
  }
}

static double combine_float(int op, double a, double b) {
  switch (op) {
  case JX_NCCL_SUM: return a + b;
  case JX_NCCL_PROD: return a * b;
  case JX_NCCL_MAX: return a != a || b != b ? a + b : (a < b ? b : a);
  default: return a != a || b != b ? a + b : (a < b ? a : b);
  }
}

/* out[i] = op over ranks (in order) of c[r].send[offset + i], i < count */
static void reduce(const round *rd, int n, size_t offset, size_t count, char *out) {
  const contribution *c0 = &rd->c[0];
  for (size_t i = 0; i < count; i++) {
    if (is_float(c0->dtype)) {
      double acc = get_float(c0->dtype, c0->send, offset + i);
      for (int r = 1; r < n; r++)
        acc = combine_float(c0->op, acc, get_float(c0->dtype, rd->c[r].send, offset + i));
      put_float(c0->dtype, out, i, acc);
    } else {
      uint64_t acc = get_int(c0->dtype, c0->send, offset + i);
      for (int r = 1; r < n; r++)
        acc = combine_int(c0->dtype, c0->op, acc, get_int(c0->dtype, rd->c[r].send, offset + i));
      put_int(c0->dtype, out, i, acc);
    }
  }
}

/* ---- rounds ---- */

static void fail_round(clique *q, round *rd, ncclResult_t why) {
  for (int r = 0; r < q->nranks; r++) {
    if (!rd->c[r].present) continue;
    if (q->members[r]) q->members[r]->async = why;
    fake_work_finish(rd->c[r].work, 1);
  }
}

static void free_round(clique *q, round *rd) {
  for (round **p = &q->rounds; *p; p = &(*p)->next)
    if (*p == rd) {
      *p = rd->next;
      break;
    }
  for (int r = 0; r < q->nranks; r++) fake_work_release(rd->c[r].work);
  free(rd->c);
  free(rd);
}

static ncclComm_t new_comm(clique *q, int rank, struct CUctx_st *ctx) {
  ncclComm_t c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->sent = calloc((size_t)q->nranks, sizeof *c->sent);
  c->received = calloc((size_t)q->nranks, sizeof *c->received);
  if (!c->sent || !c->received) {
    free(c->sent);
    free(c->received);
    free(c);
    return NULL;
  }
  c->q = q;
  c->rank = rank;
  c->ctx = ctx;
  q->members[rank] = c;
  q->live++;
  return c;
}

static clique *new_clique(int nranks) {
  clique *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->nranks = nranks;
  q->members = calloc((size_t)nranks, sizeof *q->members);
  q->all_joined = fake_work_new();
  if (!q->members || !q->all_joined) {
    free(q->members);
    free(q->all_joined);
    free(q);
    return NULL;
  }
  return q;
}

static void free_clique(clique *q) {
  while (q->rounds) free_round(q, q->rounds);
  while (q->messages) {
    message *m = q->messages;
    q->messages = m->next;
    fake_work_release(m->send_work);
    fake_work_release(m->recv_work);
    free(m);
  }
  fake_work_release(q->all_joined);
  free(q->members);
  free(q);
}

/* ncclCommSplit for every rank at once: the last rank to arrive runs it */
static int run_split(clique *q, round *rd) {
  int n = q->nranks;
  for (int r = 0; r < n; r++) *rd->c[r].out = NULL;
  for (int r = 0; r < n; r++) {
    int color = rd->c[r].color;
    if (color == JX_NCCL_SPLIT_NOCOLOR || *rd->c[r].out) continue;
    int *order = malloc((size_t)n * sizeof *order), m = 0;
    if (!order) return -1;
    for (int s = 0; s < n; s++)
      if (rd->c[s].color == color) order[m++] = s;
    for (int i = 1; i < m; i++) /* by (key, parent rank): insertion sort, stable */
      for (int j = i; j > 0 && rd->c[order[j - 1]].key > rd->c[order[j]].key; j--) {
        int t = order[j];
        order[j] = order[j - 1];
        order[j - 1] = t;
      }
    clique *child = new_clique(m);
    if (!child) {
      free(order);
      return -1;
    }
    child->joined = m;
    fake_work_finish(child->all_joined, 0);
    for (int i = 0; i < m; i++) {
      *rd->c[order[i]].out = new_comm(child, i, q->members[order[i]]->ctx);
      if (!*rd->c[order[i]].out) {
        free(order);
        return -1;
      }
    }
    free(order);
  }
  return 0;
}

static int run_round(clique *q, round *rd) {
  int n = q->nranks;
  const contribution *c0 = &rd->c[0];
  for (int r = 1; r < n; r++) {
    const contribution *c = &rd->c[r];
    if (c->kind != c0->kind || c->count != c0->count || c->dtype != c0->dtype || c->op != c0->op ||
        c->root != c0->root) {
      fprintf(stderr, "fake NCCL: ranks 0 and %d of a communicator disagree on call %llu\n", r,
              (unsigned long long)rd->seq);
      return INVALID_USAGE;
    }
  }
  if (c0->kind == ROUND_SPLIT) return run_split(q, rd) ? SYSTEM_ERROR : SUCCESS;
  size_t es = type_size(c0->dtype), count = c0->count;
  /* the whole answer first, then the copies: a rank's recv may be its (or a peer's) send */
  size_t total = c0->kind == ROUND_ALL_GATHER ? (size_t)n * count : count;
  char *answer = malloc(total * es + 1);
  if (!answer) return SYSTEM_ERROR;
  switch (c0->kind) {
  case ROUND_ALL_REDUCE: reduce(rd, n, 0, count, answer); break;
  case ROUND_ALL_GATHER:
    for (int r = 0; r < n; r++) memcpy(answer + (size_t)r * count * es, rd->c[r].send, count * es);
    break;
  case ROUND_BROADCAST: memcpy(answer, rd->c[c0->root].send, count * es); break;
  default: break; /* reduce-scatter: per rank below */
  }
  char **blocks = malloc((size_t)n * sizeof *blocks);
  if (!blocks) {
    free(answer);
    return SYSTEM_ERROR;
  }
  for (int r = 0; r < n && c0->kind == ROUND_REDUCE_SCATTER; r++) {
    blocks[r] = malloc(count * es + 1);
    if (blocks[r]) reduce(rd, n, (size_t)r * count, count, blocks[r]);
  }
  for (int r = 0; r < n; r++) {
    const void *from = c0->kind == ROUND_REDUCE_SCATTER ? blocks[r] : answer;
    if (from) memcpy(rd->c[r].recv, from, total * es);
  }
  int status = SUCCESS;
  for (int r = 0; r < n && c0->kind == ROUND_REDUCE_SCATTER; r++) {
    if (!blocks[r]) status = SYSTEM_ERROR;
    free(blocks[r]);
  }
  free(blocks);
  free(answer);
  return status;
}

/* Joins round comm->seq of comm's clique; the last rank runs it. Under fake_lock. */
static ncclResult_t arrive(ncclComm_t comm, contribution c) {
  clique *q = comm->q;
  uint64_t seq = comm->seq++;
  round *rd = q->rounds;
  while (rd && rd->seq != seq) rd = rd->next;
  if (!rd) {
    rd = calloc(1, sizeof *rd);
    if (rd) rd->c = calloc((size_t)q->nranks, sizeof *rd->c);
    if (!rd || !rd->c) {
      free(rd);
      return SYSTEM_ERROR;
    }
    rd->seq = seq;
    rd->next = q->rounds;
    q->rounds = rd;
  }
  c.present = 1;
  c.work->refs++;
  rd->c[comm->rank] = c;
  if (++rd->arrived < q->nranks) return SUCCESS;
  int status = run_round(q, rd);
  if (status)
    fail_round(q, rd, status);
  else
    for (int r = 0; r < q->nranks; r++) fake_work_finish(rd->c[r].work, 0);
  free_round(q, rd);
  return SUCCESS; /* a failed round shows in ncclCommGetAsyncError, as NCCL's do */
}

/* A call that blocks until its work is done, or inside a group until ncclGroupEnd. */
static ncclResult_t block_on(fake_work *w) {
  if (group_depth > 0) return fake_deps_add(&group_waits, w) ? SYSTEM_ERROR : SUCCESS;
  while (!w->done) pthread_cond_wait(&fake_cond, &fake_lock);
  return w->error ? REMOTE_ERROR : SUCCESS;
}

/* Waits for what s waits for, unless this group's work on s already did. Under fake_lock. */
static void follow_stream(CUstream s) {
  if (group_depth > 0) {
    for (int k = 0; k < group_nstreams; k++)
      if (group_streams[k] == s) return;
    if (group_nstreams < 64) group_streams[group_nstreams++] = s;
  }
  fake_deps_wait(&s->deps);
}

/* A stream operation of comm: checks the stream is on comm's device, runs
 * after what the stream waits for, and stays pending on it. */
static ncclResult_t enqueue(ncclComm_t comm, CUstream s, contribution c) {
  if (!comm || !s) return INVALID_ARGUMENT;
  if (s->ctx != comm->ctx) {
    fprintf(stderr, "fake NCCL: a stream of device %d used with a communicator of device %d\n",
            s->ctx->device, comm->ctx->device);
    return INVALID_ARGUMENT;
  }
  if (!type_size(c.dtype) || c.op < JX_NCCL_SUM || c.op > JX_NCCL_MIN) return INVALID_ARGUMENT;
  pthread_mutex_lock(&fake_lock);
  follow_stream(s);
  ncclResult_t r = SYSTEM_ERROR;
  c.work = fake_work_new();
  if (c.work && !fake_deps_add(&s->deps, c.work)) r = arrive(comm, c);
  fake_work_release(c.work);
  pthread_mutex_unlock(&fake_lock);
  return r;
}

/* ---- the API ---- */

FAKE_EXPORT ncclResult_t ncclGetVersion(int *version) {
  *version = 22809;
  return SUCCESS;
}

FAKE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  pthread_mutex_lock(&fake_lock);
  snprintf(id->internal, sizeof id->internal, "jx fake NCCL id %llu",
           (unsigned long long)++ids_made);
  pthread_mutex_unlock(&fake_lock);
  return SUCCESS;
}

FAKE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  struct CUctx_st *ctx = fake_current_context();
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks || !ctx) return INVALID_ARGUMENT;
  pthread_mutex_lock(&fake_lock);
  clique **p = &pending_init;
  while (*p && memcmp((*p)->id.internal, id.internal, sizeof id.internal)) p = &(*p)->next_pending;
  clique *q = *p;
  ncclResult_t r = SUCCESS;
  if (!q) {
    q = new_clique(nranks);
    if (q) {
      q->id = id;
      q->next_pending = pending_init;
      pending_init = q;
    }
  }
  if (!q)
    r = SYSTEM_ERROR;
  else if (q->nranks != nranks || q->members[rank])
    r = INVALID_USAGE;
  else if (!(*comm = new_comm(q, rank, ctx)))
    r = SYSTEM_ERROR;
  if (r == SUCCESS && ++q->joined == nranks) {
    for (p = &pending_init; *p != q; p = &(*p)->next_pending) {
    }
    *p = q->next_pending;
    fake_work_finish(q->all_joined, 0);
  }
  if (r == SUCCESS) r = block_on(q->all_joined);
  pthread_mutex_unlock(&fake_lock);
  return r;
}

FAKE_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *out,
                                       ncclConfig_t *config) {
  (void)config;
  if (!comm || !out || (color < 0 && color != JX_NCCL_SPLIT_NOCOLOR)) return INVALID_ARGUMENT;
  pthread_mutex_lock(&fake_lock);
  contribution c = {.kind = ROUND_SPLIT, .color = color, .key = key, .out = out};
  ncclResult_t r = SYSTEM_ERROR;
  c.work = fake_work_new();
  if (c.work) r = arrive(comm, c);
  if (r == SUCCESS) r = block_on(c.work);
  fake_work_release(c.work);
  pthread_mutex_unlock(&fake_lock);
  return r;
}

/* Fails comm's pending rounds and messages and frees it (abort and destroy alike). */
static ncclResult_t release_comm(ncclComm_t comm) {
  if (!comm) return INVALID_ARGUMENT;
  pthread_mutex_lock(&fake_lock);
  clique *q = comm->q;
  while (q->rounds) {
    fail_round(q, q->rounds, REMOTE_ERROR);
    free_round(q, q->rounds);
  }
  for (message **p = &q->messages; *p;) {
    message *m = *p;
    if (m->src != comm->rank && m->dst != comm->rank) {
      p = &m->next;
      continue;
    }
    int peer = m->src == comm->rank ? m->dst : m->src;
    if (q->members[peer] && peer != comm->rank) q->members[peer]->async = REMOTE_ERROR;
    if (m->send_work) fake_work_finish(m->send_work, 1);
    if (m->recv_work) fake_work_finish(m->recv_work, 1);
    fake_work_release(m->send_work);
    fake_work_release(m->recv_work);
    *p = m->next;
    free(m);
  }
  q->members[comm->rank] = NULL;
  free(comm->sent);
  free(comm->received);
  free(comm);
  if (--q->live == 0 && q->joined == q->nranks) free_clique(q);
  pthread_mutex_unlock(&fake_lock);
  return SUCCESS;
}

FAKE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) { return release_comm(comm); }
FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) { return release_comm(comm); }

FAKE_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *error) {
  if (!comm || !error) return INVALID_ARGUMENT;
  pthread_mutex_lock(&fake_lock);
  *error = comm->async;
  pthread_mutex_unlock(&fake_lock);
  return SUCCESS;
}

FAKE_EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int dtype,
                                       int op, ncclComm_t comm, CUstream s) {
  contribution c = {.kind = ROUND_ALL_REDUCE, .dtype = dtype, .op = op, .count = count};
  c.send = send;
  c.recv = recv;
  return enqueue(comm, s, c);
}

FAKE_EXPORT ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, int dtype,
                                       ncclComm_t comm, CUstream s) {
  contribution c = {.kind = ROUND_ALL_GATHER, .dtype = dtype, .count = count};
  c.send = send;
  c.recv = recv;
  return enqueue(comm, s, c);
}

FAKE_EXPORT ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, int dtype,
                                           int op, ncclComm_t comm, CUstream s) {
  contribution c = {.kind = ROUND_REDUCE_SCATTER, .dtype = dtype, .op = op, .count = count};
  c.send = send;
  c.recv = recv;
  return enqueue(comm, s, c);
}

FAKE_EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, int dtype,
                                       int root, ncclComm_t comm, CUstream s) {
  if (comm && (root < 0 || root >= comm->q->nranks)) return INVALID_ARGUMENT;
  contribution c = {.kind = ROUND_BROADCAST, .dtype = dtype, .root = root, .count = count};
  c.send = send;
  c.recv = recv;
  return enqueue(comm, s, c);
}

/* One side of a message; pairs it with the other side when that came first. */
static ncclResult_t point_to_point(const void *send, void *recv, size_t count, int dtype, int peer,
                                   ncclComm_t comm, CUstream s) {
  if (!comm || !s || !type_size(dtype) || peer < 0 || peer >= comm->q->nranks)
    return INVALID_ARGUMENT;
  if (s->ctx != comm->ctx) return INVALID_ARGUMENT;
  int is_send = send != NULL;
  int src = is_send ? comm->rank : peer, dst = is_send ? peer : comm->rank;
  size_t bytes = count * type_size(dtype);
  pthread_mutex_lock(&fake_lock);
  follow_stream(s);
  clique *q = comm->q;
  uint64_t seq = is_send ? comm->sent[peer]++ : comm->received[peer]++;
  message *m = q->messages;
  while (m && !(m->src == src && m->dst == dst && m->seq == seq)) m = m->next;
  ncclResult_t r = SUCCESS;
  fake_work *w = fake_work_new();
  if (!w || fake_deps_add(&s->deps, w)) {
    r = SYSTEM_ERROR;
  } else if (m) {
    if (m->bytes != bytes) {
      fprintf(stderr, "fake NCCL: rank %d sends %zu bytes, rank %d receives %zu\n", src,
              is_send ? bytes : m->bytes, dst, is_send ? m->bytes : bytes);
      fake_work_finish(w, 1);
      fake_work_finish(is_send ? m->recv_work : m->send_work, 1);
      comm->async = INVALID_USAGE;
      if (q->members[peer]) q->members[peer]->async = INVALID_USAGE;
    } else {
      memcpy(is_send ? m->recv : recv, is_send ? send : m->send, bytes);
      fake_work_finish(w, 0);
      fake_work_finish(is_send ? m->recv_work : m->send_work, 0);
    }
    for (message **p = &q->messages; *p; p = &(*p)->next)
      if (*p == m) {
        *p = m->next;
        break;
      }
    fake_work_release(m->send_work);
    fake_work_release(m->recv_work);
    free(m);
  } else if ((m = calloc(1, sizeof *m))) {
    *m = (message){src, dst, seq, send, recv, bytes, NULL, NULL, q->messages};
    w->refs++;
    if (is_send)
      m->send_work = w;
    else
      m->recv_work = w;
    q->messages = m;
  } else {
    r = SYSTEM_ERROR;
  }
  fake_work_release(w);
  pthread_mutex_unlock(&fake_lock);
  return r;
}

FAKE_EXPORT ncclResult_t ncclSend(const void *send, size_t count, int dtype, int peer,
                                  ncclComm_t comm, CUstream s) {
  if (!send) return INVALID_ARGUMENT;
  return point_to_point(send, NULL, count, dtype, peer, comm, s);
}

FAKE_EXPORT ncclResult_t ncclRecv(void *recv, size_t count, int dtype, int peer, ncclComm_t comm,
                                  CUstream s) {
  if (!recv) return INVALID_ARGUMENT;
  return point_to_point(NULL, recv, count, dtype, peer, comm, s);
}

FAKE_EXPORT ncclResult_t ncclGroupStart(void) {
  group_depth++;
  return SUCCESS;
}

FAKE_EXPORT ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0) return INVALID_USAGE;
  if (--group_depth > 0) return SUCCESS;
  group_nstreams = 0;
  pthread_mutex_lock(&fake_lock);
  int failed = 0;
  for (int k = 0; k < group_waits.n; k++) {
    while (!group_waits.items[k]->done) pthread_cond_wait(&fake_cond, &fake_lock);
    failed |= group_waits.items[k]->error;
  }
  fake_deps_clear(&group_waits);
  free(group_waits.items);
  group_waits = (fake_deps){0};
  pthread_mutex_unlock(&fake_lock);
  return failed ? REMOTE_ERROR : SUCCESS;
}

FAKE_EXPORT const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case SUCCESS: return "no error";
  case SYSTEM_ERROR: return "unhandled system error (fake NCCL: out of memory)";
  case INVALID_ARGUMENT: return "invalid argument";
  case INVALID_USAGE: return "invalid usage (the ranks disagree on a call)";
  case REMOTE_ERROR: return "remote process exited or there was a network error";
  default: return "unknown result code";
  }
}
