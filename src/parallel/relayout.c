/* Re-laying an array whose blocks live on several processes by sending only
 * what each process lacks.
 *
 * Every process derives the same plan from the two layouts alone (meshes and
 * specs are global): for each receiving process r, each distinct block of
 * the new layout that r's devices hold, and each block of the old layout,
 * the box where the two overlap. The box comes from r itself when r holds a
 * replica of the old block (a local copy, nothing sent), else from the
 * lowest process holding one, so nothing is sent twice. Walking the pieces
 * in that order (r, new block position, old block position) gives sender
 * and receiver the same packing order, so one ALLTOALLV over every process
 * moves them with no headers. A plan in which nothing crosses processes
 * (the same answer everywhere) skips the exchange. */
#include "relayout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/distributed.h>

#include "../base/error.h"
#include "../base/hooks.h"
#include "device.h"
#include "dist.h"
#include "shards.h"

static int64_t bytes_sent;

int64_t jx_relayout_bytes_sent(void) { return __atomic_load_n(&bytes_sent, __ATOMIC_RELAXED); }

int jx_relayout_spans_processes(const jx_array *a) {
  return jx_array_shards(a) && jx_dist_active() &&
         !jx_shards_addressable_everywhere(jx_array_shards(a));
}

/* One box of the global array that process q sends to process r (q == r: a
 * local copy): the part of the old block at position ps (a first replica)
 * inside the new block at position pt. */
typedef struct {
  int q, r, ps, pt;
  int64_t start[JX_MAX_RANK];
  jx_shape box;
} piece;

typedef struct {
  const jx_sharding *s, *t;
  jx_shape g;
  size_t es;
  int P, me, ns, nt;
  int *proc_s, *proc_t; /* per position: the process owning its device */
  int *first_s;         /* per old position: the first replica of its block */
  int *lead_t;          /* per new position: the first position of the same process and block */
  int *holder;          /* per old first replica: the lowest process holding a replica */
  int *local_s;         /* per old first replica: a position of this process holding it, or -1 */
  char *holds;          /* holds[q * ns + f]: process q holds a replica of old block f */
  piece *mine;          /* the pieces this process sends or receives, in walk order */
  int nmine, cap;
  int64_t *scounts, *sdispls, *rcounts, *rdispls; /* bytes, per process */
  int64_t cross;                                  /* bytes crossing processes in the whole job */
} plan;

static void plan_free(plan *pl) {
  free(pl->proc_s), free(pl->proc_t), free(pl->first_s), free(pl->lead_t), free(pl->holder);
  free(pl->local_s), free(pl->holds), free(pl->mine), free(pl->scounts);
}

static int owner(const jx_mesh *m, int p) {
  return jx_device_process_index(jx_device_get(m->device[p]));
}

