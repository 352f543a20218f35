/* The NCCL engine (nccl_engine.h): the world communicator, the mesh axes'
 * communicators by ncclCommSplit, and the collectives on the communication
 * streams with the deadline of cuda_nccl.h. */
#include "nccl_engine.h"

#include <jx/distributed.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../parallel/dist.h"
#include "../parallel/mesh.h"
#include "cuda_nccl.h"

/* One device's communicator over a set of axes. */
typedef struct {
  ncclComm_t comm; /* NULL: the device is not in the mesh, or a deadline aborted it */
  int rank, aborted;
} axis_comm;

struct jx_nccl_axes {
  jx_nccl_engine *engine;
  jx_mesh *mesh; /* retained */
  int naxes, axis[JX_MAX_RANK];
  int size;
  char label[64 + JX_MAX_RANK * (JX_MESH_NAME_CAP + 4)]; /* "mesh axes 'data', 'model'" */
  char names[JX_MAX_RANK * (JX_MESH_NAME_CAP + 1)];      /* "data,model": NCCL's messages */
  axis_comm *local;                                      /* per device of the engine */
  jx_nccl_axes *next;
};

struct jx_nccl_engine {
  const jx_nccl_api *nccl;
  int n, world_size, world_offset;
  jx_cuda_device **dev;
  ncclComm_t *world;
  CUevent *ready, *done; /* per device: compute -> communication, and back */
  jx_nccl_axes *axes;
};

static jx_status nccl_check(const jx_nccl_api *nccl, ncclResult_t r, const char *call,
                            int ordinal) {
  if (r == JX_NCCL_SUCCESS) return JX_OK;
  if (ordinal >= 0)
    return jx_error_set(JX_ERR_INTERNAL, "NCCL: %s on CUDA device %d: %s", call, ordinal,
                        nccl->GetErrorString(r));
  return jx_error_set(JX_ERR_INTERNAL, "NCCL: %s: %s", call, nccl->GetErrorString(r));
}

/* ---- the world ---- */

/* This process's place in the world, and the world's unique id: local when
 * alone, else device counts all-gathered and process 0's id broadcast over
 * jx's distributed layer. */
static jx_status meet_the_world(jx_nccl_engine *e, ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  if (!jx_dist_active()) {
    e->world_size = e->n;
    e->world_offset = 0;
    return nccl_check(e->nccl, e->nccl->GetUniqueId(id), "ncclGetUniqueId", -1);
  }
  int procs = jx_process_count(), me = jx_process_index();
  int *counts = calloc((size_t)procs, sizeof *counts);
  int64_t *rcounts = calloc((size_t)procs, sizeof *rcounts);
  int64_t *rdispls = calloc((size_t)procs, sizeof *rdispls);
  jx_status st = JX_OK;
  char msg[JX_MPI_MSG] = "";
  if (!counts || !rcounts || !rdispls) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory");
  for (int q = 0; q < procs && !st; q++) {
    rcounts[q] = (int64_t)sizeof(int);
    rdispls[q] = q * (int64_t)sizeof(int);
  }
  if (!st) {
    jx_mpi_op op = {.kind = JX_MPI_ALLGATHERV, .dtype = JX_U8, .send = &e->n, .recv = counts};
    op.rcounts = rcounts;
    op.rdispls = rdispls;
    st = jx_dist_run(jx_dist_world(), &op, 0, msg, sizeof msg);
    if (st)
      jx_error_set(st, "jx_nccl_engine_create: gathering the processes' device counts: %s", msg);
  }
  if (!st) {
    e->world_size = e->world_offset = 0;
    for (int q = 0; q < procs; q++) {
      if (q < me) e->world_offset += counts[q];
      e->world_size += counts[q];
    }
    if (me == 0) st = nccl_check(e->nccl, e->nccl->GetUniqueId(id), "ncclGetUniqueId", -1);
  }
  if (!st) {
    /* should process 0's ncclGetUniqueId fail, it skips the broadcast and
     * the others' deadline names it */
    jx_mpi_op op = {.kind = JX_MPI_BCAST, .dtype = JX_U8, .root = 0, .count = sizeof *id};
    op.recv = id;
    st = jx_dist_run(jx_dist_world(), &op, 0, msg, sizeof msg);
    if (st)
      jx_error_set(st, "jx_nccl_engine_create: broadcasting NCCL's unique id from process 0: %s",
                   msg);
  }
  free(counts);
  free(rcounts);
  free(rdispls);
  return st;
}

