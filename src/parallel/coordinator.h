/* Jobs whose processes meet at a coordinator (no MPI launcher): the
 * coordinator is process 0's key-value store (kv_store.h, served on a
 * thread of process 0 at the coordinator address), every process joins the
 * job there, and the collectives run in shared memory among the processes
 * of a host and on the Gloo plugin (libjx_gloo.so, mpi_plugin.h) between
 * hosts (comm_hosts.h); they find each other through the store. The
 * engine has the MPI plugin's function table, so that everything above it
 * (comm_hier.c, meshes, sharded jit) is the same for both.
 *
 * The job's token (JX_JOB_TOKEN, empty when unset) is presented to the
 * store: a process started with another token is refused. With
 * JX_COORDINATOR_SERVED=1 another process serves the store at the
 * coordinator address (a launcher, or a service of its own) and process 0
 * only joins. */
#ifndef JX_SRC_PARALLEL_COORDINATOR_H
#define JX_SRC_PARALLEL_COORDINATOR_H

#include "kv_store.h"
#include "mpi_plugin.h"

/* The engine for process process_id of num_processes, meeting at
 * coordinator ("host:port"); NULL when that is not host:port. init() joins
 * the job and opens the Gloo plugin (JX_GLOO_PLUGIN, else libjx_gloo.so
 * next to libjx, else the library search path). */
const jx_mpi_api *jx_coordinator_engine(const char *coordinator, int num_processes, int process_id);
/* This process's client of the job's store, once init succeeded (NULL
 * before and after the job): for what the processes agree on besides
 * collectives. Its requests go one at a time (the Gloo plugin's rendezvous
 * uses it too); a thread that must not wait behind another's get or wait
 * (a heartbeat) opens a client of its own with jx_coordinator_connect. */
jx_kv *jx_coordinator_store(void);
/* Stops every collective of this process, those in flight included: they
 * fail at once with why in their message ("process 3 stopped beating"),
 * and so does every later one. Any thread may call it; nothing happens
 * outside a job at a coordinator. */
void jx_coordinator_interrupt(const char *why);
/* A new client of the job's store (the job's address and token), or NULL
 * with the reason in msg; the caller closes it (jx_kv_close). */
jx_kv *jx_coordinator_connect(double timeout_s, char *msg, size_t cap);

#endif
