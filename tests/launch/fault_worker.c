/* A process of a job that steps in lock-step with the others until it is
 * stopped from outside (run_fault_test.sh), or for the number of steps its
 * argument gives (then it leaves the job and exits 0): each step is a
 * barrier of every process (jx_sync_global_devices), so a process killed or
 * hung leaves the others waiting inside a collective. Prints "step N" after
 * each step; on a failure, why, and exits 1. */
#define _DEFAULT_SOURCE /* usleep */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <jx/jx.h>

int main(int argc, char **argv) {
  long steps = argc > 1 ? atol(argv[1]) : 0; /* 0: until stopped */
  if (jx_distributed_initialize(NULL)) {
    fprintf(stderr, "fault_worker: %s\n", jx_last_error());
    return 1;
  }
  for (long step = 1; !steps || step <= steps; step++) {
    if (jx_sync_global_devices("step")) {
      fprintf(stderr, "fault_worker (process %d): step %ld: %s\n", jx_process_index(), step,
              jx_last_error());
      jx_distributed_shutdown();
      return 1;
    }
    printf("step %ld\n", step);
    fflush(stdout);
    usleep(20 * 1000);
  }
  return jx_distributed_shutdown() ? 1 : 0;
}