static jx_status make_world(jx_nccl_engine *e) {
  ncclUniqueId id;
  jx_status st = meet_the_world(e, &id);
  if (st) return st;
  /* one thread, several devices: NCCL needs the ranks' inits in one group */
  const jx_nccl_api *nccl = e->nccl;
  nccl->GroupStart();
  for (int k = 0; k < e->n && !st; k++) {
    st = jx_cuda_device_make_current(e->dev[k]);
    if (!st)
      st =
          nccl_check(nccl, nccl->CommInitRank(&e->world[k], e->world_size, id, e->world_offset + k),
                     "ncclCommInitRank", e->dev[k]->info.ordinal);
  }
  ncclResult_t r = nccl->GroupEnd();
  if (!st) st = nccl_check(nccl, r, "ncclGroupEnd (making the world communicator)", -1);
  return st;
}

static void destroy_comm(const jx_nccl_api *nccl, ncclComm_t c) {
  if (c) nccl->CommDestroy(c);
}

void jx_nccl_engine_destroy(jx_nccl_engine *e) {
  if (!e) return;
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  while (e->axes) {
    jx_nccl_axes *a = e->axes;
    e->axes = a->next;
    for (int k = 0; k < e->n; k++) destroy_comm(e->nccl, a->local[k].comm);
    jx_mesh_release(a->mesh);
    free(a->local);
    free(a);
  }
  for (int k = 0; k < e->n; k++) {
    if (e->world) destroy_comm(e->nccl, e->world[k]);
    if (e->dev[k] && !jx_cuda_device_make_current(e->dev[k])) {
      if (e->ready[k]) cu->EventDestroy(e->ready[k]);
      if (e->done[k]) cu->EventDestroy(e->done[k]);
    }
  }
  free(e->world);
  free(e->ready);
  free(e->done);
  free(e->dev);
  free(e);
}

jx_status jx_nccl_engine_create(const int *ordinals, int n, jx_nccl_engine **out) {
  *out = NULL;
  const jx_nccl_api *nccl = jx_nccl();
  if (!nccl)
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "jx_nccl_engine_create: %s", jx_nccl_load_error());
  if (n < 1 || !ordinals)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_nccl_engine_create: %d devices (a world needs at least one)", n);
  jx_nccl_engine *e = calloc(1, sizeof *e);
  if (!e) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_nccl_engine_create: out of memory");
  e->nccl = nccl;
  e->n = n;
  e->dev = calloc((size_t)n, sizeof *e->dev);
  e->world = calloc((size_t)n, sizeof *e->world);
  e->ready = calloc((size_t)n, sizeof *e->ready);
  e->done = calloc((size_t)n, sizeof *e->done);
  jx_status st = JX_OK;
  if (!e->dev || !e->world || !e->ready || !e->done)
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_nccl_engine_create: out of memory");
  for (int k = 0; k < n && !st; k++) {
    for (int j = 0; j < k; j++)
      if (ordinals[j] == ordinals[k])
        st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "jx_nccl_engine_create: CUDA device %d is listed twice", ordinals[k]);
    if (!st) st = jx_cuda_device_open(ordinals[k], &e->dev[k]);
    const jx_cuda_driver_api *cu = jx_cuda_driver();
    if (!st)
      st = jx_cuda_check(cu->EventCreate(&e->ready[k], JX_CU_EVENT_DISABLE_TIMING), "cuEventCreate",
                         ordinals[k]);
    if (!st)
      st = jx_cuda_check(cu->EventCreate(&e->done[k], JX_CU_EVENT_DISABLE_TIMING), "cuEventCreate",
                         ordinals[k]);
  }
  if (!st) st = make_world(e);
  if (st) {
    jx_nccl_engine_destroy(e);
    return st;
  }
  *out = e;
  return JX_OK;
}

int jx_nccl_engine_world_size(const jx_nccl_engine *e) { return e->world_size; }
int jx_nccl_engine_world_rank(const jx_nccl_engine *e, int local) {
  return local >= 0 && local < e->n ? e->world_offset + local : -1;
}
jx_cuda_device *jx_nccl_engine_device(const jx_nccl_engine *e, int local) {
  return local >= 0 && local < e->n ? e->dev[local] : NULL;
}

