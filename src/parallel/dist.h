/* The state of a job of several processes (jx/distributed.h) as the rest of
 * the parallel layer sees it: the MPI plugin's entry points behind calls
 * that fail with messages (distributed.c). */
#ifndef JX_SRC_PARALLEL_DIST_H
#define JX_SRC_PARALLEL_DIST_H

#include <stdint.h>

#include <jx/base.h>

#include "mpi_plugin.h"

/* 1 once jx_distributed_initialize has joined more than one process. */
int jx_dist_active(void);
/* The deadline of the rendezvous and of every collective over processes. */
double jx_dist_timeout(void);
/* Collective over every process (same calls, same order): the communicator
 * of the processes passing member, ordered by key (NULL elsewhere). check is
 * what the processes must agree on (a hash of the mesh); errors recorded. */
jx_status jx_dist_split(int member, int key, uint64_t check, const char *label, jx_mpi_comm **out);
/* The communicator of every process, ordered by index (made by
 * jx_distributed_initialize; NULL before it or with one process). */
jx_mpi_comm *jx_dist_world(void);
/* Runs op over c; a failure (the reason in msg) marks the job failed, so
 * that shutdown aborts it. */
jx_status jx_dist_run(jx_mpi_comm *c, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap);

#endif
