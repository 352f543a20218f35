/* The TCP engine's collectives (mpi_plugin.h's run, over tcp_engine.h's
 * connections).
 *
 * Every step posts all of its messages at once and jx_tcp_transfer moves
 * them together: all-gather, all-to-all and broadcast are one step each
 * (every member sends its part straight to every other; no process forwards
 * another's data, so the bytes sent are those of a ring).
 *
 * Reductions give the same bits on every process, as the MPI plugin's do.
 * Small all-reduces (up to SMALL_BYTES) gather every member's buffer and
 * reduce them on each process in member order: each process computes the
 * same expression. Large ones, and reduce-scatter, use a ring: in n-1 steps
 * each member passes a block to the next, which adds its own; every element
 * of the result is computed by exactly one member, and an all-gather (ring
 * all-reduce) hands it to the others. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp_engine.h"

/* the jx_dtype numbers (jx/array.h), as the MPI plugin spells them */
enum { D_BOOL, D_I8, D_I16, D_I32, D_I64, D_U8, D_U16, D_U32, D_U64, D_F16, D_BF16, D_F32, D_F64 };
#define SMALL_BYTES ((size_t)64 << 10)

static const char *kind_name(int k) {
  static const char *const n[] = {"all_reduce", "all_gather", "broadcast",
                                  "barrier",    "all_to_all", "reduce_scatter"};
  return k >= 0 && k <= JX_MPI_REDUCE_SCATTER ? n[k] : "?";
}

static size_t elem_size(int dt) {
  switch (dt) {
  case D_BOOL:
  case D_I8:
  case D_U8: return 1;
  case D_I16:
  case D_U16: return 2;
  case D_I32:
  case D_U32:
  case D_F32: return 4;
  case D_I64:
  case D_U64:
  case D_F64: return 8;
  default: return 0; /* f16, bf16: the callers reduce them in f32 */
  }
}

/* Integers: sums and products wrap (computed unsigned, as two's complement
 * does); max and min compare the values. */
#define INT_LOOP(T, U)                                                                             \
  do {                                                                                             \
    const T *a = in;                                                                               \
    T *b = acc;                                                                                    \
    switch (op) {                                                                                  \
    case JX_MPI_SUM:                                                                               \
      for (size_t i = 0; i < n; i++) b[i] = (T)((U)a[i] + (U)b[i]);                                \
      break;                                                                                       \
    case JX_MPI_PROD:                                                                              \
      for (size_t i = 0; i < n; i++) b[i] = (T)((U)a[i] * (U)b[i]);                                \
      break;                                                                                       \
    case JX_MPI_MAX:                                                                               \
      for (size_t i = 0; i < n; i++) b[i] = a[i] > b[i] ? a[i] : b[i];                             \
      break;                                                                                       \
    default:                                                                                       \
      for (size_t i = 0; i < n; i++) b[i] = a[i] < b[i] ? a[i] : b[i];                             \
    }                                                                                              \
  } while (0)

/* Floats: max and min propagate NaN (XLA's semantics, the MPI plugin's). */
#define FLOAT_LOOP(T, MAXF, MINF)                                                                  \
  do {                                                                                             \
    const T *a = in;                                                                               \
    T *b = acc;                                                                                    \
    switch (op) {                                                                                  \
    case JX_MPI_SUM:                                                                               \
      for (size_t i = 0; i < n; i++) b[i] = a[i] + b[i];                                           \
      break;                                                                                       \
    case JX_MPI_PROD:                                                                              \
      for (size_t i = 0; i < n; i++) b[i] = a[i] * b[i];                                           \
      break;                                                                                       \
    case JX_MPI_MAX:                                                                               \
      for (size_t i = 0; i < n; i++)                                                               \
        b[i] = isnan(a[i]) || isnan(b[i]) ? a[i] + b[i] : MAXF(a[i], b[i]);                        \
      break;                                                                                       \
    default:                                                                                       \
      for (size_t i = 0; i < n; i++)                                                               \
        b[i] = isnan(a[i]) || isnan(b[i]) ? a[i] + b[i] : MINF(a[i], b[i]);                        \
    }                                                                                              \
  } while (0)

/* acc[i] = in[i] op acc[i] */
static void combine(int dtype, int op, const void *in, void *acc, size_t n) {
  switch (dtype) {
  case D_BOOL: /* or (sum, max), and (prod, min) */
    op = op == JX_MPI_SUM || op == JX_MPI_MAX ? JX_MPI_MAX : JX_MPI_MIN;
    INT_LOOP(uint8_t, uint32_t);
    break;
  case D_I8: INT_LOOP(int8_t, uint32_t); break;
  case D_I16: INT_LOOP(int16_t, uint32_t); break;
  case D_I32: INT_LOOP(int32_t, uint32_t); break;
  case D_I64: INT_LOOP(int64_t, uint64_t); break;
  case D_U8: INT_LOOP(uint8_t, uint32_t); break;
  case D_U16: INT_LOOP(uint16_t, uint32_t); break;
  case D_U32: INT_LOOP(uint32_t, uint32_t); break;
  case D_U64: INT_LOOP(uint64_t, uint64_t); break;
  case D_F32: FLOAT_LOOP(float, fmaxf, fminf); break;
  default: FLOAT_LOOP(double, fmax, fmin); break;
  }
}

