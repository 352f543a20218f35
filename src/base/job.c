/* The processes of the job (job.h). */
#include "job.h"

#include <stdatomic.h>

static atomic_int process_count = 1;

int jx_job_process_count(void) {
  return atomic_load_explicit(&process_count, memory_order_relaxed);
}

void jx_job_process_count_set(int count) {
  atomic_store_explicit(&process_count, count, memory_order_relaxed);
}
