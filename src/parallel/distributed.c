/* Many processes (jx/distributed.h): joining the job, the MPI plugin, and
 * the arrays that span processes.
 *
 * The MPI plugin is opened with dlopen, so
 * libjx links no MPI: JX_MPI_PLUGIN (a path), else libjx_mpi.so next to the
 * library (or executable) that holds this code, else the library search
 * path. A job of one process needs no plugin.
 *
 * Who started the process, and so how it meets the others, is
 * launcher.h's to find out. With a coordinator (the options',
 * JX_COORDINATOR_ADDRESS, or one derived from srun's node list) the
 * processes meet at the coordinator's key-value store, run their
 * collectives on the Gloo plugin (coordinator.h: same function table, no
 * MPI) and beat their hearts through the store (heartbeat.h). */
#include <jx/distributed.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../array/array.h"
#include "../base/env.h"
#include "../base/error.h"
#include "../trace/dispatch.h"
#include "comm.h"
#include "device.h"
#include "dist.h"
#include "heartbeat.h"
#include "launcher.h"
#include "shards.h"
#include "coordinator.h"
#include "plugin_open.h"
#include "tcp_socket.h"

static const jx_mpi_api *mpi;
static int coordinated; /* mpi is the coordinator's engine (Gloo) */
static int initialized, active, finalized, failed;
static int proc_index, proc_count = 1;
static double timeout_default;
static jx_mpi_comm *world; /* every process, ordered by index */
static jx_launch launch;   /* who started this process, as initialize found it */

int jx_dist_active(void) { return active && !finalized; }
double jx_dist_timeout(void) {
  return timeout_default > 0 ? timeout_default : jx_comm_default_timeout();
}
int jx_process_index(void) { return proc_index; }
int jx_process_count(void) { return proc_count; }
int jx_process_local_index(void) { return launch.local_rank; }
int jx_process_local_count(void) { return launch.local_count ? launch.local_count : 1; }
const char *jx_distributed_launcher(void) {
  static char text[400];
  if (!initialized || !launch.name) return "none";
  if (launch.use_mpi || proc_count < 2)
    snprintf(text, sizeof text, "%s%s", launch.name, proc_count > 1 ? " (MPI)" : "");
  else
    snprintf(text, sizeof text, "%s (coordinator %s)", launch.name, launch.coordinator);
  return text;
}

static void *open_plugin(char *why, size_t cap) {
  return jx_plugin_open("libjx_mpi.so", "JX_MPI_PLUGIN",
                        "build jx with MPI (libopenmpi-dev installed, cmake -DJX_WITH_MPI=ON)", why,
                        cap);
}

static void set_timeout(const jx_distributed_options *opts) {
  /* read once: a collective's default deadline costs no environment lookup */
  timeout_default = jx_comm_default_timeout();
  if (opts && opts->timeout_s > 0) {
    timeout_default = opts->timeout_s;
    char v[64];
    snprintf(v, sizeof v, "%g", opts->timeout_s); /* the collectives' default deadline */
    setenv("JX_COLLECTIVE_TIMEOUT", v, 1);
  }
}

/* Every process must have as many devices as the others (device p*L+i is
 * process p's i-th): the counts are gathered and compared. */
static jx_status agree_on_device_counts(void) {
  int mine = jx_local_device_count(), P = proc_count;
  int *count = calloc((size_t)P, sizeof *count);
  int64_t *bytes = calloc((size_t)P, sizeof *bytes), *at = calloc((size_t)P, sizeof *at);
  if (!count || !bytes || !at) {
    free(count), free(bytes), free(at);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_distributed_initialize: out of memory");
  }
  for (int p = 0; p < P; p++) {
    bytes[p] = sizeof *count;
    at[p] = p * (int64_t)sizeof *count;
  }
  jx_mpi_op op = {
      .kind = JX_MPI_ALLGATHERV, .send = &mine, .recv = count, .rcounts = bytes, .rdispls = at};
  char msg[JX_MPI_MSG] = "";
  jx_status st = jx_dist_run(world, &op, 0, msg, sizeof msg);
  if (st) {
    jx_error_set(st, "jx_distributed_initialize: agreeing on the device counts: %s", msg);
  } else {
    int same = 1;
    for (int p = 1; p < P; p++) same &= count[p] == count[0];
    if (!same) {
      char list[1024] = "";
      size_t len = 0;
      for (int p = 0; p < P && len < sizeof list - 64; p++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%sprocess %d: %d", p ? ", " : "", p,
                                count[p]);
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_distributed_initialize: the processes have different device counts "
                        "(%s%s); every process needs the same (JX_NUM_CPU_DEVICES, jx train "
                        "--devices)",
                        list, len >= sizeof list - 64 ? ", ..." : "");
    }
  }
  free(count), free(bytes), free(at);
  return st;
}

