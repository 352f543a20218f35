/* A persistent pool of worker threads that splits a range of work among
 * itself and the calling thread. One pool per process, started on first use
 * with JX_NUM_THREADS (default: the number of online CPUs) threads in all;
 * the workers live until the process exits. Idle workers spin briefly
 * before they sleep, so back-to-back jobs hand off without a kernel wake-up. */
#ifndef JX_SRC_BASE_THREADPOOL_H
#define JX_SRC_BASE_THREADPOOL_H

#include <stdint.h>

/* fn(ctx, begin, end) for disjoint pieces covering [0, n); returns when all
 * are done. Pieces are at least `grain` long; small ranges run inline. Safe
 * to call from several threads (calls are serialized) and from inside fn
 * (nested calls run inline). While the machine has more runnable threads
 * than the pool has (load from other processes), the caller runs the same
 * pieces itself, in order: a worker would queue for a core, and the caller
 * with it. */
typedef void (*jx_range_fn)(void *ctx, int64_t begin, int64_t end);
void jx_parallel_for(int64_t n, int64_t grain, jx_range_fn fn, void *ctx);

/* Threads the pool uses, the caller included. */
int jx_pool_threads(void);

/* 1 on a pool worker or inside a job (a jx_parallel_for there runs inline). */
int jx_pool_inside(void);

/* Threads on the job running now, the caller included (0 between jobs):
 * a thread that would spin waiting leaves the cores to such a job when it
 * takes them all (spin.h). Does not start the pool. */
int jx_pool_busy_threads(void);

/* Makes every jx_parallel_for of the calling thread run inline (on) or use
 * the pool again (off): a device thread of a mesh with as many devices as
 * cores keeps its work to itself rather than queueing for the shared pool. */
void jx_pool_run_inline(int on);

#endif
