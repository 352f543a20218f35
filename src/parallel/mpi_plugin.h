/* The interface between libjx and its collectives plugins, which libjx
 * opens with dlopen in jx_distributed_initialize: the core links neither
 * MPI nor Gloo. The MPI plugin (libjx_mpi.so) serves jobs started by an MPI
 * launcher; the Gloo plugin (libjx_gloo.so) jobs that meet at a coordinator,
 * through whose key-value store (kv_store.h) its processes find each other.
 * For the MPI plugin: With MPI_THREAD_MULTIPLE
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

#define JX_MPI_ABI           3
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

/* The job's key-value store (kv_store.h's client) as the Gloo plugin calls
 * it: 0, or 1 with the reason in msg. get's *value is malloc'd (the caller
 * frees it). */
typedef struct {
  void *self;
  int (*set)(void *self, const char *key, const void *value, size_t len, char *msg, size_t cap);
  int (*get)(void *self, const char *key, double timeout_s, void **value, size_t *len, char *msg,
             size_t cap);
  int (*wait)(void *self, const char *const *keys, int n, double timeout_s, char *msg, size_t cap);
} jx_plugin_store;

#define JX_GLOO_PLUGIN_SYMBOL    "jx_gloo_plugin_api"
#define JX_GLOO_INTERRUPT_SYMBOL "jx_gloo_interrupt" /* void (const char *why) */
/* The Gloo plugin's table for process rank of size, whose rendezvous goes
 * through store (kept until finalize); host: the address its connections
 * listen on (the interface through which it reached the coordinator). Its
 * init needs no launcher: the processes already met at the coordinator. */
typedef const jx_mpi_api *(*jx_gloo_plugin_fn)(const jx_plugin_store *store, int rank, int size,
                                               const char *host);

#endif
