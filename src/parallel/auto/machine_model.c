/* Measured planning figures (machine_model.h) and their caches. */
#define _POSIX_C_SOURCE 200809L
#include "machine_model.h"

#include <jx/jx.h>
#include <jx/parallel.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../base/error.h"
#include "../../base/str_append.h"
#include "../../base/hash.h"
#include "../../base/threadpool.h"
#include "../../base/spin.h"
#include "../../base/cache_dir.h"
#include "../../compile/cost.h"
#include "../../compile/fusion.h"
#include "../../compile/lower.h"
#include "../../prims/prims.h"
#include "../collective.h"
#include "../device.h"
#include "../propagate.h"

enum {
  SIDE = 256,       /* the matmul's blocks */
  PRODUCTS = 16,    /* ... and the products a call chains: a call's fixed cost (waking the
                       devices, their first touch of its buffers) moved a single product's
                       CPU time by a third from one process to the next */
  STREAM = 1 << 20, /* floats per device of the elementwise kernel: 4 MB, past the caches */
  TINY = 8,         /* the chain's matmuls */
  CHAIN = 64,       /* ... and their count */
  ROUNDS = 9,
  CACHED = 16,
  IDLE_ROWS = 128,    /* the idle calibration's blocks per device: IDLE_ROWS x IDLE_COLS, */
  IDLE_COLS = 256,    /* a phase of about a quarter of a millisecond on one core */
  IDLE_PHASES = 24,   /* ... each ended by a collective */
  IDLE_ROUNDS = 32,   /* calls: enough idle clock ticks (10 ms) to count, and enough calls (a
                         call's share varies by half with where the kernel queues the devices) */
  FIGURES_VERSION = 5 /* of how they are measured: figures of another version are measured again */
};

static atomic_llong measurements;

int64_t jx_machine_model_measurements(void) { return (int64_t)atomic_load(&measurements); }

/* in[0] @ in[1], *(int *)c times over (the chain) or once */
static void matmul_fn(void *c, jx_array *const *in, jx_array **out) {
  int n = c ? *(const int *)c : 1;
  out[0] = in[0];
  for (int k = 0; k < n; k++) out[0] = jx_matmul(out[0], in[1]);
}

static void stream_fn(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 1));
}

/* The process's CPU time, every thread, in seconds. */
static double cpu_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The time of one call of a program over m's devices: its best wall time
 * over ROUNDS, or, when the devices time-share fewer cores
 * (jx_devices_per_core), a device's share of the least CPU time of a call
 * (every thread) times the devices a core runs: the time the slowest core
 * takes through its devices' work with the cores to themselves. The least,
 * as the wall time's best: other jobs on the cores only ever add to a
 * call's CPU time (their caches, their hyperthreads), so the least of
 * several calls is the steady figure of the machine with its cores. */
typedef struct {
  int64_t best_ns;
  double cpu_s;
} call_time;

static double call_seconds(const jx_mesh *m, const call_time *c) {
  int per_core = jx_devices_per_core(m);
  if (per_core > 0) return c->cpu_s / m->ndev * per_core;
  return 1e-9 * (double)(c->best_ns > 0 ? c->best_ns : 1);
}

/* One call of j on in until its result is ready: its wall time in *ns and
 * the process's CPU seconds (every thread) in *cpu. The result is freed
 * before the next call, as a step's temporaries are. */
static jx_status timed_call(jx_fn *j, jx_array **in, int64_t *ns, double *cpu) {
  jx_scope_begin();
  int64_t t0 = jx_now_ns();
  double c0 = cpu_now_s();
  jx_array *out = NULL;
  jx_status st = jx_call(j, in, &out);
  if (!st) st = jx_block_until_ready(out);
  *ns = jx_now_ns() - t0;
  *cpu = cpu_now_s() - c0;
  jx_scope_end();
  return st;
}

/* Times ROUNDS calls of j on in after one that compiles: the best wall
 * time, the least CPU time. */
