/* The hierarchical collectives engine: a group whose devices belong to
 * several processes.
 *
 * A round: this process's ranks publish their calls and meet at a barrier
 * of a local communicator (shared memory, with the deadline); then one of
 * them, the leader (the lowest device id, so every ordering of the same
 * axes has the same leader and the group's MPI communicator sees one thread
 * per process), does the process's part: it combines the local ranks' data
 * (reducing locally first), exchanges it with the other processes over MPI
 * (on the MPI plugin's thread, with the deadline), and writes every local
 * rank's result straight into its buffer; a closing barrier releases the
 * others, which read the leader's status.
 *
 * Reductions combine the local ranks first, then the processes (in MPI's
 * order), so sums may round differently from a group inside one process,
 * but every rank gets the same bits. f16 and bf16 reduce in f32 across the
 * processes and round once at the end. */
#include <stdlib.h>
#include <string.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "comm.h"
#include "dist.h"

typedef struct {
  int n, nl, leader;  /* ranks; local ranks; the leader's local index */
  int *dev, *proc;    /* per rank */
  int *lrank, *lidx;  /* local index -> rank; rank -> local index or -1 */
  int np, *procs;     /* the group's processes, ascending (= their MPI ranks) */
  int *pidx;          /* per rank: its process's MPI rank */
  int *porder, *ppos; /* ranks by (process, rank); rank -> place there */
  int *pcount;        /* ranks per MPI rank */
  int me, pfirst;     /* this process's MPI rank; its first place in porder */
  jx_comm *local;
  struct jx_mpi_comm *mc;
  const jx_comm_op **slot; /* per local index: the call of this round */
  char *stage;
  size_t stage_cap;
  int stage_lost; /* a failed MPI call may still write into stage: never reuse it */
  jx_status st;
  char msg[1024];
  char label[256];
} hier;

static void hier_destroy(void *self) {
  hier *h = self;
  jx_comm_release(h->local);
  if (!h->stage_lost) free(h->stage);
  free(h->dev);
  free(h->slot);
  free(h);
}

static char *stage(hier *h, size_t bytes) {
  if (bytes <= h->stage_cap && !h->stage_lost) return h->stage;
  if (!h->stage_lost) free(h->stage);
  h->stage_lost = 0;
  h->stage = malloc(bytes ? bytes : 1);
  h->stage_cap = h->stage ? bytes : 0;
  return h->stage;
}

static int half(jx_dtype dt) { return dt == JX_F16 || dt == JX_BF16; }
static float load_half(jx_dtype dt, const void *p, size_t i) {
  uint16_t v = ((const uint16_t *)p)[i];
  return dt == JX_F16 ? jx_f16_to_f32(v) : jx_bf16_to_f32(v);
}
static void store_half(jx_dtype dt, void *p, size_t i, float x) {
  ((uint16_t *)p)[i] = dt == JX_F16 ? jx_f32_to_f16(x) : jx_f32_to_bf16(x);
}

/* acc[0..len) (f32) = op over the local ranks' send + off (f16/bf16) */
static void reduce_half_local(hier *h, jx_reduce_op op, size_t off, size_t len, float *acc) {
  jx_dtype dt = h->slot[0]->dt;
  for (size_t i = 0; i < len; i++) {
    float a = load_half(dt, h->slot[0]->send, off + i);
    for (int l = 1; l < h->nl; l++) {
      float b = load_half(dt, h->slot[l]->send, off + i);
      switch (op) {
      case JX_REDUCE_SUM: a += b; break;
      case JX_REDUCE_PROD: a *= b; break;
      case JX_REDUCE_MAX: a = a != a || b != b ? a + b : a > b ? a : b; break;
      case JX_REDUCE_MIN: a = a != a || b != b ? a + b : a < b ? a : b; break;
      }
    }
    acc[i] = a;
  }
}

static jx_status mpi(hier *h, const jx_mpi_op *o, double timeout_s, char *msg, size_t cap) {
  jx_status st = jx_dist_run(h->mc, o, timeout_s, msg, cap);
  if (st) h->stage_lost = 1;
  return st;
}

