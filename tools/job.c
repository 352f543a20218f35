/* Joining the job the launcher started, for every subcommand. */
#include <stdio.h>
#include <stdlib.h>

#include <jx/jx.h>

#include "cli.h"

/* The process count a launcher announces (mpirun, mpiexec, srun), or 1. The
 * same variables jx_distributed_initialize reads. */
static long launched_processes(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    long n = v ? strtol(v, NULL, 10) : 0;
    if (n > 0) return n;
  }
  return 1;
}

int jx_cli_join_job(const char *command) {
  /* one process needs no MPI: jx_distributed_initialize would only renumber
   * the devices, so it is called for jobs of several processes only */
  if (launched_processes() < 2) return 0;
  if (jx_distributed_initialize(NULL) == JX_OK) return 0;
  fprintf(stderr, "jx %s: joining the job's processes: %s\n", command, jx_last_error());
  return 1;
}
