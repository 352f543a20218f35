/* Which launcher started this process, and how its processes meet, as
 * jax.distributed.initialize detects its clusters (launcher.c).
 *
 * In order of precedence:
 *   - the options' coordinator (jx_distributed_options.coordinator);
 *   - JX_COORDINATOR_ADDRESS (jx launch sets it), with JX_NUM_PROCESSES and
 *     JX_PROCESS_ID, each of which a launcher's own variable may stand in for;
 *   - mpirun (Open MPI: OMPI_COMM_WORLD_*), a PMIx launcher (PMIX_RANK and
 *     PMIX_NAMESPACE), a PMI launcher (mpiexec: PMI_RANK, PMI_SIZE): the
 *     processes meet through the MPI plugin;
 *   - srun without MPI (SLURM_PROCID, SLURM_NTASKS and no PMI variable): the
 *     processes meet at a coordinator on the first host of the step's node
 *     list, at port 61440 + SLURM_JOB_ID mod 4096 (JAX's choice).
 * The launcher's variables are read, not a launcher library: under PMIx the
 * process count comes from OMPI_COMM_WORLD_SIZE (prterun, mpirun of Open MPI
 * 5) or SLURM_NTASKS (srun --mpi=pmix). */
#ifndef JX_SRC_PARALLEL_LAUNCHER_H
#define JX_SRC_PARALLEL_LAUNCHER_H

#include <stddef.h>

#include <jx/distributed.h>

typedef struct {
  const char *name; /* "mpirun", "srun", ...; NULL: no launcher (one process) */
  int rank, size;
  int local_rank, local_count; /* among the processes of this host; local_count 0: unknown */
  int use_mpi;                 /* meet through the MPI plugin, else at coordinator */
  char coordinator[320];       /* "host:port" where process 0 serves */
} jx_launch;

/* Fills *l from opts (may be NULL) and the environment: JX_OK, or the error
 * recorded (a variable that is malformed or contradicts another). */
jx_status jx_launch_detect(const jx_distributed_options *opts, jx_launch *l);

/* Host i of a Slurm node list in its compressed form ("node[01-04,07],gpu3",
 * "rack[1-2]-n[1-2]"): the number of hosts, with host i (when 0 <= i < the
 * count) in host; -1 when the list is malformed. */
int jx_slurm_host(const char *list, int i, char *host, size_t cap);

/* The GPU of a process that is local_rank of local_count on its host, among
 * the GPUs it can see: the entries of visible (CUDA_VISIBLE_DEVICES; NULL:
 * unset) or else the gpus the driver counts. -1: every visible GPU (the only
 * process of its host, or the count unknown); -2 with why when the host has
 * more processes than visible GPUs. */
int jx_gpu_for_local_rank(int local_rank, int local_count, const char *visible, int gpus, char *why,
                          size_t cap);

#endif
