/* CUDA devices in meshes (cuda_mesh.h): an executable per mesh position,
 * and the collective equations as device steps over the NCCL engine. */
#include "cuda_mesh.h"

#include <jx/cuda.h>
#include <jx/distributed.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../parallel/collective.h"
#include "../parallel/device.h"
#include "../ir/axis_env.h"
#include "cuda_exec.h"
#include "nccl_engine.h"

/* ---- the process's engine and the counters ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static jx_nccl_engine *engine;
static int engine_failed; /* NCCL could not be used: collectives stay on the host */
static jx_cuda_mesh_stats stats;
static int skip_position = -1;

void jx_cuda_mesh_stats_get(jx_cuda_mesh_stats *s) {
  pthread_mutex_lock(&lock);
  *s = stats;
  pthread_mutex_unlock(&lock);
}

void jx_cuda_mesh_test_skip_collectives(int position) {
  pthread_mutex_lock(&lock);
  skip_position = position;
  pthread_mutex_unlock(&lock);
}

void jx_cuda_mesh_shutdown(void) {
  pthread_mutex_lock(&lock);
  jx_nccl_engine_destroy(engine);
  engine = NULL;
  engine_failed = 0;
  pthread_mutex_unlock(&lock);
}

static void count(long *counter) {
  pthread_mutex_lock(&lock);
  (*counter)++;
  pthread_mutex_unlock(&lock);
}

/* jx_process_gpu's choice (the local rank when several processes share the
 * host), whose check of the GPU count the mesh's check of its highest
 * device replaces */
int jx_cuda_mesh_first_ordinal(void) {
  return jx_process_local_count() > 1 ? jx_process_local_index() * jx_devices_init() : 0;
}

/* The engine over this process's CUDA devices first .. first+n-1, made once
 * (lock held); NULL when NCCL cannot be used (said once under
 * JX_LOG_COMPILES=1, no error kept). */
static jx_nccl_engine *the_engine(int first, int n) {
  if (engine || engine_failed) return engine;
  int ordinals[64];
  if (n > 64) n = 64;
  for (int k = 0; k < n; k++) ordinals[k] = first + k;
  int clean = jx_last_status() == JX_OK;
  if (jx_nccl_engine_create(ordinals, n, &engine)) {
    engine = NULL;
    engine_failed = 1;
    if (jx_env_flag("JX_LOG_COMPILES"))
      fprintf(stderr, "jx: CUDA meshes: collectives run on the host: %s\n", jx_last_error());
    if (clean) jx_clear_error();
  }
  return engine;
}

/* ---- a program's executables ---- */

typedef struct mesh_exec mesh_exec;

typedef struct { /* the collective steps' context of one mesh position */
  mesh_exec *owner;
  int position;
  int local; /* the device's index in the engine (its place among the process's devices) */
} position_ctx;

typedef struct {
  int n;
  int64_t ids[JX_MAX_RANK]; /* the axis ids, in the order named */
  jx_nccl_axes *axes;       /* borrowed from the engine */
} axes_entry;

struct mesh_exec {
  jx_mesh *mesh; /* retained */
  jx_nccl_engine *engine;
  int naxes;
  axes_entry *axes;
  jx_cuda_executable **per; /* per mesh position; NULL: another process runs it */
  position_ctx *ctx;
};

static void mesh_exec_free(void *exec) {
  mesh_exec *mx = exec;
  if (!mx) return;
  for (int p = 0; mx->per && p < mx->mesh->ndev; p++) jx_cuda_executable_free(mx->per[p]);
  jx_mesh_release(mx->mesh);
  free(mx->per);
  free(mx->ctx);
  free(mx->axes);
  free(mx);
}

/* The dtypes NCCL reduces and moves (nccl_engine.c). */
static int nccl_dtype(jx_dtype dt) {
  switch (dt) {
  case JX_I8:
  case JX_U8:
  case JX_I32:
  case JX_U32:
  case JX_I64:
  case JX_U64:
  case JX_F16:
  case JX_BF16:
  case JX_F32:
  case JX_F64: return 1;
  default: return 0;
  }
}

static axes_entry *find_axes(const mesh_exec *mx, const jx_ilist *ids) {
  for (int k = 0; k < mx->naxes; k++) {
    const axes_entry *a = &mx->axes[k];
    if (a->n == ids->n && !memcmp(a->ids, ids->v, sizeof *a->ids * (size_t)a->n))
      return &mx->axes[k];
  }
  return NULL;
}

/* Makes the communicators of every set of axes p's collectives name (on
 * the calling thread: collective over the engine's world). */