/* buf[0..len) (dt, or f32 for f16/bf16) = the local ranks' send[off..off+len) reduced */
static jx_status reduce_local(hier *h, size_t off, size_t len, void *buf, char *msg, size_t cap) {
  const jx_comm_op *o = h->slot[h->leader];
  size_t es = jx_dtype_size(o->dt);
  if (half(o->dt)) {
    reduce_half_local(h, o->op, off, len, buf);
    return JX_OK;
  }
  if (h->nl == 1) {
    const char *src = (const char *)h->slot[0]->send + off * es;
    if (src != buf) memcpy(buf, src, len * es);
    return JX_OK;
  }
  const char **srcs = malloc(sizeof *srcs * (size_t)h->nl);
  if (!srcs) {
    snprintf(msg, cap, "out of memory");
    return JX_ERR_OUT_OF_MEMORY;
  }
  for (int l = 0; l < h->nl; l++) srcs[l] = (const char *)h->slot[l]->send + off * es;
  char *dst = buf;
  jx_comm_reduce_range(o->dt, o->op, srcs, h->nl, &dst, 1, len, 0);
  free(srcs);
  return JX_OK;
}

/* The reduction of len elements at offset off of every rank's send, into buf
 * (dt, or f32 for f16/bf16): local first, then over MPI. */
static jx_status reduce_all(hier *h, size_t off, size_t len, void *buf, double t, char *msg,
                            size_t cap) {
  const jx_comm_op *o = h->slot[h->leader];
  jx_mpi_op m = {.kind = JX_MPI_ALLREDUCE,
                 .dtype = half(o->dt) ? JX_F32 : o->dt,
                 .op = (int)o->op,
                 .count = len,
                 .send = buf,
                 .recv = buf};
  jx_status st = reduce_local(h, off, len, buf, msg, cap);
  return st ? st : mpi(h, &m, t, msg, cap);
}

/* Writes block `from` of the reduced buffer (dt or f32) to dst as dt. */
static void put_result(jx_dtype dt, const void *red, size_t from, size_t len, void *dst) {
  if (half(dt)) {
    const float *f = red;
    for (size_t i = 0; i < len; i++) store_half(dt, dst, i, f[from + i]);
  } else {
    size_t es = jx_dtype_size(dt);
    if ((const char *)red + from * es != dst) memcpy(dst, (const char *)red + from * es, len * es);
  }
}

