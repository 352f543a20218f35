/* What every MPI test program shares: the job's shape (P processes, L
 * devices each, this one is `me`), CHECK, which counts failures and names
 * the process, file and line, and the start and end of a run. The end
 * prints "all checks passed" on every process that passed, which
 * run_mpi_test.sh counts. Each test program includes this once. */
#ifndef JX_TESTS_MPI_CHECK_H
#define JX_TESTS_MPI_CHECK_H

#include <stdio.h>

#include <jx/jx.h>

static int P, L, me, failures;

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "process %d: %s:%d: check failed: %s\n", me, __FILE__, __LINE__, #c);        \
      if (jx_last_status()) fprintf(stderr, "  last error: %s\n", jx_last_error());                \
      jx_clear_error();                                                                            \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* Joins the job; 0, or 2 after printing why it could not. */
static int mpi_check_begin(void) {
  if (jx_distributed_initialize(NULL) != JX_OK) {
    fprintf(stderr, "jx_distributed_initialize: %s\n", jx_last_error());
    return 2;
  }
  P = jx_process_count();
  me = jx_process_index();
  L = jx_local_device_count();
  return 0;
}

/* Meets the other processes, reports, leaves the job: the exit status. */
static int mpi_check_end(void) {
  CHECK(jx_sync_global_devices("end") == JX_OK);
  if (failures)
    fprintf(stderr, "process %d of %d: %d checks failed\n", me, P, failures);
  else
    printf("process %d of %d (%d devices each): all checks passed\n", me, P, L);
  fflush(stdout);
  if (jx_distributed_shutdown() != JX_OK) return 1;
  jx_shutdown();
  return failures ? 1 : 0;
}

#endif
