/* The state shared by the fake NCCL (nccl_fake.c) and the fake driver it
 * comes with (nccl_fake_driver.c): one shared library that tests point both
 * JX_CUDA_DRIVER_PATH and JX_NCCL_PATH at.
 *
 * Why a driver of its own: a collective finishes only when every rank has
 * called it, so it must be able to stay pending on its stream while the
 * caller returns, and an event recorded after it must say "not ready" until
 * then: that is what the deadline (cuda_nccl.h) polls. tests/cuda_fake's
 * driver runs every stream synchronously and cannot express it.
 *
 * The model: a stream holds the pending work items it must wait for; work
 * on a stream (a copy, a memset, a synchronize) first waits for them, so
 * everything behind a collective happens after it, as on a GPU. An event
 * records the stream's pending items; cuStreamWaitEvent adds an event's
 * items to another stream. One lock and one condition variable guard all
 * of it: tests are small, and simple beats fast here. */
#ifndef JX_TESTS_CUDA_FAKE_NCCL_FAKE_H
#define JX_TESTS_CUDA_FAKE_NCCL_FAKE_H

#include <pthread.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

/* A pending piece of work: done once the collective ran (error: it failed
 * or its communicator was aborted). Reference counted under fake_lock. */
typedef struct fake_work {
  int refs, done, error;
} fake_work;

/* A list of work items (a stream's or an event's). */
typedef struct {
  fake_work **items;
  int n, cap;
} fake_deps;

struct CUctx_st {
  int device;
};
struct CUstream_st {
  struct CUctx_st *ctx;
  fake_deps deps;
};
struct CUevent_st {
  fake_deps deps;
};

extern pthread_mutex_t fake_lock;
extern pthread_cond_t fake_cond; /* broadcast whenever a work item is done */

/* All under fake_lock. */
fake_work *fake_work_new(void); /* one reference */
void fake_work_release(fake_work *w);
void fake_work_finish(fake_work *w, int error); /* marks done and wakes waiters */
int fake_deps_add(fake_deps *d, fake_work *w);  /* retains w; 0 or -1 (no memory) */
void fake_deps_clear(fake_deps *d);
/* Waits (releasing fake_lock meanwhile) until every item of d is done, then clears d. */
void fake_deps_wait(fake_deps *d);

/* Waits (taking fake_lock) for the work stream s waits for: what runs on s
 * next runs after it. */
struct CUstream_st;
void fake_stream_drain(struct CUstream_st *s);

/* The context current on the calling thread, or NULL. */
struct CUctx_st *fake_current_context(void);

#endif