/* ---- the mesh axes' communicators ---- */

static jx_status resolve_axes(const jx_mesh *m, const char *const *names, int naxes, int *axis) {
  if (naxes < 1 || naxes > m->ndim)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_nccl_engine_axes: %d axes of a mesh of %d (name 1 to %d)", naxes,
                        m->ndim, m->ndim);
  for (int i = 0; i < naxes; i++) {
    axis[i] = names[i] ? jx_mesh_axis_index(m, names[i]) : -1;
    if (axis[i] < 0)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_nccl_engine_axes: the mesh has no axis '%s'",
                          names[i] ? names[i] : "(null)");
    for (int j = 0; j < i; j++)
      if (axis[j] == axis[i])
        return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                            "jx_nccl_engine_axes: axis '%s' is named twice", names[i]);
  }
  return JX_OK;
}

static void describe_axes(jx_nccl_axes *a) {
  const jx_mesh *m = a->mesh;
  size_t at =
      (size_t)snprintf(a->label, sizeof a->label, "mesh %s ", a->naxes > 1 ? "axes" : "axis");
  a->names[0] = 0;
  size_t nat = 0;
  for (int i = 0; i < a->naxes; i++) {
    const char *name = m->name[a->axis[i]];
    at += (size_t)snprintf(a->label + at, sizeof a->label - at, "%s'%s'", i ? ", " : "", name);
    nat += (size_t)snprintf(a->names + nat, sizeof a->names - nat, "%s%s", i ? "," : "", name);
  }
}

/* color and key of mesh position p for the axes of a */
static void color_and_key(const jx_nccl_axes *a, int p, int *color, int *key) {
  const jx_mesh *m = a->mesh;
  int64_t coords[JX_MAX_RANK];
  jx_mesh_coords(m, p, coords);
  int in_set[JX_MAX_RANK] = {0};
  int64_t k = 0;
  for (int i = 0; i < a->naxes; i++) {
    in_set[a->axis[i]] = 1;
    k = k * m->size[a->axis[i]] + coords[a->axis[i]];
  }
  int64_t c = 0;
  for (int d = 0; d < m->ndim; d++)
    if (!in_set[d]) c = c * m->size[d] + coords[d];
  *color = (int)c;
  *key = (int)k;
}

static jx_nccl_axes *find_axes(jx_nccl_engine *e, const jx_mesh *m, const int *axis, int naxes) {
  for (jx_nccl_axes *a = e->axes; a; a = a->next)
    if (a->mesh->id == m->id && a->naxes == naxes &&
        !memcmp(a->axis, axis, (size_t)naxes * sizeof *axis))
      return a;
  return NULL;
}

static jx_status split_axes(jx_nccl_engine *e, jx_nccl_axes *a) {
  const jx_mesh *m = a->mesh;
  /* the mesh position of every world rank here (-1: not in the mesh) */
  int *position = malloc((size_t)e->n * sizeof *position);
  if (!position) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_nccl_engine_axes: out of memory");
  for (int k = 0; k < e->n; k++) position[k] = -1;
  for (int p = 0; p < m->ndev; p++) {
    int rank = m->device[p] - e->world_offset;
    if (m->device[p] >= e->world_size) {
      free(position);
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "jx_nccl_engine_axes: mesh device %d is not a rank of the NCCL world of "
                          "%d CUDA devices",
                          m->device[p], e->world_size);
    }
    if (rank >= 0 && rank < e->n) position[rank] = p;
  }
  jx_status st = JX_OK;
  const jx_nccl_api *nccl = e->nccl;
  /* a split is collective over the world: every device, in one group */
  nccl->GroupStart();
  for (int k = 0; k < e->n && !st; k++) {
    int color = JX_NCCL_SPLIT_NOCOLOR, key = 0;
    if (position[k] >= 0) color_and_key(a, position[k], &color, &key);
    a->local[k].rank = position[k] >= 0 ? key : -1;
    st = jx_cuda_device_make_current(e->dev[k]);
    if (!st)
      st = nccl_check(nccl, nccl->CommSplit(e->world[k], color, key, &a->local[k].comm, NULL),
                      "ncclCommSplit", e->dev[k]->info.ordinal);
  }
  ncclResult_t r = nccl->GroupEnd();
  if (!st && r != JX_NCCL_SUCCESS)
    st = jx_error_set(JX_ERR_INTERNAL, "NCCL: ncclCommSplit for the %s: %s", a->label,
                      nccl->GetErrorString(r));
  free(position);
  return st;
}