/* The engine is up (or not needed): devices become global. */
static jx_status join(int rank, int size) {
  jx_status st = jx_devices_set_processes(size, rank);
  if (st) return st;
  proc_index = rank;
  proc_count = size;
  initialized = 1;
  active = size > 1;
  if (!active) return JX_OK;
  if ((st = jx_dist_split(1, rank, 0x6a78776f726c64ULL, "all processes", &world))) return st;
  return agree_on_device_counts();
}

static jx_status join_at_coordinator(const jx_distributed_options *opts, const char *coordinator,
                                     int rank, int size) {
  set_timeout(opts);
  if (size > 1) {
    const jx_mpi_api *api = jx_coordinator_engine(coordinator, size, rank);
    char msg[JX_MPI_MSG] = "";
    int mrank = 0, msize = 0;
    if (api->init(jx_dist_timeout(), &mrank, &msize, msg, sizeof msg))
      return jx_error_set(strstr(msg, "did not arrive") || strstr(msg, "could not reach") ||
                                  strstr(msg, "did not answer")
                              ? JX_ERR_TIMEOUT
                              : JX_ERR_INVALID_ARGUMENT,
                          "jx_distributed_initialize: process %d of %d: %s", rank, size, msg);
    mpi = api;
    coordinated = 1;
    if (jx_heartbeat_start(rank, size, msg, sizeof msg))
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "jx_distributed_initialize: process %d of %d: %s", rank, size, msg);
  }
  return join(rank, size);
}

jx_status jx_distributed_initialize(const jx_distributed_options *opts) {
  const char *op = "jx_distributed_initialize";
  if (initialized)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: already called (process %d of %d)", op,
                        proc_index, proc_count);
  jx_status st = jx_launch_detect(opts, &launch);
  if (st) return st;
  int rank = launch.rank, size = launch.size;
  const char *launcher = launch.name;
  if (launcher && !launch.use_mpi) return join_at_coordinator(opts, launch.coordinator, rank, size);
  if (opts && (opts->num_processes > 0 || opts->process_id > 0)) {
    if (launcher && (opts->num_processes != size || opts->process_id != rank))
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: the options say process %d of %d but %s says %d of %d", op,
                          opts->process_id, opts->num_processes, launcher, rank, size);
    if (!launcher && opts->num_processes > 1)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: the options ask for %d processes but no launcher started this "
                          "one (mpirun, srun); run it under one",
                          op, opts->num_processes);
  }
  set_timeout(opts);
  if (size > 1) {
    char why[4096];
    void *h = open_plugin(why, sizeof why);
    if (!h)
      return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: %s says %d processes, but %s", op, launcher,
                          size, why);
    jx_mpi_plugin_fn get = (jx_mpi_plugin_fn)dlsym(h, JX_MPI_PLUGIN_SYMBOL);
    const jx_mpi_api *api = get ? get() : NULL;
    if (!api || api->abi != JX_MPI_ABI)
      return jx_error_set(JX_ERR_UNIMPLEMENTED,
                          "%s: the MPI plugin found is not one of this jx (no %s, or ABI %d, not "
                          "%d); rebuild it with this libjx",
                          op, JX_MPI_PLUGIN_SYMBOL, api ? api->abi : -1, JX_MPI_ABI);
    char msg[JX_MPI_MSG] = "";
    int mrank = 0, msize = 0;
    if (api->init(jx_dist_timeout(), &mrank, &msize, msg, sizeof msg))
      return jx_error_set(JX_ERR_TIMEOUT, "%s: %s", op, msg);
    if (msize != size || mrank != rank)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: %s says process %d of %d but MPI says %d of %d", op, launcher, rank,
                          size, mrank, msize);
    mpi = api;
  }
  return join(rank, size);
}

jx_status jx_distributed_shutdown(void) {
  if (!initialized || finalized) return JX_OK;
  finalized = 1;
  if (!mpi) return JX_OK;
  jx_heartbeat_stop(!failed);
  if (failed)
    fprintf(stderr, coordinated
                        ? "jx: a collective over processes failed; this process ends (status 1) "
                          "and the others see its connections close\n"
                        : "jx: a collective over processes failed; MPI_Abort ends the job\n");
  if (mpi->finalize(0, 1))
    return jx_error_set(JX_ERR_INTERNAL, coordinated
                                             ? "jx_distributed_shutdown: the processes did not all "
                                               "meet at the final barrier (see the message above)"
                                             : "jx_distributed_shutdown: MPI_Finalize failed");
  return JX_OK;
}