typedef struct {
  jx_mpi_comm *c;
  const char *what;
  double deadline, timeout_s;
  char *msg;
  size_t cap;
} call;

static int transfer(call *k, tcp_xfer *x, int n) {
  return jx_tcp_transfer(k->c, x, n, k->deadline, k->timeout_s, k->what, k->msg, k->cap);
}

static int out_of_memory(call *k) {
  snprintf(k->msg, k->cap, "%s: out of memory", k->what);
  return 1;
}

/* Block q of every member (offset[q], len[q] bytes of buf) to every other:
 * buf holds this member's block at its place and gets the others'. */
static int gather_blocks(call *k, char *buf, const int64_t *offset, const int64_t *len) {
  jx_mpi_comm *c = k->c;
  int n = c->size, me = c->rank, m = 0;
  tcp_xfer *x = malloc(sizeof *x * 2 * (size_t)n);
  if (!x) return out_of_memory(k);
  for (int q = 0; q < n; q++) {
    if (q == me) continue;
    x[m++] = (tcp_xfer){q, 1, buf + offset[me], (size_t)len[me], 0};
    x[m++] = (tcp_xfer){q, 0, buf + offset[q], (size_t)len[q], 0};
  }
  int st = transfer(k, x, m);
  free(x);
  return st;
}

/* Ring reduce-scatter of work (count elements of es bytes) in the blocks
 * [edge[b], edge[b+1]): at step s member r sends block (r+shift-s) to r+1
 * and adds the block (r+shift-s-1) that r-1 sends into its own; after n-1
 * steps it holds block (r+shift-n+1) reduced over every member. */
static int ring_reduce_scatter(call *k, const jx_mpi_op *o, char *work, size_t es,
                               const size_t *edge, int shift) {
  jx_mpi_comm *c = k->c;
  int n = c->size, r = c->rank, right = (r + 1) % n, left = (r + n - 1) % n;
  size_t most = 0;
  for (int b = 0; b < n; b++)
    if (edge[b + 1] - edge[b] > most) most = edge[b + 1] - edge[b];
  char *tmp = malloc(most * es + 1);
  if (!tmp) return out_of_memory(k);
  int st = 0;
  for (int s = 0; s < n - 1 && !st; s++) {
    int sb = ((r + shift - s) % n + 2 * n) % n, rb = ((r + shift - s - 1) % n + 2 * n) % n;
    size_t rlen = edge[rb + 1] - edge[rb];
    tcp_xfer x[2] = {{right, 1, work + edge[sb] * es, (edge[sb + 1] - edge[sb]) * es, 0},
                     {left, 0, tmp, rlen * es, 0}};
    st = transfer(k, x, 2);
    if (!st) combine(o->dtype, o->op, tmp, work + edge[rb] * es, rlen);
  }
  free(tmp);
  return st;
}

static int allreduce(call *k, const jx_mpi_op *o) {
  jx_mpi_comm *c = k->c;
  size_t es = elem_size(o->dtype), count = o->count, bytes = count * es;
  int n = c->size, st = 0;
  if (!es) {
    snprintf(k->msg, k->cap, "all_reduce: dtype %d cannot be reduced over TCP", o->dtype);
    return 1;
  }
  char *buf = o->recv;
  if (o->send != o->recv && bytes) memcpy(buf, o->send, bytes);
  if (n == 1 || !count) return 0;
  if (bytes <= SMALL_BYTES || count < (size_t)n) { /* gather all, reduce in member order */
    char *all = malloc(bytes * (size_t)n);
    int64_t *offset = malloc(sizeof *offset * 2 * (size_t)n), *len = offset ? offset + n : NULL;
    if (!all || !offset) {
      free(all);
      free(offset);
      return out_of_memory(k);
    }
    for (int q = 0; q < n; q++) offset[q] = (int64_t)(bytes * (size_t)q), len[q] = (int64_t)bytes;
    memcpy(all + bytes * (size_t)c->rank, buf, bytes);
    st = gather_blocks(k, all, offset, len);
    if (!st) {
      memcpy(buf, all, bytes);
      for (int q = 1; q < n; q++) combine(o->dtype, o->op, all + bytes * (size_t)q, buf, count);
    }
    free(all);
    free(offset);
    return st;
  }
  size_t *edge = malloc(sizeof *edge * (size_t)(n + 1));
  if (!edge) return out_of_memory(k);
  for (int b = 0; b <= n; b++) edge[b] = (size_t)b * count / (size_t)n;
  st = ring_reduce_scatter(k, o, buf, es, edge, 0); /* member r holds block r+1 */
  int r = c->rank, right = (r + 1) % n, left = (r + n - 1) % n;
  for (int s = 0; s < n - 1 && !st; s++) { /* ring all-gather of the reduced blocks */
    int sb = (r + 1 - s + n) % n, rb = (r - s + n) % n;
    tcp_xfer x[2] = {{right, 1, buf + edge[sb] * es, (edge[sb + 1] - edge[sb]) * es, 0},
                     {left, 0, buf + edge[rb] * es, (edge[rb + 1] - edge[rb]) * es, 0}};
    st = transfer(k, x, 2);
  }
  free(edge);
  return st;
}

