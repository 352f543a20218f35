/* jx/distributed.h: one program, many processes (one per host or GPU), as
 * JAX's jax.distributed: launched by mpirun or srun, or started by hand
 * with an explicit coordinator.
 *
 * Call jx_distributed_initialize first, before any use of devices. Ways to
 * join, in order of precedence (docs/distributed.md, "Launching"):
 *   - with an explicit coordinator: options with coordinator = "host:port"
 *     (where process 0 listens), num_processes and process_id (both
 *     required); jax.distributed.initialize(coordinator_address,
 *     num_processes, process_id). No MPI: the processes meet at the
 *     coordinator and their collectives go over TCP (an engine inside
 *     libjx);
 *   - jx_distributed_initialize(NULL) with JX_COORDINATOR_ADDRESS,
 *     JX_NUM_PROCESSES and JX_PROCESS_ID in the environment (jx launch sets
 *     them): the same as the explicit coordinator, so one program runs
 *     either way; under a launcher its own rank and size stand in for the
 *     two numbers when they are unset;
 *   - under an MPI launcher, jx_distributed_initialize(NULL): mpirun
 *     (OMPI_COMM_WORLD_RANK/SIZE), PMIx (PMIX_RANK with the launcher's size
 *     variable) or PMI (PMI_RANK/PMI_SIZE); the processes meet through MPI,
 *     which jx initializes through its MPI plugin (libjx_mpi.so, opened at
 *     run time: JX_MPI_PLUGIN names it, else it is looked for next to libjx,
 *     then on the library search path);
 *   - under Slurm's srun without MPI (SLURM_PROCID, SLURM_NTASKS and no PMI
 *     variable), jx_distributed_initialize(NULL): the processes meet at a
 *     coordinator on the first host of SLURM_STEP_NODELIST (else
 *     SLURM_JOB_NODELIST), port 61440 + SLURM_JOB_ID mod 4096, as JAX does.
 * A process that none of these started is a job of one.
 *
 * After it, devices are global: each process has jx_local_device_count()
 * devices (JX_NUM_CPU_DEVICES), process p owns devices p*L .. p*L+L-1, and
 * jx_device_count() counts all of them (initialize fails, naming each
 * process's count, when the processes' counts differ). Meshes may span processes; every
 * process must create the same meshes in the same order (their
 * communicators are made then). A sharded array holds the shards of this
 * process's devices only: reading its global value works when those shards
 * cover it, else jx_process_allgather gathers it. Per-device programs
 * (shard_map, pmap, sharded jit) run on this process's devices; collectives
 * among devices of several processes go over MPI or TCP.
 *
 * Deadlines: the rendezvous and every collective must complete within
 * timeout_s (default JX_COLLECTIVE_TIMEOUT, else 300 s), else they fail with
 * JX_ERR_TIMEOUT naming the processes that did not arrive (over TCP, a
 * process whose connections close is named at once). After such a failure
 * the process should end: jx_distributed_shutdown then calls MPI_Abort,
 * which ends every process of the job; over TCP it ends this process with
 * status 1, and the others' collectives fail at once as its connections
 * close. */
#ifndef JX_DISTRIBUTED_H
#define JX_DISTRIBUTED_H

#include "array.h"
#include "parallel.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  /* "host:port" where process 0 listens (TCP, no MPI); NULL: the launcher
   * (mpirun, srun), else the JX_COORDINATOR_ADDRESS environment */
  const char *coordinator;
  /* with a coordinator: required; without: 0, 0 = from the launcher or the
   * environment, else checked against the launcher */
  int num_processes, process_id;
  double timeout_s; /* rendezvous and collective deadline; <= 0: the default */
} jx_distributed_options;

JX_API jx_status jx_distributed_initialize(const jx_distributed_options *opts); /* NULL = auto */
/* Ends MPI (MPI_Finalize, which waits for every process; MPI_Abort after a
 * failed collective). Over TCP: a last barrier of every process (within the
 * deadline), then every connection closes; after a failed collective the
 * process ends at once with status 1 (its connections close, so the others
 * fail at once). Devices stay as they are; no collective may follow. */
JX_API jx_status jx_distributed_shutdown(void);
JX_API int jx_process_index(void); /* 0 without initialize */
JX_API int jx_process_count(void); /* 1 without initialize */
/* This process's place among the job's processes on its host (the
 * launcher's local rank: SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK,
 * JX_LOCAL_PROCESS_ID...), and how many there are (1 when the launcher does
 * not say); 0 and 1 without initialize. */
JX_API int jx_process_local_index(void);
JX_API int jx_process_local_count(void);
/* Who started the job and how its processes meet, for messages: "srun
 * (coordinator node01:61449)", "mpirun (MPI)"; "none" for one process
 * without a launcher or before initialize. */
JX_API const char *jx_distributed_launcher(void);
/* This process's GPU, given the gpus the driver lists (which
 * CUDA_VISIBLE_DEVICES already narrows; when it is set its entries are
 * counted): its local index when several processes of the job share the
 * host (one GPU each: local process i takes the i-th visible GPU), -1 when
 * it is the only one (every GPU is its), or -2 with the error recorded when
 * the host has more processes than visible GPUs. */
JX_API int jx_process_gpu(int gpus);
/* The global array of shape global_shape laid out by s, from this process's
 * part of it: local is the box of the global array that this process's
 * devices hold (their blocks, concatenated in place), e.g. rows
 * p*N/P .. (p+1)*N/P of a "data"-sharded array. */
JX_API jx_array *jx_array_from_process_local(jx_sharding *s, jx_shape global_shape,
                                             jx_array *local);
/* Every process gets the whole array (a plain array on the host). */
JX_API jx_array *jx_process_allgather(jx_array *a);
/* Waits until every process has called it with the same name. */
JX_API jx_status jx_sync_global_devices(const char *name);

#ifdef __cplusplus
}
#endif
#endif