jx_status jx_dist_split(int member, int key, uint64_t check, const char *label, jx_mpi_comm **out) {
  *out = NULL;
  if (!jx_dist_active())
    return jx_error_set(JX_ERR_INTERNAL, "making an MPI communicator outside a distributed job");
  char msg[JX_MPI_MSG] = "";
  if (mpi->split(member, key, check, label, jx_dist_timeout(), out, msg, sizeof msg)) {
    failed = 1;
    return jx_error_set(JX_ERR_TIMEOUT, "%s", msg);
  }
  return JX_OK;
}

jx_mpi_comm *jx_dist_world(void) { return world; }

jx_status jx_dist_run(jx_mpi_comm *c, const jx_mpi_op *op, double timeout_s, char *msg,
                      size_t cap) {
  if (!jx_dist_active()) {
    snprintf(msg, cap, "a collective over processes after jx_distributed_shutdown");
    return JX_ERR_INVALID_ARGUMENT;
  }
  if (mpi->run(c, op, timeout_s > 0 ? timeout_s : jx_dist_timeout(), msg, cap)) {
    failed = 1;
    return strstr(msg, "did not arrive") || strstr(msg, "did not finish") ? JX_ERR_TIMEOUT
                                                                          : JX_ERR_INTERNAL;
  }
  return JX_OK;
}

/* ---- arrays that span processes ---- */

static int local_position(const jx_mesh *m, int p) { return jx_device_is_local(m->device[p]); }

jx_array *jx_array_from_process_local(jx_sharding *s, jx_shape g, jx_array *local) {
  const char *op = "jx_array_from_process_local";
  if (jx_check_inputs(op, 1, &local)) return jx_poison();
  if (!s) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the sharding is NULL", op);
    return jx_poison();
  }
  if (jx_is_tracer(local)) {
    jx_error_set(JX_ERR_TRACE, "%s: the local array is a tracer", op);
    return jx_poison();
  }
  if (jx_sharding_check(s, g, op) || jx_array_ready(local)) return jx_poison();
  const jx_mesh *m = s->mesh;
  int64_t lo[JX_MAX_RANK], hi[JX_MAX_RANK];
  for (int d = 0; d < g.rank; d++) {
    lo[d] = g.dims[d];
    hi[d] = 0;
  }
  int mine = 0;
  for (int p = 0; p < m->ndev; p++) {
    if (!local_position(m, p)) continue;
    mine++;
    int64_t start[JX_MAX_RANK];
    jx_shape b;
    jx_sharding_block(s, g, p, start, &b);
    for (int d = 0; d < g.rank; d++) {
      if (start[d] < lo[d]) lo[d] = start[d];
      if (start[d] + b.dims[d] > hi[d]) hi[d] = start[d] + b.dims[d];
    }
  }
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP], sc[JX_AVAL_STR_CAP];
  if (!mine) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: the sharding's mesh has no device of process %d; such a process holds no "
                 "part of the array",
                 op, jx_process_index());
    return jx_poison();
  }
  jx_shape box = g;
  for (int d = 0; d < g.rank; d++) box.dims[d] = hi[d] - lo[d];
  if (local->shape.rank != g.rank || jx_shape_numel(box) != jx_shape_numel(local->shape) ||
      memcmp(box.dims, local->shape.dims, sizeof *box.dims * (size_t)g.rank) != 0) {
    jx_error_set(JX_ERR_SHAPE,
                 "%s: process %d holds the block %s of the global %s under '%s', but the local "
                 "array is %s",
                 op, jx_process_index(), jx_aval_str(local->dtype, box, sa),
                 jx_aval_str(local->dtype, g, sb), s->spec,
                 jx_aval_str(local->dtype, local->shape, sc));
    return jx_poison();
  }
  jx_array **shard = calloc((size_t)m->ndev, sizeof *shard);
  if (!shard) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return jx_poison();
  }
  size_t es = jx_dtype_size(local->dtype);
  int ok = 1;
  jx_scope_begin();
  for (int p = 0; p < m->ndev && ok; p++) {
    if (!local_position(m, p)) continue;
    int64_t start[JX_MAX_RANK];
    jx_shape b;
    jx_sharding_block(s, g, p, start, &b);
    for (int d = 0; d < g.rank; d++) start[d] -= lo[d];
    jx_array *x = jx_array_alloc(local->dtype, b, local->weak);
    ok = !x->poisoned;
    if (ok) {
      jx_copy_block(jx_array_data(local), jx_array_data(x), es, local->shape, start, b, 1);
      shard[p] = jx_keep(x);
    }
  }
  jx_scope_end();
  jx_array *r = ok ? jx_array_from_shards(s, local->dtype, local->weak, g, shard) : jx_poison();
  for (int p = 0; p < m->ndev; p++) jx_release(shard[p]);
  free(shard);
  return r;
}