static jx_status leader_work(hier *h, double t, char *msg, size_t cap) {
  const jx_comm_op *o = h->slot[h->leader];
  for (int l = 0; l < h->nl; l++) {
    const jx_comm_op *b = h->slot[l];
    if (b->kind != o->kind || b->count != o->count || b->dt != o->dt || b->op != o->op ||
        b->root != o->root) {
      snprintf(msg, cap,
               "the ranks called different operations (ranks %d and %d, devices %d "
               "and %d)",
               h->lrank[h->leader], h->lrank[l], h->dev[h->lrank[h->leader]], h->dev[h->lrank[l]]);
      return JX_ERR_INVALID_ARGUMENT;
    }
  }
  size_t es = jx_dtype_size(o->dt), cnt = o->count, bytes = cnt * es;
  size_t wes = half(o->dt) ? 4 : es; /* working element size */
  int n = h->n;
  switch (o->kind) {
  case JX_COMM_BARRIER: {
    jx_mpi_op m = {.kind = JX_MPI_BARRIER};
    return mpi(h, &m, t, msg, cap);
  }
  case JX_COMM_ALL_REDUCE: {
    /* the leader's recv is the working buffer unless f16/bf16 */
    void *buf = half(o->dt) ? stage(h, cnt * 4) : o->recv;
    if (!buf) break;
    jx_status st = reduce_all(h, 0, cnt, buf, t, msg, cap);
    if (st) return st;
    for (int l = 0; l < h->nl; l++)
      if (l != h->leader || half(o->dt)) put_result(o->dt, buf, 0, cnt, h->slot[l]->recv);
    return JX_OK;
  }
  case JX_COMM_REDUCE_SCATTER: {
    /* local reduction of every block, laid out by process (porder), so that process i's
     * blocks are contiguous; MPI reduce-scatter in place gives this process its blocks */
    size_t mine = (size_t)h->pcount[h->me] * cnt;
    int64_t *rc = malloc(sizeof *rc * (size_t)h->np);
    char *buf = rc ? stage(h, (size_t)n * cnt * wes) : NULL;
    int fits = 1;
    for (int i = 0; i < h->np && rc; i++) {
      rc[i] = (int64_t)((size_t)h->pcount[i] * cnt);
      fits &= (size_t)h->pcount[i] * cnt <= 0x7fffffff;
    }
    if (!buf) {
      free(rc);
      break;
    }
    jx_status st = JX_OK;
    if (!fits) { /* beyond MPI's int counts: the whole reduction, then each rank's block */
      free(rc);
      st = reduce_all(h, 0, (size_t)n * cnt, buf, t, msg, cap);
      if (st) return st;
      for (int l = 0; l < h->nl; l++)
        put_result(o->dt, buf, (size_t)h->lrank[l] * cnt, cnt, h->slot[l]->recv);
      return JX_OK;
    }
    for (int k = 0; k < n && !st; k++)
      st = reduce_local(h, (size_t)h->porder[k] * cnt, cnt, buf + (size_t)k * cnt * wes, msg, cap);
    jx_mpi_op m = {.kind = JX_MPI_REDUCE_SCATTER,
                   .dtype = half(o->dt) ? JX_F32 : o->dt,
                   .op = (int)o->op,
                   .count = mine,
                   .send = NULL,
                   .recv = buf,
                   .rcounts = rc};
    if (!st) st = mpi(h, &m, t, msg, cap);
    free(rc);
    if (st) return st;
    /* this process's blocks arrive in rank order (porder within the process) */
    for (int l = 0; l < h->nl; l++) {
      int q = h->lrank[l];
      put_result(o->dt, buf, (size_t)(h->ppos[q] - h->pfirst) * cnt, cnt, h->slot[l]->recv);
    }
    return JX_OK;
  }
  case JX_COMM_ALL_GATHER: {
    char *buf = stage(h, (size_t)n * bytes);
    if (!buf) break;
    int64_t *v = malloc(sizeof *v * 2 * (size_t)h->np);
    if (!v) break;
    for (int i = 0, at = 0; i < h->np; at += h->pcount[i++]) {
      v[i] = (int64_t)((size_t)h->pcount[i] * bytes);
      v[h->np + i] = (int64_t)((size_t)at * bytes);
    }
    for (int l = 0; l < h->nl; l++)
      memcpy(buf + (size_t)h->ppos[h->lrank[l]] * bytes, h->slot[l]->send, bytes);
    jx_mpi_op m = {
        .kind = JX_MPI_ALLGATHERV, .send = NULL, .recv = buf, .rcounts = v, .rdispls = v + h->np};
    jx_status st = mpi(h, &m, t, msg, cap);
    free(v);
    if (st) return st;
    for (int l = 0; l < h->nl; l++)
      for (int q = 0; q < n; q++)
        memcpy((char *)h->slot[l]->recv + (size_t)q * bytes, buf + (size_t)h->ppos[q] * bytes,
               bytes);
    return JX_OK;
  }
  case JX_COMM_BROADCAST: {
    char *buf = o->recv; /* the leader's buffer carries the data */
    int root_local = h->lidx[o->root];
    if (root_local >= 0 && root_local != h->leader) memcpy(buf, h->slot[root_local]->recv, bytes);
    jx_mpi_op m = {.kind = JX_MPI_BCAST, .root = h->pidx[o->root], .count = bytes, .recv = buf};
    jx_status st = mpi(h, &m, t, msg, cap);
    if (st) return st;
    for (int l = 0; l < h->nl; l++)
      if (l != h->leader && l != root_local) memcpy(h->slot[l]->recv, buf, bytes);
    return JX_OK;
  }
  case JX_COMM_ALL_TO_ALL:
  case JX_COMM_PERMUTE: {
    /* to process i: for each local rank (ascending), the blocks it sends to ranks of i
     * (all_to_all: every rank of i, ascending; permute: its dst); the receiver reads them
     * in the same order */
    int a2a = o->kind == JX_COMM_ALL_TO_ALL;
    size_t total = a2a ? (size_t)h->nl * (size_t)n * bytes : (size_t)h->nl * bytes;
    char *buf = stage(h, 2 * total);
    int64_t *v = malloc(sizeof *v * 4 * (size_t)h->np);
    if (!buf || !v) {
      free(v);
      break;
    }
    char *sb = buf, *rb = buf + total;
    size_t so = 0, ro = 0;
    for (int i = 0; i < h->np; i++) {
      v[2 * h->np + i] = (int64_t)so;
      for (int l = 0; l < h->nl; l++) {
        const jx_comm_op *x = h->slot[l];
        if (a2a) {
          for (int q = 0; q < n; q++)
            if (h->pidx[q] == i) {
              memcpy(sb + so, (const char *)x->send + (size_t)q * bytes, bytes);
              so += bytes;
            }
        } else if (x->dst >= 0 && h->pidx[x->dst] == i) {
          memcpy(sb + so, x->send, bytes);
          so += bytes;
        }
      }
      v[i] = (int64_t)so - v[2 * h->np + i];
      /* receive: a2a: pcount[i] senders x nl local ranks; permute: local ranks whose src is
       * in i, in the order of their src */
      size_t r = a2a ? (size_t)h->pcount[i] * (size_t)h->nl * bytes : 0;
      if (!a2a)
        for (int l = 0; l < h->nl; l++)
          if (h->slot[l]->src >= 0 && h->pidx[h->slot[l]->src] == i) r += bytes;
      v[3 * h->np + i] = (int64_t)ro;
      v[h->np + i] = (int64_t)r;
      ro += r;
    }
    jx_mpi_op m = {.kind = JX_MPI_ALLTOALLV,
                   .send = sb,
                   .recv = rb,
                   .scounts = v,
                   .sdispls = v + 2 * h->np,
                   .rcounts = v + h->np,
                   .rdispls = v + 3 * h->np};
    jx_status st = mpi(h, &m, t, msg, cap);
    if (!st) {
      for (int i = 0; i < h->np; i++) {
        const char *at = rb + v[3 * h->np + i];
        if (a2a) {
          for (int k = 0; k < n; k++) { /* senders of process i, ascending (porder) */
            int q = h->porder[k];
            if (h->pidx[q] != i) continue;
            for (int l = 0; l < h->nl; l++) {
              memcpy((char *)h->slot[l]->recv + (size_t)q * bytes, at, bytes);
              at += bytes;
            }
          }
        } else {
          for (int q = 0; q < n; q++) /* by src, ascending */
            for (int l = 0; l < h->nl; l++)
              if (h->slot[l]->src == q && h->pidx[q] == i) {
                memcpy(h->slot[l]->recv, at, bytes);
                at += bytes;
              }
        }
      }
      if (!a2a)
        for (int l = 0; l < h->nl; l++)
          if (h->slot[l]->src < 0) memset(h->slot[l]->recv, 0, bytes);
    }
    free(v);
    return st;
  }
  }
  snprintf(msg, cap, "out of memory");
  return JX_ERR_OUT_OF_MEMORY;
}