static int reduce_scatter(call *k, const jx_mpi_op *o) {
  jx_mpi_comm *c = k->c;
  size_t es = elem_size(o->dtype);
  int n = c->size;
  if (!es) {
    snprintf(k->msg, k->cap, "reduce_scatter: dtype %d cannot be reduced over TCP", o->dtype);
    return 1;
  }
  size_t *edge = malloc(sizeof *edge * (size_t)(n + 1));
  if (!edge) return out_of_memory(k);
  edge[0] = 0;
  for (int q = 0; q < n; q++) edge[q + 1] = edge[q] + (size_t)o->rcounts[q];
  const char *in = o->send ? o->send : o->recv;
  char *work = malloc(edge[n] * es + 1);
  if (!work) {
    free(edge);
    return out_of_memory(k);
  }
  memcpy(work, in, edge[n] * es);
  int st = ring_reduce_scatter(k, o, work, es, edge, -1); /* member r holds block r */
  size_t mine = edge[c->rank + 1] - edge[c->rank];
  if (!st && mine) memcpy(o->recv, work + edge[c->rank] * es, mine * es);
  free(work);
  free(edge);
  return st;
}

static int allgatherv(call *k, const jx_mpi_op *o) {
  int me = k->c->rank;
  char *recv = o->recv;
  if (o->send && o->rcounts[me]) memmove(recv + o->rdispls[me], o->send, (size_t)o->rcounts[me]);
  return gather_blocks(k, recv, o->rdispls, o->rcounts);
}

static int alltoallv(call *k, const jx_mpi_op *o) {
  jx_mpi_comm *c = k->c;
  int n = c->size, me = c->rank, m = 0;
  const char *send = o->send;
  char *recv = o->recv;
  if (o->scounts[me]) memmove(recv + o->rdispls[me], send + o->sdispls[me], (size_t)o->scounts[me]);
  tcp_xfer *x = malloc(sizeof *x * 2 * (size_t)n);
  if (!x) return out_of_memory(k);
  for (int q = 0; q < n; q++) {
    if (q == me) continue;
    x[m++] = (tcp_xfer){q, 1, (char *)send + o->sdispls[q], (size_t)o->scounts[q], 0};
    x[m++] = (tcp_xfer){q, 0, recv + o->rdispls[q], (size_t)o->rcounts[q], 0};
  }
  int st = transfer(k, x, m);
  free(x);
  return st;
}

static int bcast(call *k, const jx_mpi_op *o) {
  jx_mpi_comm *c = k->c;
  int n = c->size, me = c->rank, m = 0;
  if (me != o->root) {
    tcp_xfer x = {o->root, 0, o->recv, o->count, 0};
    return transfer(k, &x, 1);
  }
  tcp_xfer *x = malloc(sizeof *x * (size_t)n);
  if (!x) return out_of_memory(k);
  for (int q = 0; q < n; q++)
    if (q != me) x[m++] = (tcp_xfer){q, 1, o->recv, o->count, 0};
  int st = transfer(k, x, m);
  free(x);
  return st;
}

/* every member sends one byte to every other: whoever has them all knows
 * that every member arrived */
static int barrier(call *k) {
  int n = k->c->size;
  char *b = calloc((size_t)n, 1);
  int64_t *offset = malloc(sizeof *offset * 2 * (size_t)n);
  if (!b || !offset) {
    free(b);
    free(offset);
    return out_of_memory(k);
  }
  for (int q = 0; q < n; q++) offset[q] = q, offset[n + q] = 1;
  int st = gather_blocks(k, b, offset, offset + n);
  free(b);
  free(offset);
  return st;
}

int jx_tcp_run(jx_mpi_comm *c, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap) {
  pthread_mutex_lock(&c->mu);
  if (c->broken) {
    snprintf(msg, cap, "the TCP communicator is unusable after an earlier failure: %.700s",
             c->reason);
    pthread_mutex_unlock(&c->mu);
    return 1;
  }
  call k = {c, kind_name(op->kind), jx_tcp_now() + timeout_s, timeout_s, msg, cap};
  int st;
  switch (op->kind) {
  case JX_MPI_ALLREDUCE: st = allreduce(&k, op); break;
  case JX_MPI_ALLGATHERV: st = allgatherv(&k, op); break;
  case JX_MPI_BCAST: st = bcast(&k, op); break;
  case JX_MPI_BARRIER: st = barrier(&k); break;
  case JX_MPI_ALLTOALLV: st = alltoallv(&k, op); break;
  case JX_MPI_REDUCE_SCATTER: st = reduce_scatter(&k, op); break;
  default: snprintf(msg, cap, "unknown collective %d", op->kind), st = 1;
  }
  if (st) { /* the byte streams are out of step now: nothing more on c */
    c->broken = 1;
    snprintf(c->reason, sizeof c->reason, "%s", msg);
    jx_tcp_note_failure();
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}
