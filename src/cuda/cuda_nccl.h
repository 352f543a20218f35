/* NCCL through a function table (libnccl.so.2, or $JX_NCCL_PATH), and the
 * deadline every collective is waited on with: jx polls the collective's
 * completion event and ncclCommGetAsyncError until the event completes, NCCL
 * reports an error, or the deadline passes; then ncclCommAbort frees the
 * communicator's peers from the hang and the error names the communicator
 * and the ranks. A dead peer thus costs a clear error, never a hang. */
#ifndef JX_SRC_CUDA_CUDA_NCCL_H
#define JX_SRC_CUDA_CUDA_NCCL_H

#include <jx/base.h>
#include <stddef.h>

#include "cuda_driver.h"

typedef int ncclResult_t;
typedef struct ncclComm *ncclComm_t;
typedef struct jx_nccl_config_ ncclConfig_t; /* jx passes NULL: NCCL's defaults */
typedef struct {
  char internal[128];
} ncclUniqueId;

enum { JX_NCCL_SUCCESS = 0, JX_NCCL_IN_PROGRESS = 7, JX_NCCL_SPLIT_NOCOLOR = -1 };
enum { JX_NCCL_SUM = 0, JX_NCCL_PROD = 1, JX_NCCL_MAX = 2, JX_NCCL_MIN = 3, JX_NCCL_AVG = 4 };
enum { /* ncclDataType_t values */
       JX_NCCL_INT8 = 0,
       JX_NCCL_UINT8 = 1,
       JX_NCCL_INT32 = 2,
       JX_NCCL_UINT32 = 3,
       JX_NCCL_INT64 = 4,
       JX_NCCL_UINT64 = 5,
       JX_NCCL_FLOAT16 = 6,
       JX_NCCL_FLOAT32 = 7,
       JX_NCCL_FLOAT64 = 8,
       JX_NCCL_BFLOAT16 = 9
};

typedef struct {
  ncclResult_t (*GetVersion)(int *version);
  ncclResult_t (*GetUniqueId)(ncclUniqueId *id);
  ncclResult_t (*CommInitRank)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
  ncclResult_t (*CommSplit)(ncclComm_t comm, int color, int key, ncclComm_t *out,
                            ncclConfig_t *config);
  ncclResult_t (*CommAbort)(ncclComm_t comm);
  ncclResult_t (*CommDestroy)(ncclComm_t comm);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t comm, ncclResult_t *error);
  ncclResult_t (*AllReduce)(const void *send, void *recv, size_t count, int dtype, int op,
                            ncclComm_t comm, CUstream s);
  ncclResult_t (*AllGather)(const void *send, void *recv, size_t send_count, int dtype,
                            ncclComm_t comm, CUstream s);
  ncclResult_t (*ReduceScatter)(const void *send, void *recv, size_t recv_count, int dtype, int op,
                                ncclComm_t comm, CUstream s);
  ncclResult_t (*Broadcast)(const void *send, void *recv, size_t count, int dtype, int root,
                            ncclComm_t comm, CUstream s);
  ncclResult_t (*Send)(const void *send, size_t count, int dtype, int peer, ncclComm_t comm,
                       CUstream s);
  ncclResult_t (*Recv)(void *recv, size_t count, int dtype, int peer, ncclComm_t comm, CUstream s);
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
  const char *(*GetErrorString)(ncclResult_t r);
} jx_nccl_api;

/* The table, loading the library on the first call (thread-safe), or NULL;
 * records no error. Loading needs no GPU. */
const jx_nccl_api *jx_nccl(void);
const char *jx_nccl_load_error(void); /* "NCCL not found: ...", or "" */

/* NCCL's version (2, 28, 9); records "NCCL not found: ..." when missing. */
jx_status jx_nccl_version(int *major, int *minor, int *patch);

/* What a wait polls, as hooks, so that tests drive the deadline logic with
 * a fake clock and a fake collective. */
typedef struct {
  /* 1: the collective's event completed; 0: not yet; -1: the query failed
   * (an error recorded) */
  int (*done)(void *ctx);
  ncclResult_t (*async_error)(void *ctx); /* ncclCommGetAsyncError's answer */
  void (*abort)(void *ctx);               /* ncclCommAbort */
  double (*now)(void *ctx);               /* seconds, monotonic */
  void (*pause)(void *ctx);               /* between polls */
  const char *(*error_string)(void *ctx, ncclResult_t r);
  void *ctx;
} jx_nccl_wait_hooks;

/* Waits until done, an asynchronous NCCL error, or `timeout_s` seconds
 * (<= 0: no deadline). On an error or the deadline it aborts the
 * communicator and returns JX_ERR_INTERNAL / JX_ERR_TIMEOUT with a message
 * naming `comm_name`, `rank` and `nranks`. */
jx_status jx_nccl_wait_hooked(const jx_nccl_wait_hooks *h, double timeout_s, const char *comm_name,
                              int rank, int nranks);

/* The same on a real communicator and the event recorded after its
 * collective on the communication stream. */
jx_status jx_nccl_wait(ncclComm_t comm, CUevent done, double timeout_s, const char *comm_name,
                       int rank, int nranks);

#endif