static jx_status hier_run(void *self, int rank, const jx_comm_op *op, double t, char *msg,
                          size_t cap) {
  hier *h = self;
  int l = h->lidx[rank];
  if (l < 0) {
    snprintf(msg, cap, "%s: rank %d is device %d, which belongs to process %d, not this one",
             h->label, rank, h->dev[rank], h->proc[rank]);
    return JX_ERR_INVALID_ARGUMENT;
  }
  if (t <= 0) t = jx_dist_timeout();
  h->slot[l] = op;
  /* the only local rank needs no meeting: it does the process's part at once */
  jx_status st = h->nl == 1 ? JX_OK : jx_comm_barrier(h->local, l, t);
  if (st) {
    snprintf(msg, cap, "%s", jx_last_error());
    return st;
  }
  if (l == h->leader) {
    static const char *const kinds[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                                        "permute",    "broadcast",      "barrier"};
    char m[900]; /* written on failure only: zeroing it all showed in a 1 KiB all-reduce */
    m[0] = 0;
    h->st = leader_work(h, t, m, sizeof m);
    /* "all_reduce on mesh axis 'i' (4 ranks, processes 0,1): all_reduce over MPI ..." */
    if (h->st)
      snprintf(h->msg, sizeof h->msg, "%s on %s (%d ranks on %d processes): %s", kinds[op->kind],
               h->label, h->n, h->np, m);
  }
  /* the others wait for the leader, whose MPI part has its own deadline */
  if (h->nl > 1) st = jx_comm_barrier(h->local, l, l == h->leader ? t : 2 * t + 10);
  if (st) {
    snprintf(msg, cap, "%s", jx_last_error());
    return st;
  }
  if (h->st) snprintf(msg, cap, "%s", h->msg);
  return h->st;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

jx_comm *jx_comm_hier_create(int n, const char *label, const int *device_ids,
                             const int *device_process, int me, struct jx_mpi_comm *mc) {
  hier *h = calloc(1, sizeof *h);
  /* one block for the int tables: dev, proc, lrank, lidx, procs, pidx, porder, ppos, pcount */
  int *t = h ? calloc((size_t)n * 9, sizeof *t) : NULL;
  if (!t) {
    free(h);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory making a communicator for %s", label);
    return NULL;
  }
  h->n = n;
  h->mc = mc;
  snprintf(h->label, sizeof h->label, "%s", label);
  h->dev = t;
  h->proc = t + n;
  h->lrank = t + 2 * n;
  h->lidx = t + 3 * n;
  h->procs = t + 4 * n;
  h->pidx = t + 5 * n;
  h->porder = t + 6 * n;
  h->ppos = t + 7 * n;
  h->pcount = t + 8 * n;
  memcpy(h->dev, device_ids, sizeof *t * (size_t)n);
  memcpy(h->proc, device_process, sizeof *t * (size_t)n);
  for (int r = 0; r < n; r++) {
    h->lidx[r] = -1;
    if (h->proc[r] == me) {
      if (!h->nl || h->dev[r] < h->dev[h->lrank[h->leader]]) h->leader = h->nl;
      h->lidx[r] = h->nl;
      h->lrank[h->nl++] = r;
    }
  }
  memcpy(h->procs, h->proc, sizeof *t * (size_t)n);
  qsort(h->procs, (size_t)n, sizeof *t, cmp_int);
  for (int r = 0; r < n; r++)
    if (!h->np || h->procs[h->np - 1] != h->procs[r]) h->procs[h->np++] = h->procs[r];
  for (int r = 0; r < n; r++)
    for (int i = 0; i < h->np; i++)
      if (h->procs[i] == h->proc[r]) {
        h->pidx[r] = i;
        h->pcount[i]++;
      }
  int k = 0;
  for (int i = 0; i < h->np; i++)
    for (int r = 0; r < n; r++)
      if (h->pidx[r] == i) {
        if (h->proc[r] == me && (!k || h->pidx[h->porder[k - 1]] != i)) h->pfirst = k;
        h->ppos[r] = k;
        h->porder[k++] = r;
      }
  for (int i = 0; i < h->np; i++)
    if (h->procs[i] == me) h->me = i;
  int *ldev = malloc(sizeof *ldev * (size_t)(h->nl ? h->nl : 1));
  h->slot = calloc((size_t)(h->nl ? h->nl : 1), sizeof *h->slot);
  if (ldev)
    for (int l = 0; l < h->nl; l++) ldev[l] = h->dev[h->lrank[l]];
  char llabel[300];
  snprintf(llabel, sizeof llabel, "%s (this process's part)", label);
  h->local = ldev && h->slot && h->nl ? jx_comm_local_create(h->nl, llabel, ldev) : NULL;
  free(ldev);
  if (!h->local) {
    hier_destroy(h);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory making a communicator for %s", label);
    return NULL;
  }
  jx_comm_engine e = {h, hier_run, hier_destroy};
  return jx_comm_engine_create(n, label, device_ids, e);
}
