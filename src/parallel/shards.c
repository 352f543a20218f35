/* Sharded arrays: putting an array onto devices, gathering it back, reading
 * one shard. Re-laying an array whose blocks live on several processes
 * exchanges only the parts each process lacks (relayout.c). */
#include "shards.h"

#include <jx/distributed.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/hooks.h"
#include "../prims/prim.h"
#include "../trace/dispatch.h"
#include "constraint.h"
#include "device.h"
#include "dist.h"
#include "relayout.h"

/* the sharded storage's operations, as the array layer calls them */
static void shards_release(jx_shards *sh);
static jx_status shards_gather(const jx_shards *sh, jx_dtype dt, jx_shape g, void *dst);
static const jx_shards_ops ops = {shards_release, shards_gather};

jx_array *jx_array_from_shards(jx_sharding *s, jx_dtype dt, int weak, jx_shape g,
                               jx_array *const *shard) {
  jx_array_register_shards(&ops); /* before the first sharded array exists */
  int n = s->mesh->ndev;
  jx_shards *sh = malloc(sizeof *sh + sizeof *sh->shard * (size_t)n);
  /* no global buffer: jx_array_ready gathers one on demand */
  jx_array *a = sh ? jx_array_unbacked(dt, g, weak) : jx_poison();
  if (a->poisoned) {
    free(sh);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory making a sharded array");
    return jx_poison();
  }
  sh->sharding = jx_sharding_retain(s);
  sh->n = n;
  for (int p = 0; p < n; p++) sh->shard[p] = jx_keep(shard[p]);
  jx_array_set_shards(a, sh);
  return a;
}

static void shards_release(jx_shards *sh) {
  for (int p = 0; p < sh->n; p++) jx_release(sh->shard[p]);
  jx_sharding_release(sh->sharding);
  free(sh);
}

/* Recursive over the leading dims; the innermost dim is one memcpy. */
static void copy_rec(char *global, char *block, size_t es, jx_shape g, const int64_t *start,
                     jx_shape local, int to_block, int d, int64_t goff, int64_t boff) {
  if (d == g.rank - 1 || g.rank == 0) {
    size_t n = (size_t)(g.rank ? local.dims[d] : 1) * es;
    int64_t go = g.rank ? goff * g.dims[d] + start[d] : 0, bo = g.rank ? boff * local.dims[d] : 0;
    if (to_block)
      memcpy(block + bo * (int64_t)es, global + go * (int64_t)es, n);
    else
      memcpy(global + go * (int64_t)es, block + bo * (int64_t)es, n);
    return;
  }
  for (int64_t i = 0; i < local.dims[d]; i++)
    copy_rec(global, block, es, g, start, local, to_block, d + 1, goff * g.dims[d] + start[d] + i,
             boff * local.dims[d] + i);
}

void jx_copy_block(void *global, void *block, size_t es, jx_shape g, const int64_t *start,
                   jx_shape local, int to_block) {
  if (jx_shape_numel(local) == 0) return;
  copy_rec(global, block, es, g, start, local, to_block, 0, 0, 0);
}

/* The first replica of the block at p: p with the coordinates of the axes
 * the spec does not name set to 0. */
static int first_replica(const jx_sharding *s, int p) {
  int64_t c[JX_MAX_RANK];
  jx_mesh_coords(s->mesh, p, c);
  for (int ax = 0; ax < s->mesh->ndim; ax++)
    if (!jx_sharding_uses_axis(s, ax)) c[ax] = 0;
  return jx_mesh_position(s->mesh, c);
}

/* Whether this process holds every block: shards of other processes' devices
 * are NULL, but a block may have a replica here. covered[rep]: the block of
 * the first replica rep has a local shard, the first such position + 1. */
static int covered_blocks(const jx_shards *sh, int *covered) {
  for (int p = 0; p < sh->n; p++) covered[p] = 0;
  for (int p = 0; p < sh->n; p++) {
    if (!sh->shard[p]) continue;
    int r = first_replica(sh->sharding, p);
    if (!covered[r]) covered[r] = p + 1;
  }
  for (int p = 0; p < sh->n; p++)
    if (jx_sharding_is_first_replica(sh->sharding, p) && !covered[p]) return 0;
  return 1;
}

int jx_shards_addressable(const jx_shards *sh) {
  int *covered = malloc(sizeof *covered * (size_t)sh->n);
  int ok = covered && covered_blocks(sh, covered);
  free(covered);
  return ok;
}

