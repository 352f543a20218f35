/* Measured planning figures (machine_model.h) and their caches. */
#define _POSIX_C_SOURCE 200809L
#include "machine_model.h"

#include <jx/jx.h>
#include <jx/parallel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../base/error.h"
#include "../../base/hash.h"
#include "../../base/threadpool.h"
#include "../../base/spin.h"
#include "../../base/cache_dir.h"
#include "../device.h"
#include "../propagate.h"

enum { SIDE = 256, ROUNDS = 5, CACHED = 16 };

static atomic_llong measurements;

int64_t jx_machine_model_measurements(void) { return (int64_t)atomic_load(&measurements); }

static void matmul_fn(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_matmul(in[0], in[1]);
}

jx_status jx_compute_rate_calibrate(jx_mesh *m, double *flops_per_s) {
  /* x's rows split over every axis, w whole: each device multiplies its
   * SIDE x SIDE block by w, with no communication */
  jx_pspec rows = jx_pspec_replicated(2);
  for (int a = 0; a < m->ndim; a++)
    if (m->size[a] > 1) rows.ax[0][rows.n[0]++] = (int8_t)a;
  jx_sharding *sh[2] = {jx_pspec_sharding(m, &rows), NULL};
  if (!sh[0]) return jx_last_status();
  jx_status st = JX_OK;
  jx_scope_begin();
  jx_array *in[2] = {jx_ones(JX_F32, JX_SHAPE(SIDE * (int64_t)m->ndev, SIDE)),
                     jx_ones(JX_F32, JX_SHAPE(SIDE, SIDE))};
  jx_fn *mm = jx_fn_create("calibration_matmul", 2, 1, matmul_fn, NULL);
  sh[1] = jx_pspec_sharding(m, &(jx_pspec){.rank = 2});
  jx_fn *j = mm && sh[1] ? jx_jit(mm, &(jx_jit_options){.in_shardings = sh}) : NULL;
  int64_t best = INT64_MAX;
  for (int r = 0; r <= ROUNDS && j && !st; r++) { /* the first compiles */
    int64_t t0 = jx_now_ns();
    jx_array *out = NULL;
    st = jx_call(j, in, &out);
    if (!st) st = jx_block_until_ready(out);
    int64_t t = jx_now_ns() - t0;
    if (r && t < best) best = t;
  }
  if (!j && !st) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_fn_release(j);
  jx_fn_release(mm);
  jx_scope_end();
  jx_sharding_release(sh[0]);
  jx_sharding_release(sh[1]);
  if (!st) *flops_per_s = 2.0 * SIDE * SIDE * SIDE / (1e-9 * (double)(best > 0 ? best : 1));
  return st;
}

/* ---- caches ---- */

static uint64_t mesh_key(const jx_mesh *m) {
  uint64_t h = jx_hash_u64(JX_HASH_SEED, (uint64_t)m->ndim);
  for (int a = 0; a < m->ndim; a++) h = jx_hash_u64(h, (uint64_t)m->size[a]);
  h = jx_hash_u64(h, (uint64_t)jx_pool_threads());
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
  snprintf(out, n, "%s/comm_model_%016llx", dir, (unsigned long long)key);
  return 1;
}

/* The figures a file holds: the compute rate, then alpha and beta per axis. */
static int disk_read(const char *path, const jx_mesh *m, jx_comm_model *cm) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fscanf(f, "%lf", &cm->flops_per_s) == 1 && cm->flops_per_s > 0;
  for (int a = 0; a < m->ndim && ok; a++)
    ok = fscanf(f, "%lf %lf", &cm->link[a].alpha_s, &cm->link[a].beta_s_per_byte) == 2 &&
         cm->link[a].alpha_s >= 0 && cm->link[a].beta_s_per_byte >= 0;
  fclose(f);
  return ok;
}

static void disk_write(const char *path, const jx_mesh *m, const jx_comm_model *cm) {
  /* written whole then renamed: a reader never sees half a model */
  char tmp[4500];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  int ok = fprintf(f, "%.17g\n", cm->flops_per_s) > 0;
  for (int a = 0; a < m->ndim && ok; a++)
    ok = fprintf(f, "%.17g %.17g\n", cm->link[a].alpha_s, cm->link[a].beta_s_per_byte) > 0;
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
    if (!st) st = jx_compute_rate_calibrate(m, &cm->flops_per_s);
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