jx_status jx_nccl_engine_axes(jx_nccl_engine *e, jx_mesh *m, const char *const *axis_names,
                              int naxes, jx_nccl_axes **out) {
  *out = NULL;
  if (!m) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_nccl_engine_axes: no mesh");
  int axis[JX_MAX_RANK];
  jx_status st = resolve_axes(m, axis_names, naxes, axis);
  if (st) return st;
  if ((*out = find_axes(e, m, axis, naxes))) return JX_OK;
  jx_nccl_axes *a = calloc(1, sizeof *a);
  if (a) a->local = calloc((size_t)e->n, sizeof *a->local);
  if (!a || !a->local) {
    free(a);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_nccl_engine_axes: out of memory");
  }
  a->engine = e;
  a->mesh = jx_mesh_retain(m);
  a->naxes = naxes;
  memcpy(a->axis, axis, sizeof axis);
  a->size = 1;
  for (int i = 0; i < naxes; i++) a->size *= (int)m->size[axis[i]];
  describe_axes(a);
  st = split_axes(e, a);
  if (st) {
    for (int k = 0; k < e->n; k++) destroy_comm(e->nccl, a->local[k].comm);
    jx_mesh_release(a->mesh);
    free(a->local);
    free(a);
    return st;
  }
  a->next = e->axes;
  e->axes = a;
  *out = a;
  return JX_OK;
}

int jx_nccl_axes_size(const jx_nccl_axes *a) { return a->size; }
int jx_nccl_axes_rank(const jx_nccl_axes *a, int local) {
  return local >= 0 && local < a->engine->n ? a->local[local].rank : -1;
}
const char *jx_nccl_axes_label(const jx_nccl_axes *a) { return a->label; }

/* ---- collectives ---- */

static int nccl_type(jx_dtype dt) {
  switch (dt) {
  case JX_I8: return JX_NCCL_INT8;
  case JX_U8: return JX_NCCL_UINT8;
  case JX_I32: return JX_NCCL_INT32;
  case JX_U32: return JX_NCCL_UINT32;
  case JX_I64: return JX_NCCL_INT64;
  case JX_U64: return JX_NCCL_UINT64;
  case JX_F16: return JX_NCCL_FLOAT16;
  case JX_BF16: return JX_NCCL_BFLOAT16;
  case JX_F32: return JX_NCCL_FLOAT32;
  case JX_F64: return JX_NCCL_FLOAT64;
  default: return -1;
  }
}

static int nccl_op(jx_reduce_op op) {
  switch (op) {
  case JX_REDUCE_SUM: return JX_NCCL_SUM;
  case JX_REDUCE_PROD: return JX_NCCL_PROD;
  case JX_REDUCE_MAX: return JX_NCCL_MAX;
  case JX_REDUCE_MIN: return JX_NCCL_MIN;
  default: return -1;
  }
}

typedef enum { PSUM, ALL_GATHER, PSUM_SCATTER, ALL_TO_ALL, PPERMUTE } kind;
static const char *const kind_name[] = {"psum", "all_gather", "psum_scatter", "all_to_all",
                                        "ppermute"};

/* One collective's arguments. */
typedef struct {
  kind kind;
  jx_nccl_axes *a;
  int local, type, op;
  CUdeviceptr send, recv;
  size_t count;
  const int (*pairs)[2];
  int npairs;
} call;

static const void *in(CUdeviceptr p) { return (const void *)(uintptr_t)p; }
static void *out(CUdeviceptr p) { return (void *)(uintptr_t)p; }

