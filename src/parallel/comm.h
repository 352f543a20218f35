/* Collectives over a communicator of n ranks.
 *
 * One interface, several engines; this header declares the interface and the
 * `local` engine, whose ranks are threads of this process sharing memory.
 * Every collective takes a deadline: if some rank does not arrive in time, the
 * ranks that did fail with JX_ERR_TIMEOUT and a message naming the missing
 * devices, and the communicator is broken from then on (every later call fails
 * at once, saying why). Errors are recorded in the calling thread's error state
 * (jx_last_error), so each rank thread sees its own.
 *
 * Thread safety: a communicator may be used from many threads at once, one
 * thread per rank at a time; retain/release/size/label are safe anywhere. */
#ifndef JX_SRC_PARALLEL_COMM_H
#define JX_SRC_PARALLEL_COMM_H

#include <jx/array.h>
#include <stddef.h>

typedef enum { JX_REDUCE_SUM, JX_REDUCE_PROD, JX_REDUCE_MAX, JX_REDUCE_MIN } jx_reduce_op;
typedef struct jx_comm jx_comm;                 /* a group of n ranks */
typedef struct jx_comm_request jx_comm_request; /* an operation in flight */

/* A communicator of n ranks, each driven by its own thread of this process.
 * label names it in errors ("mesh axis 'data'"); device_ids[r] is the global
 * device number of rank r, used in messages (NULL: ranks are devices 0..n-1).
 * Returns NULL (error recorded) for n < 1. The caller owns one reference. */
jx_comm *jx_comm_local_create(int n, const char *label, const int *device_ids);
jx_comm *jx_comm_retain(jx_comm *c);
void jx_comm_release(jx_comm *c); /* NULL is fine */
int jx_comm_size(const jx_comm *c);
const char *jx_comm_label(const jx_comm *c);

/* The deadline every collective gets unless told otherwise: JX_COLLECTIVE_TIMEOUT seconds
 * from the environment, else 300 s. timeout_s <= 0 in the calls below means this default. */
double jx_comm_default_timeout(void);

/* Collectives. Every rank of c calls the same operation, in the same order, from its own
 * thread, with its rank and the same count/dtype. Buffers: count elements of dt.
 *   all_reduce:     send[count] -> recv[count], elementwise op over ranks (send == recv allowed)
 *   reduce_scatter: send[n*count] -> recv[count]: rank r gets block r of the reduction
 *                   (recv == send + r*count allowed)
 *   all_gather:     send[count] -> recv[n*count]: block q of recv is rank q's send
 *   all_to_all:     send[n*count] -> recv[n*count]: recv block q of rank r = send block r of rank q
 *   permute:        sends send[count] to rank dst (-1: sends nothing), receives into recv[count]
 *                   from rank src (-1: recv is zero-filled); each rank has at most one src and one
 * dst broadcast:      buf[count] of root is copied to every rank's buf barrier Other than stated,
 * send and recv buffers must not overlap. f16/bf16 reduce in f32 and round once; integers wrap;
 * bool: SUM/MAX = or, PROD/MIN = and. NaN propagates through MAX/MIN (as XLA does). Ranks combine
 * in rank order 0, 1, ..., n-1, so every rank gets the same bits. The deadline bounds the arrival
 * of all ranks; once all have arrived the copying runs to its end (it touches the peers' buffers,
 * so no rank may leave early). A wrong rank, a bad argument or ranks that disagree on the
 * operation, count, dtype, op, root or permute pattern fail every rank of the round and break the
 * communicator. */
jx_status jx_comm_all_reduce(jx_comm *c, int rank, const void *send, void *recv, size_t count,
                             jx_dtype dt, jx_reduce_op op, double timeout_s);
jx_status jx_comm_reduce_scatter(jx_comm *c, int rank, const void *send, void *recv, size_t count,
                                 jx_dtype dt, jx_reduce_op op, double timeout_s);
jx_status jx_comm_all_gather(jx_comm *c, int rank, const void *send, void *recv, size_t count,
                             jx_dtype dt, double timeout_s);
jx_status jx_comm_all_to_all(jx_comm *c, int rank, const void *send, void *recv, size_t count,
                             jx_dtype dt, double timeout_s);
jx_status jx_comm_permute(jx_comm *c, int rank, const void *send, void *recv, size_t count,
                          jx_dtype dt, int dst, int src, double timeout_s);
jx_status jx_comm_broadcast(jx_comm *c, int rank, void *buf, size_t count, jx_dtype dt, int root,
                            double timeout_s);
jx_status jx_comm_barrier(jx_comm *c, int rank, double timeout_s);

/* Asynchronous forms: start returns at once (NULL + error recorded on bad arguments); the
 * buffers must stay valid until jx_comm_wait returns. wait frees the request. A rank's
 * operations run in the order they were started (a blocking call issued while some are in
 * flight runs after them), on a helper thread of that rank. The deadline starts when wait
 * is called: timeout_s of wait (<= 0: the default); it also applies to earlier requests of
 * the same rank still in flight. A request holds a reference to its communicator. */
