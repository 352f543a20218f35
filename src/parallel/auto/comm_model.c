/* The alpha-beta model of the collectives (comm_model.h) and its
 * calibration: every device of the mesh runs all_reduce rounds on its
 * group along one axis, on its own thread, as a device program would. */
#define _POSIX_C_SOURCE 200809L
#include "comm_model.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../base/error.h"
#include "../comm.h"
#include "../device.h"

void jx_comm_model_uniform(jx_comm_model *cm, const jx_mesh *m, double alpha_s, double bytes_per_s,
                           double flops_per_s) {
  memset(cm, 0, sizeof *cm);
  cm->naxes = m->ndim;
  for (int a = 0; a < m->ndim; a++) {
    cm->size[a] = m->size[a];
    cm->link[a] = (jx_link_model){alpha_s, 1.0 / bytes_per_s, 0};
  }
  cm->flops_per_s = flops_per_s;
}

double jx_comm_model_time(const jx_comm_model *cm, jx_coll_kind kind, uint32_t axes_mask,
                          double bytes) {
  double n = 1, alpha = 0, beta = 0, wait = 0;
  for (int a = 0; a < cm->naxes; a++) {
    if (!(axes_mask & (1u << a))) continue;
    n *= (double)cm->size[a];
    alpha = fmax(alpha, cm->link[a].alpha_s);
    beta = fmax(beta, cm->link[a].beta_s_per_byte);
    wait = fmax(wait, cm->link[a].wait_s);
  }
  if (n <= 1) return 0;
  double share = (n - 1) / n * bytes;
  switch (kind) {
  case JX_COLL_ALL_REDUCE: return wait + 2 * (n - 1) * alpha + 2 * share * beta;
  case JX_COLL_ALL_GATHER:
  case JX_COLL_REDUCE_SCATTER:
  case JX_COLL_ALL_TO_ALL: return wait + (n - 1) * alpha + share * beta;
  case JX_COLL_PERMUTE: return wait + alpha + bytes * beta;
  case JX_COLL_KINDS: break;
  }
  return 0;
}

/* ---- calibration ---- */

enum {
  SMALL_COUNT = 8,
  LARGE_COUNT = 1 << 16,
  SMALL_ROUNDS = 20,
  LARGE_ROUNDS = 4,
  TRIALS = 5,      /* of each figure, the least taken */
  WAIT_ROUNDS = 8, /* compute phases per trial of the wait */
  WAIT_TRIALS = 7, /* pairs of trials of the wait, the median taken */
  WORK_PASSES = 4  /* over the rank's LARGE_COUNT floats, per compute phase */
};

typedef struct {
  jx_comm *comm;
  int rank;
  int waits;                       /* measure the rendezvous's wait too */
  float *buf;                      /* LARGE_COUNT */
  double small_s, large_s;         /* seconds per round */
  double small_cpu_s, large_cpu_s; /* the rank's CPU seconds per round */
  double wait_cpu_s;               /* the rendezvous's CPU per compute phase */
  jx_status st;
  char err[512];
} rank_job;

static double clock_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A device's compute between two collectives: passes over its buffer. */
static void work(float *buf) {
  for (int p = 0; p < WORK_PASSES; p++)
    for (size_t i = 0; i < LARGE_COUNT; i++) buf[i] = buf[i] * 0.5f + 1.0f;
}

/* Seconds per round, after a barrier lines the ranks up, of wall time and
 * of the rank's own CPU time, the least of `trials`: a round is a compute
 * phase (when `busy`) then an all_reduce of count floats (when count > 0). */