/* Which blocks each process sends: the first replica of each block (its
 * coordinate 0 on the axes the spec does not name), in position order. */
jx_array *jx_process_allgather(jx_array *a) {
  const char *op = "jx_process_allgather";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  if (jx_is_tracer(a)) {
    jx_error_set(JX_ERR_TRACE, "%s: the array is a tracer; call it outside jit", op);
    return jx_poison();
  }
  jx_array *r = jx_array_alloc(a->dtype, a->shape, a->weak);
  if (r->poisoned) return r;
  size_t es = jx_dtype_size(a->dtype), total = (size_t)jx_shape_numel(a->shape) * es;
  /* the same choice on every process: a process that holds every block still
   * sends its part to those that do not */
  const jx_shards *sh = jx_array_shards(a);
  if (!sh || jx_shards_addressable_everywhere(sh)) {
    if (jx_array_ready(a)) return jx_poison();
    if (total) memcpy(jx_array_data(r), jx_array_data(a), total);
    return r;
  }
  const jx_sharding *s = sh->sharding;
  const jx_mesh *m = s->mesh;
  int P = jx_process_count(), me = jx_process_index();
  int64_t *counts = calloc((size_t)P * 2, sizeof *counts), *displs = counts + P;
  char *pack = malloc(total ? total : 1), *all = malloc(total ? total : 1);
  jx_status st =
      counts && pack && all ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  size_t off = 0;
  for (int p = 0; p < m->ndev && !st; p++) {
    if (!jx_sharding_is_first_replica(s, p)) continue;
    int owner = jx_device_process_index(jx_device_get(m->device[p]));
    int64_t start[JX_MAX_RANK];
    jx_shape b;
    jx_sharding_block(s, a->shape, p, start, &b);
    size_t bytes = (size_t)jx_shape_numel(b) * es;
    counts[owner] += (int64_t)bytes;
    if (owner == me) { /* a block a GPU made comes down first (cuda/cuda_mesh.h) */
      st = jx_array_ready(sh->shard[p]);
      if (!st) memcpy(pack + off, jx_array_data(sh->shard[p]), bytes);
      off += bytes;
    }
  }
  for (int q = 1; q < P && !st; q++) displs[q] = displs[q - 1] + counts[q - 1];
  if (!st) {
    jx_mpi_op o = {
        .kind = JX_MPI_ALLGATHERV, .send = pack, .recv = all, .rcounts = counts, .rdispls = displs};
    char msg[JX_MPI_MSG] = "";
    st = jx_dist_run(world, &o, 0, msg, sizeof msg);
    if (st) jx_error_set(st, "%s: %s", op, msg);
  }
  for (int q = 0; q < P && !st; q++) { /* unpack each process's blocks in the same order */
    size_t at = (size_t)displs[q];
    for (int p = 0; p < m->ndev; p++) {
      if (!jx_sharding_is_first_replica(s, p) ||
          jx_device_process_index(jx_device_get(m->device[p])) != q)
        continue;
      int64_t start[JX_MAX_RANK];
      jx_shape b;
      jx_sharding_block(s, a->shape, p, start, &b);
      jx_copy_block(jx_array_data(r), all + at, es, a->shape, start, b, 0);
      at += (size_t)jx_shape_numel(b) * es;
    }
  }
  free(counts);
  free(pack);
  free(all);
  return st ? jx_poison() : r;
}

jx_status jx_sync_global_devices(const char *name) {
  if (!jx_dist_active()) return JX_OK;
  uint64_t h = 1469598103934665603ULL;
  for (const char *c = name ? name : ""; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
  uint64_t v[2] = {h, ~h};
  jx_mpi_op o = {.kind = JX_MPI_ALLREDUCE,
                 .dtype = JX_U64,
                 .op = JX_MPI_MAX,
                 .count = 2,
                 .send = v,
                 .recv = v};
  char msg[JX_MPI_MSG] = "";
  jx_status st = jx_dist_run(world, &o, 0, msg, sizeof msg);
  if (st) return jx_error_set(st, "jx_sync_global_devices('%s'): %s", name ? name : "", msg);
  if (v[0] != h || ~v[1] != h)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_sync_global_devices('%s'): the processes passed different names",
                        name ? name : "");
  return JX_OK;
}

int jx_process_gpu(int gpus) {
  char why[512];
  int g = jx_gpu_for_local_rank(launch.local_rank, launch.local_count,
                                getenv("CUDA_VISIBLE_DEVICES"), gpus, why, sizeof why);
  if (g == -2) jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_process_gpu: %s", why);
  return g;
}
