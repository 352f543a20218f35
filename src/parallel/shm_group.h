/* The processes of a job that share a host, meeting in shared memory.
 *
 * A group is a communicator of the job's processes on one host: one shared
 * segment (shm_open, mmap) that the first member creates and names in the
 * job's key-value store, that the others map, and that the first member
 * unlinks once every member mapped it (or at the deadline: no segment
 * outlives a failed start). The collectives are mpi_plugin.h's (the same
 * operation table, counts and displacements), run in steps: in each step
 * every member writes its part into one of the segment's two buffers, says
 * so with its step number (a flag of its own, released after the data),
 * waits for every member's flag and reads what it needs before its next
 * step; the two buffers alternate, so a member writes a buffer only after
 * every member finished reading it. Large buffers go in chunks of a slot
 * (one per member per buffer), so a member copies chunk k+1 in while the
 * others still read chunk k. Large all-reduces, reduce-scatters,
 * all-gathers, broadcasts and all-to-alls skip the segment where the kernel permits:
 * each member publishes its buffers' addresses in a step and reads its
 * peers' buffers in their processes (process_vm_readv, single copy); the
 * members agree once per group whether they may (JX_SHM_SINGLE_COPY=0: never).
 *
 * Reductions run in member order (member 0 op member 1 op ...), each
 * element computed by one member or by every member from the same operands,
 * so every member gets the same bits. Waits poll the flags (spin.h's
 * bounded spin), then yield the CPU, then sleep in growing naps; they end
 * at the deadline naming the members that did not arrive, at once when one
 * of their processes ended (its /proc entry is gone or a zombie) or gave up
 * after a failure of its own (jx_shm_group_abort), and at once when
 * jx_shm_interrupt says the job cannot go on (a process stopped beating). A
 * failure breaks the group: its later collectives fail at once. */
#ifndef JX_SRC_PARALLEL_SHM_GROUP_H
#define JX_SRC_PARALLEL_SHM_GROUP_H

#include <stddef.h>

#include "kv_store.h"
#include "mpi_plugin.h"

typedef struct jx_shm_group jx_shm_group;

/* Collective over the m members: this process is member me; procs[i] is
 * member i's process id (named in messages), label the communicator's name
 * ("mesh axis 'data'"). Member 0 publishes the segment's name under key in
 * store; every member returns once all mapped it. NULL with the reason in
 * msg on failure. m == 1 needs no segment and no store. */
jx_shm_group *jx_shm_group_open(int me, int m, const int *procs, const char *label, jx_kv *store,
                                const char *key, double timeout_s, char *msg, size_t cap);
void jx_shm_group_close(jx_shm_group *g); /* NULL is fine */
/* op among the members, in member order (mpi_plugin.h's semantics; dtype
 * of reductions: any integer, bool, f32, f64). 0, or 1 with the reason in
 * msg ("all_reduce in shared memory among processes 0,1 (label): process 1
 * did not arrive within 3 s (it ended)"). One call at a time per group. */
int jx_shm_group_run(jx_shm_group *g, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap);
/* This process failed elsewhere (why): the group breaks, and the other
 * members' waits on it fail at once, naming this process and why. */
void jx_shm_group_abort(jx_shm_group *g, const char *why);
/* Every wait of every group fails at once with why, now and from now on. */
void jx_shm_interrupt(const char *why);

#endif
