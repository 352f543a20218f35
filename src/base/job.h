/* The processes of the job: 1 until jx_distributed_initialize joins a job
 * of several (parallel/device.c sets it as the devices become global). Read
 * by every layer that must know whether work crosses processes. */
#ifndef JX_SRC_BASE_JOB_H
#define JX_SRC_BASE_JOB_H

int jx_job_process_count(void);
void jx_job_process_count_set(int count);

#endif
