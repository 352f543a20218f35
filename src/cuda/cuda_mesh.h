/* CUDA devices in meshes: a per-device program (the sharded jit's, from
 * partition.c) run by every device of its mesh on a GPU of its own.
 *
 * Devices: this process's i-th jx device runs on CUDA device first + i,
 * where first is 0 for a process alone on its host and, when several
 * processes of the job share the host, the GPU its local rank picks
 * (jx_process_gpu) times the process's device count: local process k's L
 * devices run on GPUs k*L .. k*L+L-1 (with one device each, GPU k). A mesh
 * with more of this process's devices than there are GPUs from first on is
 * an error naming the mesh and both counts.
 *
 * One executable per (program, mesh position), each built by
 * jx_cuda_executable_build_collective for its device from the same program:
 * the kernels' translation unit is the same for all, so NVRTC compiles it
 * once (the cubin cache) and each device loads the cubin. The program's
 * attached runner picks the executable of the calling device thread's mesh
 * position (jx_spmd_current), so jx_spmd_run's threads each drive their GPU.
 *
 * Collectives (psum, pmax, pmin, all_gather, psum_scatter, all_to_all,
 * ppermute) are device steps: they run on the executor's device buffers
 * through the NCCL engine (nccl_engine.h), over the communicator of the
 * mesh axes they name, made when the program is attached (that is
 * collective over the engine's world, so it happens on the calling thread,
 * before any device thread runs). A dimension that is not the leading one
 * (all_gather along dim 1, ...) is moved with device-to-device copies around
 * the collective, which works on contiguous blocks. A collective that does
 * not finish by the deadline (JX_COLLECTIVE_TIMEOUT) fails with the
 * engine's error naming the axis and aborts its communicator. Where NCCL
 * cannot be loaded the collectives run as host equations over the CPU
 * devices' communicators (said once under JX_LOG_COMPILES=1).
 *
 * The NCCL engine is one per process, over CUDA devices 0 .. n-1 (n: this
 * process's jx devices, at most the GPUs), made on first need and kept until
 * jx_cuda_mesh_shutdown. */
#ifndef JX_SRC_CUDA_CUDA_MESH_H
#define JX_SRC_CUDA_CUDA_MESH_H

#include "../ir/program.h"
#include "../parallel/mesh.h"

/* Attaches to per-device program p the executables of m's positions that
 * this process runs (p then runs only inside jx_spmd_run over m).
 * what_name names the jitted function in errors. */
jx_status jx_cuda_mesh_attach(const jx_program *p, jx_mesh *m, const char *what_name,
                              const char *dump_prefix);

/* 1 when every device of m this process has runs on a CUDA device of its
 * own (jx device p on CUDA device p); else 0, with why[cap] saying what is
 * missing, and no error recorded (the CUDA backend's mesh_fits: shard_map
 * and pmap bodies run on the CPU devices then). */
int jx_cuda_mesh_fits(jx_mesh *m, char *why, size_t cap);
/* The CUDA device of this process's first jx device (see "Devices" above). */
int jx_cuda_mesh_first_ordinal(void);

/* For tests. */
typedef struct {
  long runs;        /* per-device programs run on a CUDA device */
  long collectives; /* collectives run through the NCCL engine */
} jx_cuda_mesh_stats;
void jx_cuda_mesh_stats_get(jx_cuda_mesh_stats *s);
/* For an attached program: kernels, host equations and collective steps of
 * position 0's executable (summed nowhere: every position has the same); -1
 * when p has no CUDA mesh executable. */
int jx_cuda_mesh_kernels(const jx_program *p, int *host_eqns, int *collectives);
/* The device at mesh position `position` (of any mesh) skips its
 * collectives, as a peer that never joins; -1: none (the default). */
void jx_cuda_mesh_test_skip_collectives(int position);
/* Destroys the NCCL engine (its communicators); a later mesh makes a new
 * one. Only once no program attached to a CUDA mesh is left (their
 * collective steps hold the engine's communicators). */
void jx_cuda_mesh_shutdown(void);

#endif
