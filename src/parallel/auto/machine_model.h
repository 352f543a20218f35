/* The figures the sharded jit plans JX_AUTO layouts with, measured on the
 * mesh: the collectives' alpha and beta per axis (jx_comm_model_calibrate)
 * and one device's compute rate while every device of the mesh computes at
 * once (a data-parallel matmul through the sharded jit, as a plan's
 * equations run). Measured once per machine and mesh shape: kept for the
 * process and in the kernel cache directory beside the compiled kernels. */
#ifndef JX_SRC_PARALLEL_AUTO_MACHINE_MODEL_H
#define JX_SRC_PARALLEL_AUTO_MACHINE_MODEL_H

#include "comm_model.h"

/* cm: m's measured figures (from the process's or the disk's cache, else
 * measured now, in about a second). An error for a mesh with devices of
 * other processes, which this process cannot time. */
jx_status jx_comm_model_measured(jx_comm_model *cm, jx_mesh *m);

/* Makes cm the figures of meshes of m's shape for the rest of the process
 * (jx_sharding_plan_figures: planning a cluster on paper). */
void jx_comm_model_keep(const jx_mesh *m, const jx_comm_model *cm);

/* One device's f32 FLOP/s while all of m's devices run a 256x256x256
 * matmul at once (best of a few rounds). */
jx_status jx_compute_rate_calibrate(jx_mesh *m, double *flops_per_s);

/* How many times this process has measured a mesh (a cache hit does not):
 * the tests check the cache is used. */
int64_t jx_machine_model_measurements(void);

/* The memory a plan on m may hold per device when none is given: the
 * host's physical memory shared by m's devices (CPU devices live in it). */
double jx_device_memory_default(const jx_mesh *m);

#endif
