/* Joining the job the launcher started, for every subcommand. */
#include <stdio.h>

#include <jx/jx.h>

#include "cli.h"

int jx_cli_join_job(const char *command) {
  /* every launcher jx_distributed_initialize knows (mpirun, srun, PMIx, jx
   * launch's JX_COORDINATOR_ADDRESS); without one it is a job of one */
  if (jx_distributed_initialize(NULL) == JX_OK) return 0;
  fprintf(stderr, "jx %s: joining the job's processes: %s\n", command, jx_last_error());
  return 1;
}
