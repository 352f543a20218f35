/* jx: JAX's model in C.
 *
 * A short tour (a whole program):
 *
 *   #include <jx/jx.h>
 *   int main(void) {
 *     jx_array *x = jx_arange(JX_F32, 0, 6, 1);             // [0 1 2 3 4 5]
 *     jx_array *m = jx_reshape(x, JX_SHAPE(2, 3));          // f32[2,3]
 *     jx_array *s = jx_softmax(jx_mul(m, jx_scalar(JX_F32, 0.5)), 1);
 *     jx_print(jx_sum(s, JX_AXES(1), 0), stdout);           // [1. 1.]
 *     jx_array *key = jx_random_key(0);
 *     jx_print(jx_random_normal(key, JX_F32, JX_SHAPE(3)), stdout); // as jax.random
 *     if (jx_last_status() != JX_OK) fprintf(stderr, "%s\n", jx_last_error());
 *     jx_shutdown();
 *   }
 *
 * Loops: every result belongs to the innermost open scope (base.h), and
 * with none open to the thread's root scope, which lives until
 * jx_shutdown. A loop therefore opens a scope per iteration and keeps what
 * it carries over with jx_keep:
 *
 *   jx_array *w = jx_keep(init);
 *   for (int step = 0; step < n; step++) {
 *     jx_scope_begin();
 *     jx_array *next = jx_sub(w, jx_mul(lr, grad_of(w)));  // temporaries die at the end
 *     jx_release(w);
 *     w = jx_keep(next);                                    // the carried value survives
 *     jx_scope_end();
 *   }
 *
 * Without it memory grows every iteration; jx prints one warning when the
 * root scope holds 10,000 arrays or 64 MiB.
 *
 * Errors: a failed call returns a poisoned array (or a status, or NULL) and
 * records a message naming the caller's file:line; later calls are judged
 * by what happens in them, and jx_last_error keeps the first message until
 * jx_clear_error (base.h).
 *
 * base.h: errors, scopes, shapes;  array.h: dtypes, arrays, .npy;
 * ops.h: operations;  linalg.h: linear algebra;  random.h: the PRNG;
 * transform.h: functions, jit, grad, vmap.
 *
 * Threads. jx may be used from several threads at once:
 *  - Per thread: the error state (jx_last_error: each thread sees its own
 *    first error) and the scope stack. An array belongs to a scope of the
 *    thread that made it; another thread may read it while that scope is
 *    open, or take its own reference with jx_keep (arrays are immutable and
 *    their reference counts atomic).
 *  - Safe from any number of threads at once: every op, jx_call and the
 *    transformations (a jx_fn may be called from several threads at once),
 *    jx_read / jx_item / jx_block_until_ready, jx_keep / jx_release, and the
 *    checkpoint functions on different directories.
 *  - One thread at a time: an object made by a create call (a jx_loader, a
 *    jx_checkpoint_job, a jx_tree being changed, an optimizer's state).
 *  - Process-wide, set before other threads use jx: jx_set_error_handler,
 *    jx_distributed_init, the profiler (jx_profiler_start / stop), and the
 *    JX_* environment variables.
 *  - A jitted jx_call may return before its run ends (async dispatch): one
 *    dispatch thread per process runs the queued calls of every thread in
 *    the order they were queued; any thread may read the results.
 *  - A thread that used jx ends with jx_thread_end (its own scopes only).
 *    jx_shutdown, from any thread, lets every queued run of every thread
 *    end before it stops the dispatch thread; a thread's jx_call made
 *    during or after it still runs (on the calling thread while the stop is
 *    in progress, then on a new dispatch thread), so no caller waits
 *    forever. jx's own threads (checkpoint writer, data loader) never call
 *    jx_shutdown. */
#ifndef JX_JX_H
#define JX_JX_H

#include "array.h"
#include "base.h"
#include "cuda.h"
#include "data.h"
#include "debug.h"
#include "distributed.h"
#include "io.h"
#include "fft.h"
#include "linalg.h"
#include "nn.h"
#include "ops.h"
#include "optim.h"
#include "parallel.h"
#include "random.h"
#include "transform.h"

#endif