static jx_status time_rounds(rank_job *j, size_t count, int rounds, int busy, int trials,
                             double *secs, double *cpu) {
  jx_status st = JX_OK;
  *secs = *cpu = INFINITY;
  for (int t = 0; t < trials && !st; t++) {
    st = jx_comm_barrier(j->comm, j->rank, 0);
    double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (int r = 0; r < rounds && !st; r++) {
      if (busy) work(j->buf);
      if (count)
        st = jx_comm_all_reduce(j->comm, j->rank, j->buf, j->buf, count, JX_F32, JX_REDUCE_SUM, 0);
    }
    *secs = fmin(*secs, (clock_s(CLOCK_MONOTONIC) - t0) / rounds);
    *cpu = fmin(*cpu, (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) / rounds);
  }
  return st;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The rendezvous's CPU per compute phase: trials of compute phases with a
 * small all_reduce after each and without, in turn (so that a pair sees the
 * same load), the median of the pairs' differences. */
static jx_status time_waits(rank_job *j) {
  double diff[WAIT_TRIALS] = {0}, wall, busy, alone;
  jx_status st = JX_OK;
  for (int t = 0; t < WAIT_TRIALS && !st; t++) {
    st = time_rounds(j, SMALL_COUNT, WAIT_ROUNDS, 1, 1, &wall, &busy);
    if (!st) st = time_rounds(j, 0, WAIT_ROUNDS, 1, 1, &wall, &alone);
    diff[t] = busy - alone;
  }
  if (!st) st = jx_comm_barrier(j->comm, j->rank, 0);
  qsort(diff, WAIT_TRIALS, sizeof *diff, cmp_double);
  j->wait_cpu_s = diff[WAIT_TRIALS / 2];
  return st;
}

static void *rank_main(void *arg) {
  rank_job *j = arg;
  j->st = time_rounds(j, SMALL_COUNT, SMALL_ROUNDS, 0, TRIALS, &j->small_s, &j->small_cpu_s);
  if (!j->st)
    j->st = time_rounds(j, LARGE_COUNT, LARGE_ROUNDS, 0, TRIALS, &j->large_s, &j->large_cpu_s);
  if (!j->st && j->waits) j->st = time_waits(j);
  if (j->st) snprintf(j->err, sizeof j->err, "%s", jx_last_error());
  jx_clear_error();
  return NULL;
}

/* alpha and beta from the all_reduce times of a small and a large message
 * over n devices; a fit that comes out non-positive (timer noise) charges
 * the whole small time to latency and the whole large time to bandwidth. */
static jx_link_model fit(double n, double small_s, double large_s) {
  double a = 2 * (n - 1), bs = 2 * (n - 1) / n * SMALL_COUNT * 4.0,
         bl = 2 * (n - 1) / n * LARGE_COUNT * 4.0;
  jx_link_model l;
  l.beta_s_per_byte = (large_s - small_s) / (bl - bs);
  if (!(l.beta_s_per_byte > 0) || !isfinite(l.beta_s_per_byte)) l.beta_s_per_byte = large_s / bl;
  l.alpha_s = (small_s - bs * l.beta_s_per_byte) / a;
  if (!(l.alpha_s > 0) || !isfinite(l.alpha_s)) l.alpha_s = small_s / a;
  return l;
}

static jx_status calibrate_axis(jx_mesh *m, int ax, jx_link_model *out) {
  int n = m->ndev;
  rank_job *jobs = calloc((size_t)n, sizeof *jobs);
  pthread_t *threads = calloc((size_t)n, sizeof *threads);
  float *bufs = calloc((size_t)n * LARGE_COUNT, sizeof *bufs);
  jx_status st = JX_OK;
  if (!jobs || !threads || !bufs)
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_comm_model_calibrate: out of memory");
  int started = 0, per_core = jx_devices_per_core(m);
  for (int p = 0; p < n && !st; p++) {
    jobs[p].waits = per_core > 0;
    jobs[p].buf = bufs + (size_t)p * LARGE_COUNT;
    jobs[p].comm = jx_mesh_comm(m, &ax, 1, p, &jobs[p].rank);
    if (!jobs[p].comm) st = jx_last_status();
  }
  for (int p = 0; p < n && !st; p++, started++)
    if (pthread_create(&threads[p], NULL, rank_main, &jobs[p]) != 0)
      st = jx_error_set(JX_ERR_INTERNAL, "jx_comm_model_calibrate: cannot start a device thread");
  /* a thread that could not start leaves its peers waiting until the
   * engine's deadline, which then fails them */
  for (int p = 0; p < started; p++) pthread_join(threads[p], NULL);
  double small_s = 0, large_s = 0, small_cpu = 0, large_cpu = 0, waited = 0;
  for (int p = 0; p < started && !st; p++) {
    if (jobs[p].st) {
      st = jx_error_set(jobs[p].st, "jx_comm_model_calibrate: mesh axis '%s', device %d: %s",
                        m->name[ax], m->device[p], jobs[p].err);
      break;
    }
    small_s = fmax(small_s, jobs[p].small_s); /* a round ends when its slowest rank does */
    large_s = fmax(large_s, jobs[p].large_s);
    small_cpu += jobs[p].small_cpu_s / n;
    large_cpu += jobs[p].large_cpu_s / n;
    waited += jobs[p].wait_cpu_s / n;
  }
  if (per_core > 0) { /* time-shared: the slowest core's ranks' CPU time */
    small_s = small_cpu * per_core;
    large_s = large_cpu * per_core;
  }
  if (!st) {
    *out = fit((double)m->size[ax], small_s, large_s);
    /* the rendezvous after a compute phase beyond the small all_reduce alone */
    out->wait_s = per_core > 0 ? fmax(0, waited * per_core - small_s) : 0;
  }
  free(jobs);
  free(threads);
  free(bufs);
  return st;
}

int jx_devices_per_core(const jx_mesh *m) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int local = 0;
  for (int p = 0; p < m->ndev; p++) local += jx_device_is_local(m->device[p]);
  return online > 0 && local > online ? (int)((local + online - 1) / online) : 0;
}

jx_status jx_comm_model_calibrate(jx_comm_model *cm, jx_mesh *m) {
  if (!cm || !m)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_comm_model_calibrate: NULL %s",
                        cm ? "mesh" : "model");
  for (int p = 0; p < m->ndev; p++) {
    jx_device *d = jx_device_get(m->device[p]);
    if (!d) return jx_last_status();
    if (jx_device_process_index(d) != jx_devices_process_index())
      return jx_error_set(JX_ERR_UNIMPLEMENTED,
                          "jx_comm_model_calibrate: device %d of the mesh belongs to process %d; "
                          "calibration measures meshes of this process's devices only",
                          m->device[p], jx_device_process_index(d));
  }
  cm->naxes = m->ndim;
  for (int a = 0; a < m->ndim; a++) {
    cm->size[a] = m->size[a];
    /* an axis of one device has no links */
    cm->link[a] = (jx_link_model){0, 0, 0};
    if (m->size[a] > 1) {
      jx_status st = calibrate_axis(m, a, &cm->link[a]);
      if (st) return st;
    }
  }
  return JX_OK;
}