/* Fills the per-position tables; 0, or -1 out of memory. */
static int plan_tables(plan *pl, const jx_shards *sh) {
  int ns = pl->ns, nt = pl->nt, P = pl->P;
  pl->proc_s = malloc(sizeof(int) * (size_t)ns);
  pl->first_s = malloc(sizeof(int) * (size_t)ns);
  pl->holder = malloc(sizeof(int) * (size_t)ns);
  pl->local_s = malloc(sizeof(int) * (size_t)ns);
  pl->proc_t = malloc(sizeof(int) * (size_t)nt);
  pl->lead_t = malloc(sizeof(int) * (size_t)nt);
  pl->holds = calloc((size_t)P * (size_t)ns, 1);
  pl->scounts = calloc((size_t)P * 4, sizeof *pl->scounts);
  if (!pl->proc_s || !pl->first_s || !pl->holder || !pl->local_s || !pl->proc_t || !pl->lead_t ||
      !pl->holds || !pl->scounts)
    return -1;
  pl->sdispls = pl->scounts + P;
  pl->rcounts = pl->scounts + 2 * P;
  pl->rdispls = pl->scounts + 3 * P;
  const jx_mesh *ms = pl->s->mesh, *mt = pl->t->mesh;
  for (int p = 0; p < ns; p++) {
    pl->holder[p] = P;
    pl->local_s[p] = -1;
  }
  for (int p = 0; p < ns; p++) {
    int q = pl->proc_s[p] = owner(ms, p);
    int64_t c[JX_MAX_RANK]; /* the first replica: coordinates of unnamed axes set to 0 */
    jx_mesh_coords(ms, p, c);
    for (int ax = 0; ax < ms->ndim; ax++)
      if (!jx_sharding_uses_axis(pl->s, ax)) c[ax] = 0;
    int f = pl->first_s[p] = jx_mesh_position(ms, c);
    if (q < 0 || q >= P) continue;
    pl->holds[(size_t)q * (size_t)ns + (size_t)f] = 1;
    if (q < pl->holder[f]) pl->holder[f] = q;
    if (q == pl->me && pl->local_s[f] < 0 && sh->shard[p]) pl->local_s[f] = p;
  }
  for (int p = 0; p < nt; p++) {
    pl->proc_t[p] = owner(mt, p);
    int64_t sp[JX_MAX_RANK], sq[JX_MAX_RANK];
    jx_shape bp, bq;
    jx_sharding_block(pl->t, pl->g, p, sp, &bp);
    pl->lead_t[p] = p;
    for (int q = 0; q < p; q++) {
      if (pl->proc_t[q] != pl->proc_t[p] || pl->lead_t[q] != q) continue;
      jx_sharding_block(pl->t, pl->g, q, sq, &bq);
      if (!memcmp(sp, sq, sizeof *sp * (size_t)pl->g.rank)) {
        pl->lead_t[p] = q;
        break;
      }
    }
  }
  return 0;
}

/* The overlap of two boxes; 0 when empty. */
static int intersect(int rank, const int64_t *s0, jx_shape b0, const int64_t *s1, jx_shape b1,
                     int64_t *start, jx_shape *box) {
  box->rank = rank;
  for (int d = 0; d < rank; d++) {
    int64_t lo = s0[d] > s1[d] ? s0[d] : s1[d];
    int64_t e0 = s0[d] + b0.dims[d], e1 = s1[d] + b1.dims[d], hi = e0 < e1 ? e0 : e1;
    if (hi <= lo) return 0;
    start[d] = lo;
    box->dims[d] = hi - lo;
  }
  return 1;
}

/* Walks every piece of the job in the order both sides use; keeps the
 * pieces this process sends or receives and counts their bytes. 0, or -1
 * out of memory. */
static int plan_walk(plan *pl) {
  int rank = pl->g.rank;
  for (int r = 0; r < pl->P; r++)
    for (int pt = 0; pt < pl->nt; pt++) {
      if (pl->proc_t[pt] != r || pl->lead_t[pt] != pt) continue;
      int64_t st[JX_MAX_RANK];
      jx_shape bt;
      jx_sharding_block(pl->t, pl->g, pt, st, &bt);
      for (int ps = 0; ps < pl->ns; ps++) {
        if (pl->first_s[ps] != ps || pl->holder[ps] >= pl->P) continue;
        int64_t ss[JX_MAX_RANK];
        jx_shape bs;
        jx_sharding_block(pl->s, pl->g, ps, ss, &bs);
        piece x = {.r = r, .ps = ps, .pt = pt};
        if (!intersect(rank, st, bt, ss, bs, x.start, &x.box)) continue;
        x.q = pl->holds[(size_t)r * (size_t)pl->ns + (size_t)ps] ? r : pl->holder[ps];
        int64_t bytes = jx_shape_numel(x.box) * (int64_t)pl->es;
        if (x.q != r) pl->cross += bytes;
        if (x.q != pl->me && r != pl->me) continue;
        if (x.q == pl->me && r != pl->me) pl->scounts[r] += bytes;
        if (r == pl->me && x.q != pl->me) pl->rcounts[x.q] += bytes;
        if (pl->nmine == pl->cap) {
          int cap = pl->cap ? 2 * pl->cap : 16;
          piece *m = realloc(pl->mine, sizeof *m * (size_t)cap);
          if (!m) return -1;
          pl->mine = m;
          pl->cap = cap;
        }
        pl->mine[pl->nmine++] = x;
      }
    }
  for (int q = 1; q < pl->P; q++) {
    pl->sdispls[q] = pl->sdispls[q - 1] + pl->scounts[q - 1];
    pl->rdispls[q] = pl->rdispls[q - 1] + pl->rcounts[q - 1];
  }
  return 0;
}