int jx_shards_addressable_everywhere(const jx_shards *sh) {
  int P = jx_process_count(), n = sh->n;
  /* has[q * n + r]: process q holds a replica of the block of first replica r */
  char *has = calloc((size_t)P * (size_t)n, 1);
  if (!has) return 0;
  for (int p = 0; p < n; p++) {
    int q = jx_device_process_index(jx_device_get(sh->sharding->mesh->device[p]));
    if (q >= 0 && q < P) has[(size_t)q * (size_t)n + (size_t)first_replica(sh->sharding, p)] = 1;
  }
  int ok = 1;
  for (int q = 0; q < P && ok; q++)
    for (int r = 0; r < n && ok; r++)
      ok = !jx_sharding_is_first_replica(sh->sharding, r) || has[(size_t)q * (size_t)n + (size_t)r];
  free(has);
  return ok;
}

/* The shards of a re-laid by s that jx_shard_for hands out one position at
 * a time: the exchange (a collective) fills every position of this process
 * at once, and the callers (a sharded jit's arguments) then take them in
 * turn. Holds a reference to a, so the pointer cannot name another array. */
static struct {
  pthread_mutex_t lock;
  jx_array *a;
  const jx_sharding *s;
  jx_array **shard;
  int n, left;
} relaid = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void relaid_drop(void) {
  for (int p = 0; relaid.shard && p < relaid.n; p++) jx_release(relaid.shard[p]);
  free(relaid.shard);
  if (relaid.a) jx_release(relaid.a);
  relaid.a = NULL;
  relaid.shard = NULL;
  relaid.s = NULL;
  relaid.n = relaid.left = 0;
}

/* a's shard at position p of s when a spans processes (jx_relayout_spans_processes):
 * from the last exchange for (a, s) while it has positions left, else from a
 * new exchange. */
static jx_array *relaid_shard(jx_array *a, const jx_sharding *s, int p) {
  pthread_mutex_lock(&relaid.lock);
  if (relaid.a != a || relaid.s != s || !relaid.shard || !relaid.shard[p]) {
    relaid_drop();
    int n = s->mesh->ndev;
    jx_array **shard = calloc((size_t)n, sizeof *shard);
    jx_status st = shard ? jx_relayout(a, s, shard, "re-laying an argument")
                         : jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory re-laying");
    if (st) {
      free(shard);
      pthread_mutex_unlock(&relaid.lock);
      return jx_poison();
    }
    relaid.a = jx_keep(a);
    relaid.s = s;
    relaid.shard = shard;
    relaid.n = n;
    for (int q = 0; q < n; q++) relaid.left += shard[q] != NULL;
  }
  jx_array *b = relaid.shard[p]; /* the reference passes to the caller */
  relaid.shard[p] = NULL;
  if (b && --relaid.left == 0) relaid_drop();
  pthread_mutex_unlock(&relaid.lock);
  return b ? b : jx_poison();
}

/* The host bytes of block b: its buffer, or, for a block a GPU made that
 * nothing on the host has read (cuda/cuda_mesh.h keeps it on its device), a
 * copy downloaded into *tmp, which the caller frees. Not jx_array_ready:
 * the array layer gathers under its lock, which readying b would take
 * again; the gathered global value is kept, so b is copied down once. */
static jx_status block_host(jx_array *b, const void **data, void **tmp) {
  *tmp = NULL;
  jx_buffer *buf = __atomic_load_n(&b->buf, __ATOMIC_ACQUIRE);
  jx_device_copy *dev = jx_array_device_copy(b);
  if (buf || !dev) {
    jx_status st = buf ? JX_OK : jx_array_ready(b); /* (a pending block) */
    *data = st ? NULL : jx_array_data(b);
    return st;
  }
  size_t bytes = (size_t)jx_shape_numel(b->shape) * jx_dtype_size(b->dtype);
  *tmp = malloc(bytes ? bytes : 1);
  if (!*tmp) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory copying a shard to the host");
  jx_status st = dev->download(dev, *tmp, bytes);
  *data = *tmp;
  return st;
}

static jx_status shards_gather(const jx_shards *sh, jx_dtype dt, jx_shape g, void *dst) {
  size_t es = jx_dtype_size(dt);
  int *covered = malloc(sizeof *covered * (size_t)sh->n);
  if (!covered) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory gathering shards");
  if (!covered_blocks(sh, covered)) {
    char sb[JX_AVAL_STR_CAP];
    free(covered);
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "reading the global value of %s laid out by '%s': the array is not "
                        "fully addressable from process %d (other processes hold some of its "
                        "shards); use jx_process_allgather to gather it on every process",
                        jx_aval_str(dt, g, sb), sh->sharding->spec, jx_devices_process_index());
  }
  double t0 = jx_debug_flags & JX_DEBUG_PROFILE ? jx_prof_now() : 0;
  jx_status st = JX_OK;
  for (int p = 0; p < sh->n && !st; p++) {
    if (!jx_sharding_is_first_replica(sh->sharding, p)) continue;
    int q = covered[p] - 1; /* a local position holding the same block */
    int64_t start[JX_MAX_RANK];
    jx_shape local;
    jx_sharding_block(sh->sharding, g, p, start, &local);
    const void *data = NULL;
    void *tmp = NULL;
    st = block_host(sh->shard[q], &data, &tmp);
    if (!st) jx_copy_block(dst, (void *)data, es, g, start, local, 0);
    free(tmp);
  }
  free(covered);
  if (st) return st;
  if (jx_debug_flags & JX_DEBUG_PROFILE) /* the global value, copied off the devices */
    jx_prof_collective("transfer to host", t0, jx_prof_now(),
                       (double)jx_shape_numel(g) * (double)es, "memcpy", sh->sharding->spec);
  return JX_OK;
}