static jx_status make_axes(mesh_exec *mx, const jx_program *p) {
  mx->axes = calloc((size_t)p->neqns + 1, sizeof *mx->axes);
  if (!mx->axes) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA meshes: out of memory");
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    const jx_ilist *ids = &e->params.l[0];
    if (!jx_prim_is_collective(e->prim) || ids->n < 1 || ids->n > JX_MAX_RANK || find_axes(mx, ids))
      continue;
    const char *names[JX_MAX_RANK];
    for (int a = 0; a < ids->n; a++) names[a] = jx_axis_name((int)ids->v[a]);
    axes_entry *a = &mx->axes[mx->naxes];
    a->n = ids->n;
    memcpy(a->ids, ids->v, sizeof *a->ids * (size_t)ids->n);
    jx_status st = jx_nccl_engine_axes(mx->engine, mx->mesh, names, ids->n, &a->axes);
    if (st) return st;
    mx->naxes++;
  }
  return JX_OK;
}

/* ---- collective steps ---- */

static int takes(void *ctx, const jx_program *p, const jx_eqn *e) {
  const position_ctx *c = ctx;
  if (!c->owner->engine || !jx_prim_is_collective(e->prim) || e->nin != 1 || e->nout != 1) return 0;
  return nccl_dtype(p->avals[e->in[0]].dtype) && find_axes(c->owner, &e->params.l[0]) != NULL;
}

static int64_t dims_product(const jx_shape *s, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++) n *= s->dims[d];
  return n;
}

/* Device-to-device copies on d's compute stream between a buffer seen as
 * [outer][n][chunk] (rows) and one seen as [n][outer][chunk] (blocks, what
 * NCCL sends and receives): to_blocks copies rows -> blocks, else blocks ->
 * rows. chunk is in bytes. */
static jx_status move_blocks(jx_cuda_device *d, CUdeviceptr dst, CUdeviceptr src, int64_t n,
                             int64_t outer, size_t chunk, int to_blocks) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  for (int64_t q = 0; q < n; q++)
    for (int64_t o = 0; o < outer; o++) {
      size_t rows = (size_t)(o * n + q) * chunk, blocks = (size_t)(q * outer + o) * chunk;
      CUresult r = to_blocks ? cu->MemcpyDtoDAsync(dst + blocks, src + rows, chunk, d->compute)
                             : cu->MemcpyDtoDAsync(dst + rows, src + blocks, chunk, d->compute);
      if (r) return jx_cuda_check(r, "cuMemcpyDtoDAsync_v2", d->info.ordinal);
    }
  return JX_OK;
}

static jx_status scratch(jx_cuda_device *d, size_t bytes, CUdeviceptr *ptr) {
  uint64_t p = 0;
  jx_status st = jx_cuda_allocator_alloc(d->memory, bytes ? bytes : 1, &p);
  *ptr = (CUdeviceptr)p;
  return st;
}

/* A collective's blocks are contiguous in NCCL's buffers; a dim with
 * something before it (outer > 1) is moved with copies around the call.
 * The engine's calls wait for the collective, so scratch blocks are free
 * to go back to the allocator when they return (the copies after them are
 * ordered on the compute stream). */
