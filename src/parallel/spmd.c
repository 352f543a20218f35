/* The SPMD runtime: each device's thread evaluates the per-device program
 * on its blocks, with a thread-local context that tells the collectives
 * which mesh position they run at. */
#include "spmd.h"

#include <stdlib.h>
#include <string.h>

#include "../array/array.h"
#include "../base/error.h"
#include "../ir/axis_env.h"
#include "../trace/eval.h"
#include "collective.h"
#include "comm.h"
#include "device.h"
#include "shards.h"

static _Thread_local jx_spmd_ctx current;
static _Thread_local int current_set;

const jx_spmd_ctx *jx_spmd_current(void) { return current_set ? &current : NULL; }

jx_comm *jx_spmd_comm(const int64_t *ids, int n, const char *op, int *rank) {
  const jx_spmd_ctx *c = jx_spmd_current();
  if (!c) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: runs only inside jx_shard_map, jx_pmap or a jit with shardings, or under "
                 "jx_vmap_axis with its axis name",
                 op);
    return NULL;
  }
  int axes[JX_MAX_RANK];
  if (n < 1 || n > c->mesh->ndim) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: names %d axes; the mesh has %d", op, n,
                 c->mesh->ndim);
    return NULL;
  }
  for (int k = 0; k < n; k++) {
    const char *name = jx_axis_name((int)ids[k]);
    axes[k] = jx_mesh_axis_index(c->mesh, name);
    if (axes[k] < 0) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the mesh has no axis named '%s'", op,
                   name ? name : "(null)");
      return NULL;
    }
  }
  return jx_mesh_comm(c->mesh, axes, n, c->position, rank);
}

jx_shape jx_sharding_global_shape(const jx_sharding *s, jx_shape local) {
  jx_shape g = local;
  for (int d = 0; d < g.rank; d++) g.dims[d] *= jx_sharding_dim_parts(s, d);
  return g;
}

typedef struct {
  jx_mesh *mesh;
  const jx_program *body;
  int nin, nout;
  jx_array **in;  /* [p * nin + i], one reference each */
  jx_array **out; /* [p * nout + o], one reference each */
  jx_status *status;
  char **message; /* per device, the error it recorded */
  int *pos;       /* pos[k]: the mesh position of the k-th device this process runs */
} run_state;

/* The mesh axes the device at position p sees (ir/axis_env.h: axis sizes
 * and jx_axis_index inside the body). */
static void set_device_axes(const jx_mesh *m, int p) {
  int n = jx_mesh_ndim(m);
  const char *names[JX_MAX_RANK];
  int64_t sizes[JX_MAX_RANK], coords[JX_MAX_RANK];
  for (int i = 0; i < n; i++) {
    names[i] = jx_mesh_axis_name(m, i);
    sizes[i] = jx_mesh_axis_size(m, names[i]);
  }
  jx_mesh_coords(m, p, coords);
  jx_device_axes_set(n, names, sizes, coords);
}

static void device_job(void *arg, int k) {
  run_state *r = arg;
  int p = r->pos[k];
  current = (jx_spmd_ctx){.mesh = r->mesh, .position = p, .timeout_s = 0};
  current_set = 1;
  set_device_axes(r->mesh, p);
  jx_clear_error();
  jx_scope_begin();
  jx_array **outs = r->out + (size_t)p * (size_t)r->nout;
  /* A block a device backend made stays in its device's memory (its
   * jx_device_copy, array/array.h): a later run there reads it in place, and
   * the host readers of a sharded array's blocks (gathering, re-layouts)
   * copy it down when they read it. */
  jx_status st = jx_program_eval(r->body, r->in + (size_t)p * (size_t)r->nin, outs);
  for (int o = 0; o < r->nout; o++) outs[o] = st ? NULL : jx_keep(outs[o]);
  jx_scope_end();
  if (st) {
    r->status[p] = st;
    r->message[p] = strdup(jx_last_error());
  }
  jx_clear_error();
  current_set = 0;
  jx_device_axes_clear();
}

/* Reports the devices' errors on the calling thread: the first failure that
 * is not a timeout (others usually time out waiting for it), else the first. */