jx_array *jx_shard_for(jx_array *a, const jx_sharding *s, int p) {
  const jx_shards *sh = jx_array_shards(a);
  if (sh && jx_sharding_same_layout(sh->sharding, s) && sh->shard[p]) return jx_keep(sh->shard[p]);
  if (jx_relayout_spans_processes(a)) return relaid_shard(a, s, p);
  if (jx_array_ready(a)) return jx_poison();
  int64_t start[JX_MAX_RANK];
  jx_shape local;
  jx_sharding_block(s, a->shape, p, start, &local);
  jx_scope_begin();
  jx_array *b = jx_array_alloc(a->dtype, local, a->weak);
  if (!b->poisoned) {
    jx_copy_block(jx_array_data(a), jx_array_data(b), jx_dtype_size(a->dtype), a->shape, start,
                  local, 1);
    jx_keep(b);
  }
  jx_scope_end();
  return b;
}

jx_array *jx_device_put(jx_array *a, jx_sharding *s) {
  const char *op = "jx_device_put";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  if (!s) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the sharding is NULL", op);
    return jx_poison();
  }
  /* JX_AUTO inside a traced function: the planner's choice */
  if (jx_is_tracer(a) && s == jx_sharding_auto()) return jx_sharding_constraint(a, s);
  if (jx_sharding_check(s, a->shape, op)) return jx_poison();
  if (jx_is_tracer(a)) return jx_sharding_constraint(a, s);
  const jx_shards *held = jx_array_shards(a);
  if (held && held->sharding == s) return jx_keep_in_scope(a);
  int n = s->mesh->ndev;
  jx_array **shard = calloc((size_t)n, sizeof *shard);
  if (!shard) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return jx_poison();
  }
  jx_array *r = jx_poison();
  int ok = 1;
  double t0 = jx_debug_flags & JX_DEBUG_PROFILE ? jx_prof_now() : 0, bytes = 0;
  /* here, not per device: a process with no device in s still joins the exchange */
  int exchange =
      held && !jx_sharding_same_layout(held->sharding, s) && jx_relayout_spans_processes(a);
  if (exchange) ok = !jx_relayout(a, s, shard, op);
  for (int p = 0; p < n && ok; p++) {
    if (!jx_device_is_local(s->mesh->device[p])) continue; /* another process's */
    if (!exchange) shard[p] = jx_shard_for(a, s, p);
    ok = shard[p] && !shard[p]->poisoned;
    if (ok) bytes += (double)jx_shape_numel(shard[p]->shape) * (double)jx_dtype_size(a->dtype);
  }
  if (ok) r = jx_array_from_shards(s, a->dtype, a->weak, a->shape, shard);
  if (ok && (jx_debug_flags & JX_DEBUG_PROFILE)) /* the copies onto the devices' memory */
    jx_prof_collective("transfer to devices", t0, jx_prof_now(), bytes, "memcpy", s->spec);
  for (int p = 0; p < n; p++) jx_release(shard[p]);
  free(shard);
  return r;
}

jx_array *jx_with_sharding_constraint(jx_array *a, jx_sharding *s) { return jx_device_put(a, s); }

jx_sharding *jx_sharding_of(const jx_array *a) {
  const jx_shards *sh = a && !a->poisoned ? jx_array_shards(a) : NULL;
  return sh ? sh->sharding : NULL;
}

jx_array *jx_array_shard(const jx_array *a, int i) {
  if (jx_check_inputs("jx_array_shard", 1, (jx_array *const *)&a)) return jx_poison();
  if (jx_is_tracer(a)) {
    jx_error_set(JX_ERR_TRACE, "jx_array_shard: the array is a tracer");
    return jx_poison();
  }
  const jx_shards *sh = jx_array_shards(a);
  int n = sh ? sh->n : 1;
  if (i < 0 || i >= n) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_array_shard: shard %d does not exist (%d shards)", i,
                 n);
    return jx_poison();
  }
  if (sh && !sh->shard[i]) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_array_shard: shard %d is on device %d, which belongs to another process", i,
                 sh->sharding->mesh->device[i]);
    return jx_poison();
  }
  return jx_keep_in_scope(sh ? sh->shard[i] : (jx_array *)a);
}
