/* Re-laying an array whose blocks live on several processes: each process
 * receives only the parts of the new layout's blocks that it does not hold,
 * in one all-to-all exchange over every process (relayout.c). */
#ifndef JX_SRC_PARALLEL_RELAYOUT_H
#define JX_SRC_PARALLEL_RELAYOUT_H

#include <stdint.h>

#include "../array/array.h"
#include "sharding.h"

/* 1 when re-laying a (laid out by its shards) needs data from other
 * processes: a job of several processes where some process lacks some of
 * a's blocks. The same answer on every process (it depends only on the
 * layout). */
int jx_relayout_spans_processes(const jx_array *a);

/* Collective over every process (by the SPMD rule every process re-lays the
 * same arrays in the same order, also one with no device in t's mesh): the
 * shards of a (laid out by its shards, spanning processes) under t. Fills
 * shard[p] (a new reference, owned by the caller) for every position p of
 * t's mesh whose device is this process's; leaves the others alone. On an
 * error (recorded, naming op) fills nothing. */
jx_status jx_relayout(jx_array *a, const jx_sharding *t, jx_array **shard, const char *op);

/* Bytes this process has sent to other processes in re-layings so far
 * (what tests and measurements compare with the layouts). */
int64_t jx_relayout_bytes_sent(void);

#endif
