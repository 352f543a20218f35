/* The collectives of a job that met at a coordinator, by host: processes
 * that share a host meet in shared memory (shm_group.h), and only one
 * process per host talks to the other hosts, over the Gloo plugin. It has
 * the plugin's function table (mpi_plugin.h), wrapping the Gloo plugin's.
 *
 * Hosts. Each process says which host it is on (its host name, the device
 * and inode of its /dev/shm and its PID namespace, so that containers with
 * one name but separate shared memory count apart; JX_HOST_ID replaces it:
 * for tests, which make one machine look like several hosts), and the
 * processes exchange them when they join (an all-gather over Gloo).
 *
 * Communicators. A split first gathers every process's (check, member,
 * key): in shared memory when the job has one host, else over Gloo; a
 * check that differs from process 0's is named. The members, ordered by
 * key, that share this process's host get a shared memory group (its
 * segment named in the job's store). When the job spans hosts, every split
 * also makes two Gloo communicators: one of the members, for a group that
 * spans hosts, and one of each host's first member, for a group that spans
 * hosts with several members on some host.
 *
 * Collectives. A group within one host runs every collective in shared
 * memory; a job on one host never uses TCP for them. A group with one
 * member per host runs them over Gloo. Otherwise all_reduce, reduce_scatter,
 * broadcast and barrier are hierarchical: the host's members reduce (or
 * meet) in shared memory, each host's first member runs the collective
 * over Gloo with the other hosts' and hands the result to its host's
 * members in shared memory (reduce_scatter: the whole reduction, of which
 * each member keeps its block); all_gather and all_to_all run over Gloo
 * among the members. Every process gets the same bits. A failure of a
 * host's first member over Gloo fails its host's members at once with its
 * reason. */
#ifndef JX_SRC_PARALLEL_COMM_HOSTS_H
#define JX_SRC_PARALLEL_COMM_HOSTS_H

#include "kv_store.h"
#include "mpi_plugin.h"

/* The table for process me of nproc over gloo (whose init is still to
 * run) and the job's store. */
const jx_mpi_api *jx_hosts_engine(const jx_mpi_api *gloo, jx_kv *store, int me, int nproc);
/* Every collective fails at once with why (a process stopped beating). */
void jx_hosts_interrupt(const char *why);

#endif
