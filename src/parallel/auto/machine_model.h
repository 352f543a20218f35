/* The figures the sharded jit plans JX_AUTO layouts and estimates steps
 * with, measured on the mesh: the collectives' alpha and beta per axis and
 * kind (jx_comm_model_calibrate) and one device's compute rates, memory
 * bandwidths and cost per step while every device of the mesh computes at once
 * (data-parallel programs through the sharded jit, as a plan's equations
 * run). Measured once per machine and mesh shape: kept for the
 * process and in the kernel cache directory beside the compiled kernels. */
#ifndef JX_SRC_PARALLEL_AUTO_MACHINE_MODEL_H
#define JX_SRC_PARALLEL_AUTO_MACHINE_MODEL_H

#include "../../ir/program.h"
#include "comm_model.h"

/* cm: m's measured figures (from the process's or the disk's cache, else
 * measured now, in about a second). An error for a mesh with devices of
 * other processes, which this process cannot time. */
jx_status jx_comm_model_measured(jx_comm_model *cm, jx_mesh *m);

/* Makes cm the figures of meshes of m's shape for the rest of the process
 * (jx_sharding_plan_figures: planning a cluster on paper). */
void jx_comm_model_keep(const jx_mesh *m, const jx_comm_model *cm);

/* One device's figures while all of m's devices run at once (a few rounds
 * of each, through the sharded jit, as a plan's equations run):
 * cm->flops_per_s from a chain of 16 256x256x256 products a call (one
 * call's fixed cost spread over 16 products), each with a weight of its own
 * (a step's weights come from memory, not the caches);
 * cm->transposed_flops_per_s from the same chain with the weights read
 * transposed (x @ w^T, as a step's backward pass multiplies);
 * cm->small_flops_per_s from a chain of batches of 8 128x64 by 64x64
 * products (an attention's heads); cm->mem_bytes_per_s from an
 * elementwise kernel moving 4 MB and cm->cached_bytes_per_s from a chain
 * of 16 moving 512 KB, each reading what the one before wrote (as a
 * step's kernels read their producers' results while the caches hold
 * them: 4.4-5.2 times the first's bandwidth here), both less a call of one
 * moving 8 KB (a call's own cost); cm->step_s, the fixed cost of a step,
 * from a chain of 64 tiny matmuls against one. All timed together
 * (jx_calibration_time). */
jx_status jx_compute_rate_calibrate(jx_mesh *m, jx_comm_model *cm);
/* The spec "(a,b,...)" of a first dimension split over every axis of m,
 * written to out (JX_EVERY_AXIS_SPEC_CAP bytes): the blocks the
 * calibrations' per-device programs run on. */
#define JX_EVERY_AXIS_SPEC_CAP (JX_MAX_RANK * (JX_MESH_NAME_CAP + 1) + 3)
void jx_every_axis_spec(const jx_mesh *m, char *out);

/* A program the calibrations time: a function over a mesh's devices and
 * its inputs, placed on them. */
typedef struct {
  jx_fn *fn;
  jx_array **in;
} jx_calibration_program;

/* The time of one call of each of n programs over m's devices
 * (secs[i]), from rounds of calls after one that compiles, each round
 * calling every program in turn (so that a burst of other work on the
 * machine slows one round of each, not every round of one): a program's
 * best wall time, or, with more devices than cores (jx_devices_per_core),
 * a device's share of the least CPU time of a call (every thread) times
 * the devices a core runs: the slowest core's time through its devices'
 * work with the cores to themselves (other jobs on the cores only ever
 * add to a call's CPU time, so the least of several calls is the steady
 * figure of the machine). */
jx_status jx_calibration_time(const jx_mesh *m, int n, const jx_calibration_program *p,
                              double *secs);
/* cm->idle_share (comm_model.h) of m: the share of the cores' time left
 * idle by calls of a program of compute phases (a 128x256 by 256x256
 * matmul per device), each ended by a psum over m's split axes in turn:
 * the machine's idle time during the calls (/proc/stat) against it plus
 * the calls' CPU time (every thread), over calls long enough together for
 * the idle clock's ticks. 0, unmeasured, when every device of m has a
 * core. */
jx_status jx_idle_share_calibrate(jx_mesh *m, jx_comm_model *cm);
/* Seconds every core of the machine has been idle since boot (/proc/stat's
 * idle and iowait, in clock ticks), or -1 where that is not known: the idle
 * calibration's clock, and the benchmarks' for a step's idle share. */
double jx_machine_idle_s(void);

/* Seconds of flops and bytes on one device by the roofline: the larger of
 * flops / flops_per_s and bytes / mem_bytes_per_s (flops alone with no
 * bandwidth: figures on paper). The estimate's per step (below) and the
 * planner's per strategy (strategies.h). */
double jx_roofline_time(const jx_comm_model *cm, double flops, double bytes);

/* Seconds one device takes to move `bytes` (a step's loads and stores) at
 * the bandwidth of their size: cm's cached bandwidth up to the 512 KB its
 * kernels moved, the memory's from the 4 MB its kernel moved, and between
 * them geometrically in the bytes. 0 with no bandwidth (figures on
 * paper). */
double jx_bytes_time(const jx_comm_model *cm, double bytes);

/* Seconds one device computes its per-device program `device`, per step as
 * the executable runs it (jx_fuse's groups: a fused kernel, or an equation
 * alone), plus step_s each:
 * - a product: its flops at the rate of its layout (transposed_flops_per_s
 *   when its right operand's last dimension is contracted, else
 *   flops_per_s), scaled toward small_flops_per_s as its arithmetic
 *   intensity (flops per byte of operands and result) falls from a
 *   256-cubed product's to the small products';
 * - an attention call the executable keeps whole (compile/attention_call.h:
 *   one fused kernel, the scores never in memory): its composite's flops
 *   and its operands' and results' bytes, as below;
 * - anything else: the larger of its flops at flops_per_s and its bytes
 *   (jx_bytes_time) as jx_fn_cost counts them: a kernel's loads and
 *   stores, an equation's operands and results, a slice's result twice
 *   (read, then written).
 * Collectives are left out (the alpha-beta model prices them) and so are
 * views kernels read through. With no bandwidth (figures on paper):
 * flops / flops_per_s. */
double jx_compute_time(const jx_comm_model *cm, const jx_program *device);

/* How many times this process has measured a mesh (a cache hit does not):
 * the tests check the cache is used. */
int64_t jx_machine_model_measurements(void);

/* The memory a plan on m may hold per device when none is given: the
 * host's physical memory shared by m's devices (CPU devices live in it). */
double jx_device_memory_default(const jx_mesh *m);

#endif