static jx_status report(const run_state *r, const char *what) {
  int first = -1, failed = 0;
  for (int p = 0; p < r->mesh->ndev; p++) {
    if (!r->status[p]) continue;
    failed++;
    if (first < 0 || (r->status[first] == JX_ERR_TIMEOUT && r->status[p] != JX_ERR_TIMEOUT))
      first = p;
  }
  if (first < 0) return JX_OK;
  const char *msg = r->message[first] ? r->message[first] : "";
  if (r->status[first] == JX_ERR_POISONED && jx_error_pending()) return JX_ERR_POISONED;
  if (failed > 1)
    return jx_error_set(r->status[first], "%s: on device %d (and %d more devices): %s", what,
                        r->mesh->device[first], failed - 1, msg);
  return jx_error_set(r->status[first], "%s: on device %d: %s", what, r->mesh->device[first], msg);
}

jx_status jx_spmd_run(jx_mesh *m, const jx_program *body, int nin, jx_array *const *in,
                      jx_sharding *const *in_sh, int nout, jx_sharding *const *out_sh,
                      jx_array **out, const char *what) {
  int n = m->ndev;
  for (int o = 0; o < nout; o++) out[o] = jx_poison();
  run_state r = {.mesh = m, .body = body, .nin = nin, .nout = nout};
  r.in = calloc((size_t)n * (size_t)nin + 1, sizeof *r.in);
  r.out = calloc((size_t)n * (size_t)nout + 1, sizeof *r.out);
  r.status = calloc((size_t)n, sizeof *r.status);
  r.message = calloc((size_t)n, sizeof *r.message);
  r.pos = calloc((size_t)n, sizeof *r.pos);
  int *devs = calloc((size_t)n, sizeof *devs);
  jx_status st = JX_OK;
  if (!r.in || !r.out || !r.status || !r.message || !r.pos || !devs)
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
  /* this process runs the positions whose devices it owns (all of them in a
   * job of one process); the other processes run the rest */
  int nlocal = 0;
  for (int p = 0; p < n && !st; p++)
    if (jx_device_is_local(m->device[p])) {
      r.pos[nlocal] = p;
      devs[nlocal++] = m->device[p];
    }
  if (!st && !nlocal)
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "%s: the mesh has no device of process %d (a process runs a per-device "
                      "program on its own devices)",
                      what, jx_devices_process_index());
  for (int i = 0; i < nin && !st; i++) {
    if (in_sh[i]->mesh != m)
      st = jx_error_set(JX_ERR_INTERNAL, "%s: input %d is laid out on another mesh", what, i);
    if (!st) st = jx_sharding_check(in_sh[i], in[i]->shape, what);
    for (int k = 0; k < nlocal && !st; k++) {
      int p = r.pos[k];
      jx_array *b = jx_shard_for(in[i], in_sh[i], p);
      r.in[(size_t)p * (size_t)nin + (size_t)i] = b;
      if (b->poisoned) st = jx_last_status();
    }
  }
  if (!st) st = jx_devices_run(nlocal, devs, device_job, &r);
  if (!st) st = report(&r, what);
  for (int o = 0; o < nout && !st; o++) {
    jx_array *first = r.out[(size_t)r.pos[0] * (size_t)nout + (size_t)o];
    jx_array **blocks = malloc(sizeof *blocks * (size_t)n);
    if (!blocks) {
      st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
      break;
    }
    for (int p = 0; p < n; p++) blocks[p] = r.out[(size_t)p * (size_t)nout + (size_t)o];
    jx_shape g = jx_sharding_global_shape(out_sh[o], first->shape);
    out[o] = jx_array_from_shards(out_sh[o], first->dtype, first->weak, g, blocks);
    free(blocks);
    if (out[o]->poisoned) st = jx_last_status();
  }
  if (st)
    for (int o = 0; o < nout; o++) out[o] = jx_poison();
  for (size_t k = 0; r.in && k < (size_t)n * (size_t)nin; k++)
    if (r.in[k]) jx_release(r.in[k]);
  for (size_t k = 0; r.out && k < (size_t)n * (size_t)nout; k++)
    if (r.out[k]) jx_release(r.out[k]);
  for (int p = 0; r.message && p < n; p++) free(r.message[p]);
  free(r.in);
  free(r.out);
  free(r.status);
  free(r.message);
  free(r.pos);
  free(devs);
  return st;
}