/* Copies the box of shape box between two row-major arrays: from src
 * (shape ss, the box at src0) to dst (shape ds, the box at dst0). */
static void copy_box(char *dst, jx_shape ds, const int64_t *dst0, const char *src, jx_shape ss,
                     const int64_t *src0, jx_shape box, size_t es, int d, int64_t doff,
                     int64_t soff) {
  if (box.rank == 0) {
    memcpy(dst, src, es);
    return;
  }
  int64_t di = doff * ds.dims[d] + dst0[d], si = soff * ss.dims[d] + src0[d];
  if (d == box.rank - 1) {
    memcpy(dst + di * (int64_t)es, src + si * (int64_t)es, (size_t)box.dims[d] * es);
    return;
  }
  for (int64_t i = 0; i < box.dims[d]; i++)
    copy_box(dst, ds, dst0, src, ss, src0, box, es, d + 1, di + i, si + i);
}

/* x's box relative to the block at position p of sharding s. */
static void relative(const jx_sharding *s, jx_shape g, int p, const piece *x, int64_t *rel,
                     jx_shape *block) {
  int64_t b0[JX_MAX_RANK];
  jx_sharding_block(s, g, p, b0, block);
  for (int d = 0; d < g.rank; d++) rel[d] = x->start[d] - b0[d];
}

/* Packs what this process sends, exchanges, and builds the new blocks of
 * this process's positions into out[] (NULL where another's). */