static jx_status time_calls(jx_fn *j, jx_array **in, call_time *c) {
  c->best_ns = INT64_MAX;
  c->cpu_s = INFINITY;
  jx_status st = JX_OK;
  for (int r = 0; r <= ROUNDS && !st; r++) {
    int64_t t;
    double used;
    st = timed_call(j, in, &t, &used);
    if (r && t < c->best_ns) c->best_ns = t;
    if (r && used < c->cpu_s) c->cpu_s = used;
  }
  return st;
}

/* The time of a call of body over m (call_seconds), its first input's rows
 * (rows x cols) split over every axis of m, its second (cols x cols, when
 * nin is 2) whole: each device runs its block with no communication. */
static jx_status best_call(jx_mesh *m, const char *name, jx_body body, void *ctx, int nin,
                           int64_t rows, int64_t cols, double *secs) {
  jx_pspec split = jx_pspec_replicated(2);
  for (int a = 0; a < m->ndim; a++)
    if (m->size[a] > 1) split.ax[0][split.n[0]++] = (int8_t)a;
  jx_sharding *sh[2] = {jx_pspec_sharding(m, &split), jx_pspec_sharding(m, &(jx_pspec){.rank = 2})};
  jx_status st = sh[0] && sh[1] ? JX_OK : jx_last_status();
  jx_scope_begin();
  jx_array *in[2] = {NULL, NULL};
  if (!st) { /* placed once: the calls time the programs, not the slicing of their inputs */
    in[0] = jx_device_put(jx_ones(JX_F32, JX_SHAPE(rows * (int64_t)m->ndev, cols)), sh[0]);
    in[1] = in[0];
    if (nin > 1) /* entries 1/cols: a chain of products keeps the ones it starts from */
      in[1] = jx_device_put(
          jx_mul(jx_ones(JX_F32, JX_SHAPE(cols, cols)), jx_scalar(JX_F32, 1.0 / cols)), sh[1]);
    st = jx_block_until_ready(in[0]) ? jx_last_status() : jx_block_until_ready(in[1]);
  }
  jx_fn *f = st ? NULL : jx_fn_create(name, nin, 1, body, ctx);
  jx_fn *j = f ? jx_jit(f, &(jx_jit_options){.in_shardings = sh}) : NULL;
  call_time c = {0};
  if (j && !st) st = time_calls(j, in, &c);
  if (!j && !st) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_fn_release(j);
  jx_fn_release(f);
  jx_scope_end();
  jx_sharding_release(sh[0]);
  jx_sharding_release(sh[1]);
  if (!st) *secs = call_seconds(m, &c);
  return st;
}

/* The idle calibration's per-device program: phases of a matmul, each
 * ended by a psum over the mesh's split axes in turn, as a sharded step's
 * compute runs between its collectives. */
static void idle_fn(void *c, jx_array *const *in, jx_array **out) {
  const jx_mesh *m = c;
  jx_array *x = in[0];
  for (int phase = 0, a = 0; phase < IDLE_PHASES; phase++, a++) {
    while (m->size[a % m->ndim] < 2) a++; /* some axis is split: the mesh time-shares cores */
    x = jx_tanh(jx_matmul(x, in[1]));
    jx_array *total = jx_psum(jx_sum(x, JX_AXES(0), 1), m->name[a % m->ndim]);
    x = jx_add(x, jx_mul(total, jx_scalar(JX_F32, 1e-3f)));
  }
  out[0] = x;
}

