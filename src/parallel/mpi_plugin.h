/* The interface between libjx and its MPI plugin (libjx_mpi.so), which libjx
 * opens with dlopen in jx_distributed_initialize: the core links no MPI. With MPI_THREAD_MULTIPLE
 * the calling thread makes a collective's MPI calls itself; otherwise one thread of the plugin
 * makes every MPI call of the process (MPI_THREAD_FUNNELED) and the functions
 * below hand it work and wait for the answer. Every wait has a deadline:
 * operations start non-blocking and are polled until they finish or the
 * deadline passes. This header is C only, shared by both sides; bump
 * JX_MPI_ABI on any change. */
#ifndef JX_SRC_PARALLEL_MPI_PLUGIN_H
#define JX_SRC_PARALLEL_MPI_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#define JX_MPI_ABI           2
#define JX_MPI_PLUGIN_SYMBOL "jx_mpi_plugin_api"
#define JX_MPI_MSG           1024

/* Operations on a group communicator. Element types: the jx_dtype numbers
 * (jx/array.h); reductions take every integer type, bool (as u8), f32 and f64
 * (f16/bf16 arrive as f32). The others move bytes (dtype ignored, counts in
 * bytes). Counts and displacements are per member of the group, in its rank
 * order. */
enum {
  JX_MPI_ALLREDUCE,  /* send[count] -> recv[count] (send == recv: in place) */
  JX_MPI_ALLGATHERV, /* send[rcounts[me]] -> recv at rdispls[q] (send NULL: in place) */
  JX_MPI_BCAST,      /* recv[count] of member root -> every member's recv */
  JX_MPI_BARRIER,
  JX_MPI_ALLTOALLV, /* send at sdispls[q] (scounts[q]) -> recv at rdispls[q] (rcounts[q]) */
  /* send[sum of rcounts] -> recv[rcounts[me]]: member q gets its block (rcounts[q] elements,
   * in member order) of the elementwise reduction (send NULL: in place, recv holds the input
   * and gets the result at its start) */
  JX_MPI_REDUCE_SCATTER
};
enum { JX_MPI_SUM, JX_MPI_PROD, JX_MPI_MAX, JX_MPI_MIN }; /* = jx_reduce_op */

typedef struct {
  int kind, dtype, op, root;
  size_t count;
  const void *send;
  void *recv;
  const int64_t *scounts, *sdispls, *rcounts, *rdispls; /* bytes (reduce_scatter: elements) */
} jx_mpi_op;

typedef struct jx_mpi_comm jx_mpi_comm;

typedef struct {
  int abi; /* JX_MPI_ABI */
  /* Starts the MPI thread, initializes MPI on it and meets every process
   * within timeout_s. 0 on success; else the reason in msg. */
  int (*init)(double timeout_s, int *rank, int *size, char *msg, size_t cap);
  /* Collective over all processes, in the same order everywhere: first they
   * agree on check (a hash of what is being made; a mismatch is an error
   * naming the processes that differ) within timeout_s, then the members
   * get a communicator of the members ordered by key (*out); others get
   * NULL. label names it in messages. */
  int (*split)(int member, int key, uint64_t check, const char *label, double timeout_s,
               jx_mpi_comm **out, char *msg, size_t cap);
  /* Runs op on c; fails after timeout_s naming the processes that did not
   * arrive. A failure breaks c: later calls fail at once. */
  int (*run)(jx_mpi_comm *c, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap);
  /* MPI_Finalize when every collective so far succeeded (it waits for the
   * other processes); MPI_Abort(code) otherwise or when abort_now. */
  int (*finalize)(int abort_now, int code);
  const char *(*version)(void); /* "Open MPI v4.1.4, ..." */
} jx_mpi_api;

typedef const jx_mpi_api *(*jx_mpi_plugin_fn)(void);

#endif