/* NCCL's calls of c on stream s; *what names the failing one. */
static ncclResult_t enqueue(const call *c, ncclComm_t comm, CUstream s, size_t es,
                            const char **what) {
  const jx_nccl_api *nccl = c->a->engine->nccl;
  int n = c->a->size, me = c->a->local[c->local].rank;
  ncclResult_t r = JX_NCCL_SUCCESS;
  switch (c->kind) {
  case PSUM:
    *what = "ncclAllReduce";
    return nccl->AllReduce(in(c->send), out(c->recv), c->count, c->type, c->op, comm, s);
  case PSUM_SCATTER:
    *what = "ncclReduceScatter";
    return nccl->ReduceScatter(in(c->send), out(c->recv), c->count, c->type, c->op, comm, s);
  case ALL_GATHER:
    *what = "ncclAllGather";
    return nccl->AllGather(in(c->send), out(c->recv), c->count, c->type, comm, s);
  case ALL_TO_ALL:
    *what = "ncclSend/ncclRecv (all_to_all)";
    nccl->GroupStart();
    for (int q = 0; q < n && r == JX_NCCL_SUCCESS; q++) {
      size_t at = (size_t)q * c->count * es;
      r = nccl->Send(in(c->send + at), c->count, c->type, q, comm, s);
      if (r == JX_NCCL_SUCCESS) r = nccl->Recv(out(c->recv + at), c->count, c->type, q, comm, s);
    }
    break;
  case PPERMUTE: {
    *what = "ncclSend/ncclRecv (ppermute)";
    int src = -1, dst = -1;
    for (int k = 0; k < c->npairs; k++) {
      if (c->pairs[k][1] == me) src = c->pairs[k][0];
      if (c->pairs[k][0] == me) dst = c->pairs[k][1];
    }
    nccl->GroupStart();
    if (dst >= 0) r = nccl->Send(in(c->send), c->count, c->type, dst, comm, s);
    if (src >= 0 && r == JX_NCCL_SUCCESS)
      r = nccl->Recv(out(c->recv), c->count, c->type, src, comm, s);
    break;
  }
  }
  ncclResult_t end = nccl->GroupEnd();
  return r != JX_NCCL_SUCCESS ? r : end;
}

/* ppermute's ranks that nothing is sent to get zeros, in stream order */
static jx_status zeros_if_nothing_arrives(const call *c, CUstream s, size_t es, int ordinal) {
  if (c->kind != PPERMUTE) return JX_OK;
  int me = c->a->local[c->local].rank;
  for (int k = 0; k < c->npairs; k++)
    if (c->pairs[k][1] == me) return JX_OK;
  return jx_cuda_check(jx_cuda_driver()->MemsetD8Async(c->recv, 0, c->count * es, s),
                       "cuMemsetD8Async (ppermute's zeros)", ordinal);
}

/* Re-records the error jx_nccl_wait set with the collective and the device in front. */
static jx_status name_the_collective(jx_status st, int had_error, const call *c, int ordinal) {
  if (had_error || !jx_error_pending()) return st;
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", jx_last_error());
  jx_clear_error();
  return jx_error_set(st, "jx_nccl_%s over the %s on CUDA device %d: %s", kind_name[c->kind],
                      c->a->label, ordinal, msg);
}