static jx_status run_plan(plan *pl, jx_array *a, jx_array **out, const char *op) {
  const jx_shards *sh = jx_array_shards(a);
  int P = pl->P, me = pl->me;
  size_t es = pl->es;
  int64_t stotal = pl->sdispls[P - 1] + pl->scounts[P - 1];
  int64_t rtotal = pl->rdispls[P - 1] + pl->rcounts[P - 1];
  char *send = malloc((size_t)stotal + 1), *recv = malloc((size_t)rtotal + 1);
  int64_t *cursor = calloc((size_t)P, sizeof *cursor);
  jx_status st = send && recv && cursor
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory re-laying", op);
  /* this process's blocks are read on the host: a block a device backend
   * left in its device's memory is copied down here, once */
  for (int p = 0; p < sh->n && !st; p++)
    if (sh->shard[p]) st = jx_array_ready(sh->shard[p]);
  for (int i = 0; i < pl->nmine && !st; i++) { /* pack, in walk order within each receiver */
    const piece *x = &pl->mine[i];
    if (x->q != me || x->r == me) continue;
    int p = pl->local_s[x->ps];
    if (p < 0) {
      st = jx_error_set(JX_ERR_INTERNAL, "%s: process %d holds no shard it should send", op, me);
      break;
    }
    int64_t rel[JX_MAX_RANK];
    jx_shape block;
    relative(pl->s, pl->g, x->ps, x, rel, &block);
    jx_copy_block(jx_array_data(sh->shard[p]), send + pl->sdispls[x->r] + cursor[x->r], es, block,
                  rel, x->box, 1);
    cursor[x->r] += jx_shape_numel(x->box) * (int64_t)es;
  }
  if (!st && pl->cross) {
    char what[3 * JX_SPEC_CAP + JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
    snprintf(what, sizeof what, "re-laying %s from '%s' to '%s' across processes",
             jx_aval_str(a->dtype, pl->g, sb), pl->s->spec, pl->t->spec);
    double t0 = jx_debug_flags & JX_DEBUG_PROFILE ? jx_prof_now() : 0;
    {
      jx_mpi_op o = {.kind = JX_MPI_ALLTOALLV,
                     .send = send,
                     .recv = recv,
                     .scounts = pl->scounts,
                     .sdispls = pl->sdispls,
                     .rcounts = pl->rcounts,
                     .rdispls = pl->rdispls};
      char msg[JX_MPI_MSG] = "";
      st = jx_dist_run(jx_dist_world(), &o, 0, msg, sizeof msg);
      if (st) jx_error_set(st, "%s: %s: %s", op, what, msg);
    }
    if (!st) __atomic_fetch_add(&bytes_sent, stotal, __ATOMIC_RELAXED);
    if (!st && (jx_debug_flags & JX_DEBUG_PROFILE))
      jx_prof_collective("re-lay across processes", t0, jx_prof_now(), (double)stotal, "alltoallv",
                         pl->t->spec);
  }
  jx_scope_begin();
  for (int p = 0; p < pl->nt && !st; p++) { /* the new blocks */
    if (pl->proc_t[p] != me || pl->lead_t[p] != p) continue;
    int64_t start[JX_MAX_RANK];
    jx_shape block;
    jx_sharding_block(pl->t, pl->g, p, start, &block);
    jx_array *b = jx_array_alloc(a->dtype, block, a->weak);
    if (b->poisoned) st = jx_last_status();
    if (!st) out[p] = jx_keep(b);
  }
  for (int q = 0; q < P; q++) cursor[q] = 0;
  for (int i = 0; i < pl->nmine && !st; i++) { /* unpack and copy what is here already */
    const piece *x = &pl->mine[i];
    if (x->r != me) continue;
    int64_t rel[JX_MAX_RANK], rel_s[JX_MAX_RANK];
    jx_shape block, block_s;
    relative(pl->t, pl->g, x->pt, x, rel, &block);
    char *dst = jx_array_data(out[x->pt]);
    if (x->q != me) {
      jx_copy_block(dst, recv + pl->rdispls[x->q] + cursor[x->q], es, block, rel, x->box, 0);
      cursor[x->q] += jx_shape_numel(x->box) * (int64_t)es;
      continue;
    }
    int p = pl->local_s[x->ps];
    if (p < 0) {
      st = jx_error_set(JX_ERR_INTERNAL, "%s: process %d lacks a shard it should hold", op, me);
      break;
    }
    relative(pl->s, pl->g, x->ps, x, rel_s, &block_s);
    copy_box(dst, block, rel, jx_array_data(sh->shard[p]), block_s, rel_s, x->box, es, 0, 0, 0);
  }
  for (int p = 0; p < pl->nt && !st; p++) { /* replicas of a block on one process: copies */
    if (pl->proc_t[p] != me || pl->lead_t[p] == p) continue;
    jx_array *lead = out[pl->lead_t[p]], *b = jx_array_alloc(a->dtype, lead->shape, a->weak);
    if (b->poisoned) st = jx_last_status();
    if (st) break;
    size_t n = (size_t)jx_shape_numel(lead->shape) * es;
    if (n) memcpy(jx_array_data(b), jx_array_data(lead), n);
    out[p] = jx_keep(b);
  }
  jx_scope_end();
  if (st)
    for (int p = 0; p < pl->nt; p++) {
      if (out[p] && pl->proc_t[p] == me) jx_release(out[p]);
      if (pl->proc_t[p] == me) out[p] = NULL;
    }
  free(send), free(recv), free(cursor);
  return st;
}

jx_status jx_relayout(jx_array *a, const jx_sharding *t, jx_array **shard, const char *op) {
  const jx_shards *sh = jx_array_shards(a);
  plan pl = {.s = sh->sharding,
             .t = t,
             .g = a->shape,
             .es = jx_dtype_size(a->dtype),
             .P = jx_process_count(),
             .me = jx_process_index(),
             .ns = sh->n,
             .nt = t->mesh->ndev};
  jx_status st = JX_OK;
  if (plan_tables(&pl, sh) || plan_walk(&pl))
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory planning a re-laying", op);
  /* an error while planning skips the exchange: the other processes then fail
   * at its deadline naming this one */
  if (!st) st = run_plan(&pl, a, shard, op);
  plan_free(&pl);
  return st;
}