static jx_status run_collective(void *ctx, const jx_program *p, const jx_eqn *e,
                                const CUdeviceptr *in, const CUdeviceptr *out) {
  position_ctx *c = ctx;
  mesh_exec *mx = c->owner;
  pthread_mutex_lock(&lock);
  int skip = c->position == skip_position;
  pthread_mutex_unlock(&lock);
  if (skip) return JX_OK; /* tests: a peer that never joins */
  jx_nccl_axes *a = find_axes(mx, &e->params.l[0])->axes;
  jx_cuda_device *d = jx_nccl_engine_device(mx->engine, c->local);
  const jx_spmd_ctx *spmd = jx_spmd_current();
  double timeout = spmd ? spmd->timeout_s : 0;
  jx_aval x = p->avals[e->in[0]];
  jx_dtype dt = x.dtype;
  size_t es = jx_dtype_size(dt);
  int64_t n = jx_nccl_axes_size(a), numel = jx_shape_numel(x.shape);
  const jx_params *q = &e->params;
  jx_status st = JX_OK;
  CUdeviceptr tmp = 0;
  if (numel == 0) return JX_OK;
  if (e->prim == &jx_prim_psum || e->prim == &jx_prim_pmax || e->prim == &jx_prim_pmin) {
    jx_reduce_op op = e->prim == &jx_prim_psum   ? JX_REDUCE_SUM
                      : e->prim == &jx_prim_pmax ? JX_REDUCE_MAX
                                                 : JX_REDUCE_MIN;
    st = jx_nccl_psum(a, c->local, in[0], out[0], (size_t)numel, dt, op, timeout);
  } else if (e->prim == &jx_prim_all_gather) {
    /* out seen as [outer][n][x's dims from dim on], tiled or a new axis */
    int dim = (int)q->i[0];
    int64_t outer = dims_product(&x.shape, 0, dim);
    size_t chunk = (size_t)(numel / outer) * es;
    CUdeviceptr recv = out[0];
    if (outer > 1) {
      st = scratch(d, (size_t)(n * numel) * es, &tmp);
      recv = tmp;
    }
    if (!st) st = jx_nccl_all_gather(a, c->local, in[0], recv, (size_t)numel, dt, timeout);
    if (!st && outer > 1) st = move_blocks(d, out[0], tmp, n, outer, chunk, 0);
  } else if (e->prim == &jx_prim_psum_scatter) {
    /* in seen as [outer][n][chunk]: rank r gets the sum of block r */
    int dim = (int)q->i[0];
    int64_t outer = dims_product(&x.shape, 0, dim);
    size_t chunk = (size_t)(numel / outer / n) * es;
    CUdeviceptr send = in[0];
    if (outer > 1) {
      st = scratch(d, (size_t)numel * es, &tmp);
      if (!st) st = move_blocks(d, tmp, in[0], n, outer, chunk, 1);
      send = tmp;
    }
    if (!st)
      st = jx_nccl_psum_scatter(a, c->local, send, out[0], (size_t)(numel / n), dt, JX_REDUCE_SUM,
                                timeout);
  } else if (e->prim == &jx_prim_all_to_all) {
    /* chunk q of the split dim goes to rank q; the chunks received are
     * concatenated along the concat dim in rank order */
    int split = (int)q->i[0], concat = (int)q->i[1];
    jx_shape piece = x.shape; /* one chunk's shape */
    piece.dims[split] /= n;
    int64_t outer_in = dims_product(&x.shape, 0, split);
    int64_t outer_out = dims_product(&piece, 0, concat);
    size_t chunk_in = (size_t)(numel / outer_in / n) * es;
    size_t chunk_out = (size_t)(numel / n / outer_out) * es;
    CUdeviceptr send = in[0], recv = out[0], tmp2 = 0;
    if (outer_in > 1) {
      st = scratch(d, (size_t)numel * es, &tmp);
      if (!st) st = move_blocks(d, tmp, in[0], n, outer_in, chunk_in, 1);
      send = tmp;
    }
    if (!st && outer_out > 1) {
      st = scratch(d, (size_t)numel * es, &tmp2);
      recv = tmp2;
    }
    if (!st) st = jx_nccl_all_to_all(a, c->local, send, recv, (size_t)(numel / n), dt, timeout);
    if (!st && outer_out > 1) st = move_blocks(d, out[0], recv, n, outer_out, chunk_out, 0);
    if (tmp2) jx_cuda_allocator_free(d->memory, (uint64_t)tmp2);
  } else { /* ppermute: perm = src0, dst0, src1, dst1, ... */
    int len = 0;
    const int64_t *flat = jx_interned_ints((int)q->i[0], &len);
    int npairs = len / 2;
    int(*pairs)[2] = malloc(sizeof *pairs * (size_t)(npairs + 1));
    if (!pairs) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA meshes: out of memory");
    for (int k = 0; k < npairs; k++) {
      pairs[k][0] = (int)flat[2 * k];
      pairs[k][1] = (int)flat[2 * k + 1];
    }
    st = jx_nccl_ppermute(a, c->local, in[0], out[0], (size_t)numel, dt, (const int(*)[2])pairs,
                          npairs, timeout);
    free(pairs);
  }
  if (tmp) jx_cuda_allocator_free(d->memory, (uint64_t)tmp);
  if (!st) count(&stats.collectives);
  return st;
}

/* ---- attaching and running ---- */

/* The highest CUDA ordinal that m's devices of this process run on (-1:
 * none); *mine: how many of m's devices are this process's. */
static int highest_ordinal(const jx_mesh *m, int *mine) {
  int local_devices = jx_devices_init(), highest = -1, first = jx_cuda_mesh_first_ordinal();
  *mine = 0;
  for (int q = 0; q < m->ndev; q++)
    if (jx_device_is_local(m->device[q])) {
      ++*mine;
      int ordinal = first + m->device[q] % local_devices;
      if (ordinal > highest) highest = ordinal;
    }
  return highest;
}

