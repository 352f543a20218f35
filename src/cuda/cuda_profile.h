/* JX_PROFILE_STEPS=1 on CUDA: the device time of each step of an executable
 * (cuda_exec.c), measured by timing events recorded on the compute stream
 * at the step boundaries, summed over the runs after the first (one-time
 * work: modules loaded, GEMM candidates timed) and reported when the
 * executable is freed: the total per run, the steps' labels ranked by their
 * time, then the totals per kind of step (a label's first word).
 * A step's time is the device's time between its boundaries, so it counts
 * the launch gaps the host leaves as well as the kernels (a step on the host
 * shows as the time the stream waited for it). */
#ifndef JX_CUDA_PROFILE_H
#define JX_CUDA_PROFILE_H

#include "cuda_device.h"

typedef struct jx_cuda_step_profile jx_cuda_step_profile;

enum { JX_CUDA_PROFILE_LABEL = 96 }; /* a label's bytes, its 0 included */

/* NULL when JX_PROFILE_STEPS is off (every function below takes NULL and
 * does nothing), or when out of host memory (the run goes on unprofiled). */
jx_cuda_step_profile *jx_cuda_step_profile_create(const char *program, int nsteps);
/* Step k's label ("kernel add x3 bf16[8,1024,768]", "gemm 8192x768x3072"). */
void jx_cuda_step_profile_label(jx_cuda_step_profile *pf, int k, const char *label);
/* Records boundary b (0: before step 0; k + 1: after step k) on d's compute
 * stream. */
jx_status jx_cuda_step_profile_mark(jx_cuda_step_profile *pf, jx_cuda_device *d, int b);
/* Waits for the run's last boundary and adds each step's time. */
jx_status jx_cuda_step_profile_collect(jx_cuda_step_profile *pf, jx_cuda_device *d);
/* Prints the report (stderr) and frees the events. */
void jx_cuda_step_profile_free(jx_cuda_step_profile *pf);

#endif