static jx_status run(const call *c, jx_dtype dt, double timeout_s) {
  jx_nccl_axes *a = c->a;
  jx_nccl_engine *e = a->engine;
  if (c->local < 0 || c->local >= e->n)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_nccl_%s: device %d of an engine of %d",
                        kind_name[c->kind], c->local, e->n);
  jx_cuda_device *d = e->dev[c->local];
  axis_comm *ac = &a->local[c->local];
  int ordinal = d->info.ordinal;
  if (ac->aborted)
    return jx_error_set(JX_ERR_INTERNAL,
                        "jx_nccl_%s over the %s on CUDA device %d: the communicator was aborted "
                        "by an earlier failure",
                        kind_name[c->kind], a->label, ordinal);
  if (!ac->comm)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_nccl_%s: CUDA device %d is not in the mesh of the %s",
                        kind_name[c->kind], ordinal, a->label);
  if (c->type < 0 || (c->op < 0 && (c->kind == PSUM || c->kind == PSUM_SCATTER)))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_nccl_%s over the %s: %s%s is not supported",
                        kind_name[c->kind], a->label, jx_dtype_name(dt),
                        c->type < 0 ? "" : " (or the reduction)");
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  int had_error = jx_error_pending();
  jx_status st = jx_cuda_device_make_current(d);
  /* communication after what compute queued so far (the operands' producers) */
  if (!st)
    st = jx_cuda_check(cu->EventRecord(e->ready[c->local], d->compute), "cuEventRecord", ordinal);
  if (!st)
    st = jx_cuda_check(cu->StreamWaitEvent(d->comm, e->ready[c->local], 0), "cuStreamWaitEvent",
                       ordinal);
  if (st) return st;
  const char *what = "";
  st = zeros_if_nothing_arrives(c, d->comm, jx_dtype_size(dt), ordinal);
  if (st) return st;
  ncclResult_t r = enqueue(c, ac->comm, d->comm, jx_dtype_size(dt), &what);
  if (r != JX_NCCL_SUCCESS) {
    st = nccl_check(e->nccl, r, what, ordinal);
    return name_the_collective(st, had_error, c, ordinal);
  }
  /* compute's later work (the consumers) after the collective */
  st = jx_cuda_check(cu->EventRecord(e->done[c->local], d->comm), "cuEventRecord", ordinal);
  if (!st)
    st = jx_cuda_check(cu->StreamWaitEvent(d->compute, e->done[c->local], 0), "cuStreamWaitEvent",
                       ordinal);
  if (st) return st;
  double deadline = timeout_s > 0 ? timeout_s : jx_comm_default_timeout();
  st = jx_nccl_wait(ac->comm, e->done[c->local], deadline, a->names, ac->rank, a->size);
  if (st) {
    /* jx_nccl_wait aborted the communicator: NCCL freed it */
    ac->comm = NULL;
    ac->aborted = 1;
    return name_the_collective(st, had_error, c, ordinal);
  }
  return JX_OK;
}

jx_status jx_nccl_psum(jx_nccl_axes *a, int local, CUdeviceptr send, CUdeviceptr recv, size_t count,
                       jx_dtype dt, jx_reduce_op op, double timeout_s) {
  call c = {PSUM, a, local, nccl_type(dt), nccl_op(op), send, recv, count, NULL, 0};
  return run(&c, dt, timeout_s);
}

jx_status jx_nccl_all_gather(jx_nccl_axes *a, int local, CUdeviceptr send, CUdeviceptr recv,
                             size_t count, jx_dtype dt, double timeout_s) {
  call c = {ALL_GATHER, a, local, nccl_type(dt), 0, send, recv, count, NULL, 0};
  return run(&c, dt, timeout_s);
}

jx_status jx_nccl_psum_scatter(jx_nccl_axes *a, int local, CUdeviceptr send, CUdeviceptr recv,
                               size_t count, jx_dtype dt, jx_reduce_op op, double timeout_s) {
  call c = {PSUM_SCATTER, a, local, nccl_type(dt), nccl_op(op), send, recv, count, NULL, 0};
  return run(&c, dt, timeout_s);
}

jx_status jx_nccl_all_to_all(jx_nccl_axes *a, int local, CUdeviceptr send, CUdeviceptr recv,
                             size_t count, jx_dtype dt, double timeout_s) {
  call c = {ALL_TO_ALL, a, local, nccl_type(dt), 0, send, recv, count, NULL, 0};
  return run(&c, dt, timeout_s);
}

jx_status jx_nccl_ppermute(jx_nccl_axes *a, int local, CUdeviceptr send, CUdeviceptr recv,
                           size_t count, jx_dtype dt, const int (*pairs)[2], int npairs,
                           double timeout_s) {
  int n = a->size;
  for (int k = 0; k < npairs; k++) {
    if (pairs[k][0] < 0 || pairs[k][0] >= n || pairs[k][1] < 0 || pairs[k][1] >= n)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "jx_nccl_ppermute over the %s: pair %d (%d -> %d) names a rank "
                          "outside 0..%d",
                          a->label, k, pairs[k][0], pairs[k][1], n - 1);
    for (int j = 0; j < k; j++)
      if (pairs[j][0] == pairs[k][0] || pairs[j][1] == pairs[k][1])
        return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                            "jx_nccl_ppermute over the %s: pairs %d and %d share a %s (%d)",
                            a->label, j, k, pairs[j][0] == pairs[k][0] ? "source" : "destination",
                            pairs[j][0] == pairs[k][0] ? pairs[k][0] : pairs[k][1]);
  }
  call c = {PPERMUTE, a, local, nccl_type(dt), 0, send, recv, count, pairs, npairs};
  return run(&c, dt, timeout_s);
}