static jx_status mesh_run(void *exec, const jx_program *p, jx_array *const *in, jx_array **out) {
  mesh_exec *mx = exec;
  const jx_spmd_ctx *c = jx_spmd_current();
  if (!c || c->mesh->id != mx->mesh->id || c->position < 0 || c->position >= mx->mesh->ndev ||
      !mx->per[c->position])
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "CUDA meshes: the per-device program '%s' runs only on the devices of its "
                        "mesh (jx_spmd_run)",
                        p->name);
  count(&stats.runs);
  return jx_cuda_executable_run(mx->per[c->position], p, in, out);
}
jx_status jx_cuda_mesh_attach(const jx_program *p, jx_mesh *m, const char *what_name,
                              const char *dump_prefix) {
  const char *name = what_name ? what_name : p->name;
  int ngpu = jx_cuda_device_count();
  if (ngpu == 0)
    return jx_error_set(JX_ERR_UNIMPLEMENTED,
                        "jit of '%s': JX_PLATFORM=cuda, but CUDA cannot run it: %s (set "
                        "JX_PLATFORM=cpu to run on the CPU)",
                        name, jx_cuda_status());
  int local_devices = jx_devices_init(), mine = 0, highest = highest_ordinal(m, &mine);
  int first = jx_cuda_mesh_first_ordinal();
  if (highest >= ngpu) {
    char text[512];
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jit of '%s': the mesh (%s) has %d devices of this process, up to CUDA "
                        "device %d, but there %s %d CUDA device%s (JX_PLATFORM=cuda runs this "
                        "process's device i on CUDA device %d+i)",
                        name, jx_mesh_text(m, 1, text, sizeof text), mine, highest,
                        ngpu == 1 ? "is" : "are", ngpu, ngpu == 1 ? "" : "s", first);
  }
  mesh_exec *mx = calloc(1, sizeof *mx);
  if (!mx) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA meshes: out of memory");
  mx->mesh = jx_mesh_retain(m);
  mx->per = calloc((size_t)m->ndev, sizeof *mx->per);
  mx->ctx = calloc((size_t)m->ndev, sizeof *mx->ctx);
  jx_status st =
      mx->per && mx->ctx ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA meshes: out of memory");
  int collectives = 0;
  for (int k = 0; k < p->neqns; k++) collectives |= jx_prim_is_collective(p->eqns[k].prim);
  if (!st && collectives) {
    int n = local_devices < ngpu ? local_devices : ngpu;
    pthread_mutex_lock(&lock);
    mx->engine = the_engine(first, n);
    pthread_mutex_unlock(&lock);
    if (mx->engine) st = make_axes(mx, p);
  }
  for (int q = 0; q < m->ndev && !st; q++) {
    if (!jx_device_is_local(m->device[q])) continue;
    int local = m->device[q] % local_devices;
    jx_cuda_device *d = NULL;
    st = jx_cuda_device_open(first + local, &d);
    mx->ctx[q] = (position_ctx){mx, q, local};
    jx_cuda_collective_ops ops = {&mx->ctx[q], takes, run_collective};
    if (!st && !(mx->per[q] = jx_cuda_executable_build_collective(d, p, dump_prefix, &ops)))
      st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  if (st) {
    mesh_exec_free(mx);
    return st;
  }
  jx_program_attach(p, (jx_exec){mx, mesh_run, mesh_exec_free});
  return JX_OK;
}

int jx_cuda_mesh_kernels(const jx_program *p, int *host_eqns, int *collectives) {
  jx_exec x = p ? jx_program_exec(p) : (jx_exec){0};
  if (x.run != mesh_run) return -1;
  const mesh_exec *mx = x.impl;
  for (int q = 0; q < mx->mesh->ndev; q++)
    if (mx->per[q]) {
      if (collectives) *collectives = jx_cuda_executable_collectives(mx->per[q]);
      return jx_cuda_executable_kernels(mx->per[q], host_eqns, NULL);
    }
  return -1;
}

int jx_cuda_mesh_fits(jx_mesh *m, char *why, size_t cap) {
  int clean = jx_last_status() == JX_OK;
  int ngpu = jx_cuda_device_count(), mine = 0, highest = highest_ordinal(m, &mine);
  if (ngpu > 0 && highest < ngpu) return 1;
  if (clean) jx_clear_error(); /* probing the driver is no error of the caller's */
  if (ngpu == 0) {
    snprintf(why, cap, "JX_PLATFORM=cuda, but CUDA cannot run it (%s)", jx_cuda_status());
  } else {
    char text[512];
    snprintf(why, cap,
             "the mesh (%s) has %d devices of this process, up to CUDA device %d, but there %s "
             "%d CUDA device%s",
             jx_mesh_text(m, 1, text, sizeof text), mine, highest, ngpu == 1 ? "is" : "are", ngpu,
             ngpu == 1 ? "" : "s");
  }
  return 0;
}