double jx_machine_idle_s(void) {
  FILE *f = fopen("/proc/stat", "r");
  unsigned long long user, nice, sys, idle, iowait;
  int ok = f && fscanf(f, "cpu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle, &iowait) == 5;
  if (f) fclose(f);
  long hz = sysconf(_SC_CLK_TCK);
  return ok && hz > 0 ? (double)(idle + iowait) / (double)hz : -1;
}

jx_status jx_idle_share_calibrate(jx_mesh *m, jx_comm_model *cm) {
  cm->idle_share = 0;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (!jx_devices_per_core(m) || cores < 1) return JX_OK;
  char spec[JX_MAX_RANK * (JX_MESH_NAME_CAP + 1) + 3] = "(";
  for (int a = 0; a < m->ndim; a++)
    jx_str_append(spec, sizeof spec, "%s%s", a ? "," : "", m->name[a]);
  jx_str_append(spec, sizeof spec, ")");
  jx_sharding *split = jx_sharding_create(m, spec);
  jx_fn *body = jx_fn_create("calibration_idle", 2, 1, idle_fn, m);
  jx_fn *mapped = body && split
                      ? jx_shard_map(body, m, (const char *[]){spec, ""}, (const char *[]){spec})
                      : NULL;
  jx_fn *j = mapped ? jx_jit(mapped, NULL) : NULL;
  jx_status st = j ? JX_OK : jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_scope_begin();
  jx_array *in[2] = {NULL, NULL};
  if (!st) { /* placed once: the calls time the program, not the slicing of its input */
    in[0] =
        jx_device_put(jx_ones(JX_F32, JX_SHAPE(IDLE_ROWS * (int64_t)m->ndev, IDLE_COLS)), split);
    in[1] = jx_mul(jx_ones(JX_F32, JX_SHAPE(IDLE_COLS, IDLE_COLS)), jx_scalar(JX_F32, 1e-2f));
    st = jx_block_until_ready(in[0]) ? jx_last_status() : jx_block_until_ready(in[1]);
  }
  double wall = 0, used = 0, idle0 = -1;
  for (int r = 0; r <= IDLE_ROUNDS && !st; r++) { /* the first call compiles */
    if (r == 1) idle0 = jx_machine_idle_s();
    int64_t t;
    double cpu;
    st = timed_call(j, in, &t, &cpu);
    if (r) wall += 1e-9 * (double)t, used += cpu;
  }
  double idle1 = jx_machine_idle_s();
  jx_scope_end();
  jx_fn_release(j);
  jx_fn_release(mapped);
  jx_fn_release(body);
  jx_sharding_release(split);
  if (st) return st;
  /* the idle the machine counted, against this process's busy time: time
   * other jobs (or the host of a virtual machine) took from the cores is
   * neither; without the count, all of the cores' time the calls did not use */
  double idle = idle0 >= 0 && idle1 >= idle0 ? idle1 - idle0 : wall * (double)cores - used;
  double share = used + idle > 0 ? idle / (used + idle) : 0;
  cm->idle_share = fmin(fmax(share, 0), 0.5);
  return JX_OK;
}

jx_status jx_compute_rate_calibrate(jx_mesh *m, jx_comm_model *cm) {
  static int chain = CHAIN, products = PRODUCTS;
  double mm, stream, one, many;
  jx_status st = best_call(m, "calibration_matmul", matmul_fn, &products, 2, SIDE, SIDE, &mm);
  if (!st)
    st = best_call(m, "calibration_stream", stream_fn, NULL, 1, STREAM / 1024, 1024, &stream);
  if (!st) st = best_call(m, "calibration_step", matmul_fn, NULL, 2, TINY, TINY, &one);
  if (!st) st = best_call(m, "calibration_steps", matmul_fn, &chain, 2, TINY, TINY, &many);
  if (st) return st;
  cm->flops_per_s = 2.0 * SIDE * SIDE * SIDE * PRODUCTS / mm;
  cm->mem_bytes_per_s = 2.0 * STREAM * sizeof(float) / stream; /* read once, written once */
  cm->step_s = many > one ? (many - one) / (CHAIN - 1) : 0;
  return JX_OK;
}

/* ---- the roofline ---- */

double jx_roofline_time(const jx_comm_model *cm, double flops, double bytes) {
  double t = flops / cm->flops_per_s;
  if (cm->mem_bytes_per_s > 0 && bytes / cm->mem_bytes_per_s > t) t = bytes / cm->mem_bytes_per_s;
  return t;
}

/* Seconds of one step: flops and bytes by the roofline, plus its fixed cost. */
static double step_time(const jx_comm_model *cm, double flops, double bytes) {
  return jx_roofline_time(cm, flops, bytes) + cm->step_s;
}

static int is_collective(const jx_eqn *e) {
  const jx_prim *q = e->prim;
  return q == &jx_prim_psum || q == &jx_prim_pmax || q == &jx_prim_pmin ||
         q == &jx_prim_all_gather || q == &jx_prim_psum_scatter || q == &jx_prim_all_to_all ||
         q == &jx_prim_ppermute;
}

static double program_time(const jx_comm_model *cm, const jx_program *given) {
  jx_program *p = jx_lower_custom_calls((jx_program *)given); /* as the executable runs it */
  if (!p) {
    jx_clear_error();
    return 0;
  }
  jx_fusion_group *groups = NULL;
  int ng = jx_fuse(p, &groups);
  double t = 0;
  for (int k = 0; k < ng; k++) {
    const jx_fusion_group *g = &groups[k];
    if (g->skip) continue;
    if (jx_fusion_group_is_kernel(g)) {
      double flops = 0, bytes = 0;
      for (int e = g->first; e < g->first + g->count; e++) flops += jx_eqn_flops(p, &p->eqns[e]);
      for (int l = 0; l < g->nloads; l++) bytes += jx_aval_bytes(p->avals[g->loads[l].var]);
      for (int o = 0; o < g->nstores; o++) bytes += jx_aval_bytes(p->avals[g->stores[o]]);
      t += step_time(cm, flops, bytes);
      continue;
    }
    for (int e = g->first; e < g->first + g->count; e++) {
      const jx_eqn *q = &p->eqns[e];
      if (is_collective(q) || q->prim == &jx_prim_reshape || q->prim == &jx_prim_squeeze ||
          q->prim == &jx_prim_expand_dims)
        continue; /* priced by the alpha-beta model; a new shape of the same bytes */
      if (q->prim == &jx_prim_remat && q->nsub >= 1) {
        t += program_time(cm, q->sub[0]);
        continue;
      }
      double bytes = 0;
      for (int i = 0; i < q->nin; i++) bytes += jx_aval_bytes(p->avals[q->in[i]]);
      for (int o = 0; o < q->nout; o++) bytes += jx_aval_bytes(p->avals[q->out[o]]);
      t += step_time(cm, jx_eqn_flops(p, q), bytes);
    }
  }
  if (ng < 0) jx_clear_error();
  free(groups);
  jx_program_release(p);
  return t;
}

double jx_compute_time(const jx_comm_model *cm, const jx_program *device) {
  if (!(cm->mem_bytes_per_s > 0)) {
    jx_cost c = {0};
    jx_program_cost(device, &c);
    return c.flops / cm->flops_per_s;
  }
  return program_time(cm, device);
}

/* ---- caches ---- */

static uint64_t mesh_key(const jx_mesh *m) {
  uint64_t h = jx_hash_u64(JX_HASH_SEED, (uint64_t)m->ndim);
  for (int a = 0; a < m->ndim; a++) h = jx_hash_u64(h, (uint64_t)m->size[a]);
  h = jx_hash_u64(h, (uint64_t)jx_pool_threads());
  h = jx_hash_u64(h, FIGURES_VERSION);
  return jx_hash_u64(h, (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
}

typedef struct {
  uint64_t key;
  jx_comm_model cm;
} kept;

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static kept kept_models[CACHED];
static int nkept, next_kept; /* a ring of the last CACHED meshes */

/* Puts the figures of the meshes of one key in the process's list: in
 * place of older ones of that key, else in the ring's next slot. */
static void keep(uint64_t key, const jx_comm_model *cm) {
  pthread_mutex_lock(&kept_lock);
  int at = -1;
  for (int k = 0; k < nkept && at < 0; k++)
    if (kept_models[k].key == key) at = k;
  if (at < 0) {
    at = next_kept;
    next_kept = (next_kept + 1) % CACHED;
    if (nkept < CACHED) nkept++;
  }
  kept_models[at] = (kept){key, *cm};
  pthread_mutex_unlock(&kept_lock);
}

static int disk_path(char *out, size_t n, uint64_t key) {
  char dir[4096];
  if (!jx_kernel_cache_dir(dir, sizeof dir)) return 0;
  snprintf(out, n, "%s/machine_model_%016llx", dir, (unsigned long long)key);
  return 1;
}

/* The figures a file holds: the compute rate, the memory bandwidth, the
 * cost of a step and the idle share, then alpha, beta and the rendezvous's
 * wait per axis. */
static int disk_read(const char *path, const jx_mesh *m, jx_comm_model *cm) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fscanf(f, "%lf %lf %lf %lf", &cm->flops_per_s, &cm->mem_bytes_per_s, &cm->step_s,
                  &cm->idle_share) == 4 &&
           cm->flops_per_s > 0 && cm->mem_bytes_per_s > 0 && cm->step_s >= 0 &&
           cm->idle_share >= 0 && cm->idle_share < 1;
  for (int a = 0; a < m->ndim && ok; a++)
    ok = fscanf(f, "%lf %lf %lf", &cm->link[a].alpha_s, &cm->link[a].beta_s_per_byte,
                &cm->link[a].wait_s) == 3 &&
         cm->link[a].alpha_s >= 0 && cm->link[a].beta_s_per_byte >= 0 && cm->link[a].wait_s >= 0;
  fclose(f);
  return ok;
}

static void disk_write(const char *path, const jx_mesh *m, const jx_comm_model *cm) {
  /* written whole then renamed: a reader never sees half a model */
  char tmp[4500];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  int ok = fprintf(f, "%.17g %.17g %.17g %.17g\n", cm->flops_per_s, cm->mem_bytes_per_s, cm->step_s,
                   cm->idle_share) > 0;
  for (int a = 0; a < m->ndim && ok; a++)
    ok = fprintf(f, "%.17g %.17g %.17g\n", cm->link[a].alpha_s, cm->link[a].beta_s_per_byte,
                 cm->link[a].wait_s) > 0;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) remove(tmp);
}

jx_status jx_comm_model_measured(jx_comm_model *cm, jx_mesh *m) {
  uint64_t key = mesh_key(m);
  pthread_mutex_lock(&kept_lock);
  for (int k = 0; k < nkept; k++)
    if (kept_models[k].key == key) {
      *cm = kept_models[k].cm;
      pthread_mutex_unlock(&kept_lock);
      return JX_OK;
    }
  pthread_mutex_unlock(&kept_lock);
  char path[4200];
  int on_disk = disk_path(path, sizeof path, key);
  jx_comm_model_uniform(cm, m, 0, 1, 1);
  jx_status st = JX_OK;
  if (!on_disk || !disk_read(path, m, cm)) {
    jx_comm_model_uniform(cm, m, 0, 1, 1);
    st = jx_comm_model_calibrate(cm, m);
    if (!st) st = jx_compute_rate_calibrate(m, cm);
    if (!st) st = jx_idle_share_calibrate(m, cm);
    if (st) return st;
    atomic_fetch_add(&measurements, 1);
    if (on_disk) disk_write(path, m, cm);
  }
  keep(key, cm);
  return JX_OK;
}

void jx_comm_model_keep(const jx_mesh *m, const jx_comm_model *cm) { keep(mesh_key(m), cm); }

double jx_device_memory_default(const jx_mesh *m) {
  double host = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  int local = 0;
  for (int p = 0; p < m->ndev; p++) local += jx_device_is_local(m->device[p]);
  return host > 0 ? host / (local > 0 ? local : 1) : 1e300;
}
