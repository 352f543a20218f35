/* The automatic sharding planner's model of communication: an alpha-beta
 * figure per mesh axis (alpha: the latency of one message, beta: seconds per
 * byte on one link) and the ring formulas that turn it into the time of each
 * collective kind. The figures are set by hand (planning for a cluster on
 * paper) or measured on the mesh by a short calibration of the collectives
 * engine.
 *
 * Ring formulas for a group of n devices, S the bytes each device holds of
 * the collective's largest buffer (all_reduce: its buffer; all_gather: the
 * gathered result; reduce_scatter: the input; all_to_all: its buffer;
 * permute: the block sent):
 *   all_reduce      2(n-1) alpha + 2 (n-1)/n S beta  (reduce_scatter + all_gather)
 *   all_gather        (n-1) alpha +   (n-1)/n S beta
 *   reduce_scatter    (n-1) alpha +   (n-1)/n S beta
 *   all_to_all        (n-1) alpha +   (n-1)/n S beta  (pairwise exchange)
 *   permute                 alpha +           S beta
 * plus, once per collective, the rendezvous's wait (jx_link_model.wait_s).
 * A group of one device costs nothing. A group over several mesh axes is
 * modelled as one ring over all of them on the slowest of their links. */
#ifndef JX_SRC_PARALLEL_AUTO_COMM_MODEL_H
#define JX_SRC_PARALLEL_AUTO_COMM_MODEL_H

#include "../mesh.h"

typedef enum {
  JX_COLL_ALL_REDUCE,
  JX_COLL_ALL_GATHER,
  JX_COLL_REDUCE_SCATTER,
  JX_COLL_ALL_TO_ALL,
  JX_COLL_PERMUTE,
  JX_COLL_KINDS
} jx_coll_kind;

/* One mesh axis's links. */
typedef struct {
  double alpha_s;         /* seconds per message */
  double beta_s_per_byte; /* seconds per byte */
  /* Seconds a collective on this axis costs beyond alpha and beta when the
   * devices time-share the cores (jx_devices_per_core): it is a barrier,
   * and devices that arrive after computing sleep and are woken in turn,
   * on cores the other devices need; 0 when every device has a core. */
  double wait_s;
} jx_link_model;

typedef struct {
  int naxes;
  int64_t size[JX_MAX_RANK];       /* devices along each axis */
  jx_link_model link[JX_MAX_RANK]; /* each axis's figures */
  double flops_per_s;              /* one device's compute rate, for the planner's compute time */
  /* The estimate's roofline (machine_model.h's jx_compute_time): one
   * device's memory bandwidth and the fixed cost of one step (a kernel or an
   * equation run alone), while every device of the mesh runs; 0: not
   * modelled (figures given on paper), compute is flops at flops_per_s. */
  double mem_bytes_per_s, step_s;
  /* The share of the cores' time the devices leave idle when they
   * time-share the cores (jx_devices_per_core): every collective is a
   * barrier, and the kernel runs the devices a barrier releases on the core
   * each last ran on, so a core whose devices all wait at the next barrier
   * idles while the other core's queue drains. Measured on a program of
   * compute phases and collectives (machine_model.h); the estimate's step
   * is its busy time over 1 - idle_share. 0 when every device has a core
   * (its barriers' waits are in the measured alpha) or on paper. */
  double idle_share;
} jx_comm_model;

/* A model of m with the same figures on every axis: alpha seconds per
 * message, bytes_per_s per link, flops_per_s per device. */
void jx_comm_model_uniform(jx_comm_model *cm, const jx_mesh *m, double alpha_s, double bytes_per_s,
                           double flops_per_s);

/* Seconds of a collective of this kind over the group of mesh axes in
 * axes_mask (bit a: axis a), S = bytes as the header comment says. */
double jx_comm_model_time(const jx_comm_model *cm, jx_coll_kind kind, uint32_t axes_mask,
                          double bytes);

/* How many of m's devices a core runs when they outnumber the host's
 * cores (each device computes on a thread of its own, so they time-share
 * the cores: the work of all the devices on a core adds up), rounded up:
 * the slowest core's; 0 when every device has a core of its own. */
int jx_devices_per_core(const jx_mesh *m);

/* Measures every axis of m (whose devices must all belong to this process)
 * with all_reduce rounds of a small and a large message on the collectives
 * engine, every device at once, and fits alpha and beta; the compute rate
 * is left as cm had it (jx_comm_model_uniform's). A round takes its
 * slowest rank's wall time, or, when the devices time-share the cores
 * (jx_devices_per_core), the ranks' mean CPU time in it times the devices
 * a core runs: their time with the cores to themselves, whatever other jobs
 * then ran. Each figure is the least of several trials (what the machine
 * does when it has its cores: other jobs only ever add to a trial).
 * When the devices time-share the cores, wait_s is measured too: trials
 * of compute phases each followed by a small all_reduce on every device,
 * as a program's collectives follow its kernels, in turn with trials of the
 * compute phases alone; the median difference in CPU time, times the
 * devices a core runs, less the small all_reduce's own time. Takes a few
 * hundred milliseconds on CPU devices. */
jx_status jx_comm_model_calibrate(jx_comm_model *cm, jx_mesh *m);

#endif
