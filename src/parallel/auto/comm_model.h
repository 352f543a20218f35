/* The automatic sharding planner's model of communication: alpha-beta
 * figures per mesh axis and collective kind (alpha: the latency of one
 * message, beta: seconds per byte on one link) and the ring formulas that
 * turn them into the time of each collective. The figures are set by hand
 * (planning for a cluster on paper: the same for every kind) or measured
 * on the mesh, kind by kind, through the executor as a step runs them
 * (their copies, output buffers and rendezvous in the figures).
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
 * A group of one device costs nothing. A group over several mesh axes is
 * modelled as one ring over all of them on the slowest of their links, or
 * by their own figures where measured (jx_comm_model.group). */
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

/* Seconds per byte of a block of `bytes`, piecewise: cached_s_per_byte for
 * its first knee_bytes (what fits the caches moves faster), s_per_byte for
 * the rest. On paper: no knee, s_per_byte throughout. */
typedef struct {
  double knee_bytes, cached_s_per_byte, s_per_byte;
} jx_byte_rate;

/* Seconds r gives a block of `bytes`. */
double jx_byte_rate_time(const jx_byte_rate *r, double bytes);

/* One mesh axis's links, per collective kind: seconds per message, and per
 * byte of S (the header comment). */
typedef struct {
  double alpha_s[JX_COLL_KINDS];
  jx_byte_rate beta[JX_COLL_KINDS];
} jx_link_model;

/* The ring formula's terms of a kind over n devices (the header comment):
 * the time is messages * alpha + moved * (S's seconds at beta). */
void jx_ring_terms(jx_coll_kind kind, double n, double *messages, double *moved);

/* A link with the same figures for every kind and size (figures on
 * paper). */
jx_link_model jx_link_uniform(double alpha_s, double beta_s_per_byte);

typedef struct {
  int naxes;
  int64_t size[JX_MAX_RANK];       /* devices along each axis */
  jx_link_model link[JX_MAX_RANK]; /* each axis's figures */
  /* The figures of collectives over all of group_axes (bit a: axis a) at
   * once, measured where two or more axes are split: a collective's cost
   * through the executor is mostly its own, not its messages', so a ring
   * over several axes priced by one axis's alpha per message misprices it.
   * group_axes 0: not measured (a group over several axes rides the
   * slowest of their links). */
  uint32_t group_axes;
  jx_link_model group;
  /* One device's compute rate, for the planner's compute time: products
   * of large blocks read from memory. */
  double flops_per_s;
  /* The estimate's roofline (machine_model.h's jx_compute_time), measured
   * while every device of the mesh runs; 0: not modelled (figures given on
   * paper), compute is flops at flops_per_s:
   * - the rate of products whose right operand is read transposed (its
   *   contracting dimension last) and of small products (a batch of
   *   128x64 by 64x64 ones, as an attention's heads multiply);
   * - one device's memory bandwidth for blocks past the caches and for
   *   blocks that stay in them;
   * - the fixed cost of one step (a kernel or an equation run alone). */
  double transposed_flops_per_s, small_flops_per_s;
  double mem_bytes_per_s, cached_bytes_per_s, step_s;
  /* The bytes a collective over a dimension other than the first reorders
   * on its device (report.c: the blocks of an all_gather, a reduce_scatter
   * or an all_to_all put in place), measured on all_to_all
   * (jx_comm_model_calibrate); no rate (0 s per byte): at the bandwidth
   * (machine_model.h's jx_bytes_time). */
  jx_byte_rate reorder;
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

/* Measures every axis of m (whose devices must all belong to this
 * process), and all its split axes together where there are several, for
 * every collective kind, through the executor as a step runs them
 * (comm_calibration.c): a per-device program chains collectives of the
 * kind over the group on blocks of three sizes (a few rows, 256 KB, 2 MB),
 * each result the next one's operand, and alpha and beta (with its knee at
 * 256 KB) are fitted to the chains' time per collective, less a call that
 * only returns its block; and the reorder, from all_to_all along the
 * columns against along the rows. The chains of a group are timed together
 * (machine_model.h's jx_calibration_time). The compute figures are left
 * as cm had them. A few seconds per group on CPU devices. */
jx_status jx_comm_model_calibrate(jx_comm_model *cm, jx_mesh *m);

#endif
