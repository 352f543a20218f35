#include "cuda_nccl.h"

#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "../base/error.h"
#include "cuda_loader.h"

static jx_nccl_api api;
static void *lib;
static char load_error[1024];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
  static const char *const sonames[] = {"libnccl.so.2", "libnccl.so", NULL};
  static const jx_cuda_library nccl = {"NCCL", "JX_NCCL_PATH", sonames, 1,
                                       "install NCCL (Debian/Ubuntu: libnccl2)"};
#define SYM(field, name)                                                                           \
  { (void **)&api.field, name, NULL, 0 }
  const jx_cuda_symbol syms[] = {
      SYM(GetVersion, "ncclGetVersion"),
      SYM(GetUniqueId, "ncclGetUniqueId"),
      SYM(CommInitRank, "ncclCommInitRank"),
      SYM(CommSplit, "ncclCommSplit"),
      SYM(CommAbort, "ncclCommAbort"),
      SYM(CommDestroy, "ncclCommDestroy"),
      SYM(CommGetAsyncError, "ncclCommGetAsyncError"),
      SYM(AllReduce, "ncclAllReduce"),
      SYM(AllGather, "ncclAllGather"),
      SYM(ReduceScatter, "ncclReduceScatter"),
      SYM(Broadcast, "ncclBroadcast"),
      SYM(Send, "ncclSend"),
      SYM(Recv, "ncclRecv"),
      SYM(GroupStart, "ncclGroupStart"),
      SYM(GroupEnd, "ncclGroupEnd"),
      SYM(GetErrorString, "ncclGetErrorString"),
  };
#undef SYM
  lib = jx_cuda_library_open(&nccl, syms, (int)(sizeof syms / sizeof syms[0]), load_error,
                             sizeof load_error);
}

const jx_nccl_api *jx_nccl(void) {
  pthread_once(&load_once, load);
  return lib ? &api : NULL;
}

const char *jx_nccl_load_error(void) {
  pthread_once(&load_once, load);
  return load_error;
}

jx_status jx_nccl_version(int *major, int *minor, int *patch) {
  *major = *minor = *patch = 0;
  if (!jx_nccl()) return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s", load_error);
  int code = 0;
  ncclResult_t r = api.GetVersion(&code);
  if (r != JX_NCCL_SUCCESS)
    return jx_error_set(JX_ERR_INTERNAL, "NCCL: ncclGetVersion: %s", api.GetErrorString(r));
  /* since 2.9: major*10000 + minor*100 + patch; before: major*1000 + minor*100 + patch */
  int scale = code >= 10000 ? 10000 : 1000;
  *major = code / scale;
  *minor = code % scale / 100;
  *patch = code % 100;
  return JX_OK;
}

jx_status jx_nccl_wait_hooked(const jx_nccl_wait_hooks *h, double timeout_s, const char *comm_name,
                              int rank, int nranks) {
  double start = h->now(h->ctx);
  for (;;) {
    int done = h->done(h->ctx);
    /* an asynchronous error can leave the event pending forever: ask every poll */
    ncclResult_t async = h->async_error(h->ctx);
    if (async != JX_NCCL_SUCCESS && async != JX_NCCL_IN_PROGRESS) {
      h->abort(h->ctx);
      return jx_error_set(JX_ERR_INTERNAL,
                          "NCCL: communicator '%s' (rank %d of %d): %s; the communicator was "
                          "aborted",
                          comm_name, rank, nranks, h->error_string(h->ctx, async));
    }
    if (done < 0) {
      h->abort(h->ctx);
      return JX_ERR_INTERNAL; /* the query recorded why */
    }
    if (done) return JX_OK;
    double waited = h->now(h->ctx) - start;
    if (timeout_s > 0 && waited >= timeout_s) {
      h->abort(h->ctx);
      return jx_error_set(JX_ERR_TIMEOUT,
                          "NCCL: communicator '%s' (rank %d of %d): the collective did not finish "
                          "within %g s; the communicator was aborted (did a peer die, or stop "
                          "calling collectives?)",
                          comm_name, rank, nranks, timeout_s);
    }
    h->pause(h->ctx);
  }
}

/* ---- the real hooks: a CUDA event and a communicator ---- */

typedef struct {
  ncclComm_t comm;
  CUevent event;
} real_wait;

static int real_done(void *ctx) {
  real_wait *w = ctx;
  CUresult r = jx_cuda_driver()->EventQuery(w->event);
  if (r == JX_CUDA_SUCCESS) return 1;
  if (r == JX_CUDA_ERROR_NOT_READY) return 0;
  jx_cuda_check(r, "cuEventQuery (waiting for a collective)", -1);
  return -1;
}

static ncclResult_t real_async_error(void *ctx) {
  real_wait *w = ctx;
  ncclResult_t e = JX_NCCL_SUCCESS;
  ncclResult_t r = api.CommGetAsyncError(w->comm, &e);
  return r != JX_NCCL_SUCCESS ? r : e;
}

static void real_abort(void *ctx) {
  real_wait *w = ctx;
  api.CommAbort(w->comm);
}

static double real_now(void *ctx) {
  (void)ctx;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void real_pause(void *ctx) {
  (void)ctx;
  /* 50 us: a collective's latency is tens of microseconds and up */
  struct timespec t = {0, 50000};
  nanosleep(&t, NULL);
}

static const char *real_error_string(void *ctx, ncclResult_t r) {
  (void)ctx;
  return api.GetErrorString(r);
}

jx_status jx_nccl_wait(ncclComm_t comm, CUevent done, double timeout_s, const char *comm_name,
                       int rank, int nranks) {
  if (!jx_nccl()) return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s", load_error);
  if (!jx_cuda_driver())
    return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s", jx_cuda_driver_load_error());
  real_wait w = {comm, done};
  jx_nccl_wait_hooks h = {real_done,  real_async_error,  real_abort, real_now,
                          real_pause, real_error_string, &w};
  return jx_nccl_wait_hooked(&h, timeout_s, comm_name, rank, nranks);
}