jx_comm_request *jx_comm_start_all_reduce(jx_comm *c, int rank, const void *send, void *recv,
                                          size_t count, jx_dtype dt, jx_reduce_op op);
jx_comm_request *jx_comm_start_reduce_scatter(jx_comm *c, int rank, const void *send, void *recv,
                                              size_t count, jx_dtype dt, jx_reduce_op op);
jx_comm_request *jx_comm_start_all_gather(jx_comm *c, int rank, const void *send, void *recv,
                                          size_t count, jx_dtype dt);
jx_comm_request *jx_comm_start_all_to_all(jx_comm *c, int rank, const void *send, void *recv,
                                          size_t count, jx_dtype dt);
jx_comm_request *jx_comm_start_permute(jx_comm *c, int rank, const void *send, void *recv,
                                       size_t count, jx_dtype dt, int dst, int src);
jx_comm_request *jx_comm_start_broadcast(jx_comm *c, int rank, void *buf, size_t count, jx_dtype dt,
                                         int root);
jx_comm_request *jx_comm_start_barrier(jx_comm *c, int rank);
/* Waits for r to finish and frees it; records r's error in this thread. NULL: records
 * an error (the failed start already recorded one in the starting thread). */
jx_status jx_comm_wait(jx_comm_request *r, double timeout_s);
/* 1 when c's start_* forms return before the exchange is done (every
 * engine's do; kept for engines that may not). */
int jx_comm_runs_ahead(const jx_comm *c);

/* ---- engines other than `local` ----
 * A communicator may hand its collectives to another engine: the entry points above check the
 * arguments as always, then call engine.run on the calling thread. The start_* forms queue it
 * on one helper thread per device, shared by all of the device's communicators of other
 * engines, so that they run in the order the device started them (MPI needs every process's
 * collectives in one order); their deadline is the engine's own. The hierarchical engine
 * (comm_hier.c) serves groups whose devices belong to several processes. */
typedef enum {
  JX_COMM_ALL_REDUCE,
  JX_COMM_REDUCE_SCATTER,
  JX_COMM_ALL_GATHER,
  JX_COMM_ALL_TO_ALL,
  JX_COMM_PERMUTE,
  JX_COMM_BROADCAST,
  JX_COMM_BARRIER
} jx_comm_kind;
typedef struct {
  jx_comm_kind kind;
  jx_dtype dt;
  jx_reduce_op op;
  size_t count;
  int root, dst, src;
  const void *send; /* broadcast: the buffer */
  void *recv;       /* broadcast: the buffer */
} jx_comm_op;
typedef struct {
  void *self;
  /* 0, or an error code and the reason in msg (the caller records it); timeout_s <= 0:
   * the engine's default deadline */
  jx_status (*run)(void *self, int rank, const jx_comm_op *op, double timeout_s, char *msg,
                   size_t cap);
  void (*destroy)(void *self); /* when the communicator goes */
} jx_comm_engine;
/* A communicator of n ranks whose collectives e runs (it takes e.self). */
jx_comm *jx_comm_engine_create(int n, const char *label, const int *device_ids, jx_comm_engine e);

/* The hierarchical engine: rank r is device device_ids[r], of process
 * device_process[r]; the ranks of this process meet in shared memory, and
 * one of them (the one with the lowest device id) exchanges the process's
 * share with the other processes over mc (the MPI communicator of the
 * group's processes, ordered by process index). A process with one rank in
 * the group calls MPI at once; reduce_scatter, all_gather, all_to_all and
 * broadcast use MPI's own operations (reduce_scatter: local reduction, MPI
 * reduce-scatter among the processes, local scatter). */
struct jx_mpi_comm;
jx_comm *jx_comm_hier_create(int n, const char *label, const int *device_ids,
                             const int *device_process, int this_process, struct jx_mpi_comm *mc);

/* ---- internals shared by the engine's files (comm_*.c) ---- */

/* Elements a reduction accumulator holds: reductions run in chunks this long
 * so the accumulator stays in L1. */
#define JX_COMM_CHUNK 2048
/* dsts[d][0..len) = op over q of srcs[q][0..len) (q = 0..nsrc-1 in order), for every d.
 * Reads all sources of a chunk before writing it, so a destination may be one of the
 * sources (same address, not a shifted one). f16/bf16 accumulate in f32 and round once.
 * streaming: write the destinations around the cache (for buffers larger than it). */
void jx_comm_reduce_range(jx_dtype dt, jx_reduce_op op, const char *const *srcs, int nsrc,
                          char *const *dsts, int ndst, size_t len, int streaming);
/* memcpy for the collectives' data (see comm_reduce.c for why not memcpy);
 * streaming: write around the cache, for buffers larger than it. */
void jx_comm_copy(void *dst, const void *src, size_t n, int streaming);
const char *jx_reduce_op_name(jx_reduce_op op); /* "sum", ...; "?" if invalid */

#endif
