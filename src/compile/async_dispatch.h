/* Async dispatch: a jx_call of a jitted function queues its run on one
 * dispatch thread per process, which runs them in order, and returns at once
 * with pending outputs (array.h); readers wait in jx_array_ready. On by
 * default; JX_ASYNC_DISPATCH=0 turns it off. */
#ifndef JX_SRC_COMPILE_ASYNC_DISPATCH_H
#define JX_SRC_COMPILE_ASYNC_DISPATCH_H

#include "executable.h"

/* 1 when this run of x may be queued: asked for by the calling thread's
 * jx_call (not nested in another run, not on the dispatch thread), one
 * process, no donation (it takes buffers now), no side effect or shard_map
 * in x (jx_executable_synchronous) and no debugging tool watching the steps. */
int jx_dispatch_wanted(const jx_executable *x, const jx_program *p);
/* Waits until every run queued so far has ended (a donating call, which
 * takes its inputs' buffers, first lets the queued runs that read them end). */
void jx_dispatch_wait_all(void);
/* Queues the run: out[] become pending arrays owned by the innermost scope. */
jx_status jx_dispatch_submit(const jx_executable *x, const jx_program *p, jx_array *const *in,
                             jx_array **out);

#endif
