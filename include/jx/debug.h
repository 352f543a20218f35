/* jx/debug.h: checking derivatives, printing inside transformed code,
 * profiling. */
#ifndef JX_DEBUG_H
#define JX_DEBUG_H

#include <stdio.h>

#include "transform.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks f's derivatives at in as JAX's check_grads does, in forward mode
 * (JVPs against central differences along random directions) and reverse mode
 * (VJPs against those JVPs through inner products), recursively up to order.
 * Only floating inputs and outputs take part. Returns JX_OK, or an error
 * (JX_ERR_INVALID_ARGUMENT) whose message names the mode, order, output and
 * the largest mismatch. atol/rtol <= 0 pick defaults for the dtype. */
JX_API jx_status jx_check_grads(jx_fn *f, jx_array *const *in, int order, double atol, double rtol);

/* ---- printing inside transformed code ----
 * Prints fmt with each "{}" replaced by the next of xs[0..n) (NumPy's str of
 * the array), then a newline, as jax.debug.print does: eagerly it prints at
 * once; under jit it prints each time the compiled program runs, in program
 * order; under grad it prints the primal values during the forward pass;
 * under vmap it prints once per batch element; inside shard_map/pmap each
 * device prints, prefixed with "[device D] ". "{{" and "}}" print braces.
 * Output goes to stdout unless jx_debug_set_output says otherwise. */
JX_API void jx_debug_print(const char *fmt, int n, jx_array *const *xs);
/* Where jx_debug_print writes (NULL: stdout); returns the previous stream.
 * Each print is written whole under a lock and flushed. */
JX_API FILE *jx_debug_set_output(FILE *f);

/* ---- profiling ----
 * Records a Chrome trace (the catapult "traceEvents" JSON, which Perfetto and
 * chrome://tracing load) to trace_json_path from now until jx_profiler_stop:
 * a process track per process (pid = process index) holding a track per
 * device (tid = global device number; tid 1000 = the host thread outside
 * devices) with every step of a jitted program (a compiled kernel or one
 * equation), each run of a jitted program with its estimated and measured
 * peak memory, collectives (bytes, engine), compilations, named scopes and
 * step markers, and memory counters. While no profiler runs each hook costs
 * one branch. In a job of several processes start and stop are collectives
 * (every process calls them): start aligns the clocks and fails on every
 * process when one cannot start; only process 0 opens its path. */
JX_API jx_status jx_profiler_start(const char *trace_json_path);
/* Writes the trace file and prints a summary on stderr: per device the time
 * in compute, communication and idle (which add up to the profiled wall
 * time), the kernels that took longest with their GFLOP/s and GB/s from the
 * cost model, each jitted function's peak memory as jx_fn_cost estimates it
 * beside the one measured, and each device's peak memory. In a job of
 * several processes, process 0 gathers every process's events (within the
 * collective deadline: JX_ERR_TIMEOUT naming a process that does not come,
 * after writing its own) and writes the one file and summary; the others
 * write nothing. */
JX_API jx_status jx_profiler_stop(void);
/* A span on the calling thread's track, shown nested in the trace. */
JX_API void jx_named_scope_begin(const char *name);
JX_API void jx_named_scope_end(void);
/* An instant marker "step n" (a training step) on the calling thread's track. */
JX_API void jx_profiler_step(int64_t n);

/* ---- memory ----
 * Bytes of array buffers alive on a device (arrays made outside device
 * threads count on device 0) and the most alive at once since start or the
 * last reset. JX_DEBUG_MEMORY=1 (or a running profiler) also records which
 * primitive made each buffer, so that an out-of-memory error lists the
 * largest live buffers and their makers. */
typedef struct {
  int64_t live_bytes;
  int64_t peak_bytes;
  int64_t live_buffers;
} jx_memory_stats;
JX_API jx_status jx_memory_stats_get(int device, jx_memory_stats *out);
/* As jax's Device.memory_stats(): fills out for device; JX_ERR_INVALID_ARGUMENT
 * for a device number out of range. */
#define jx_memory_stats(device, out) jx_memory_stats_get(device, out)
JX_API void jx_memory_reset_peak(int device); /* peak := live; -1: every device */

/* ---- MFU ----
 * Peak f32 FLOP/s of this machine with jx's threads, the denominator of
 * model FLOPs utilization: JX_PEAK_FLOPS when set to a positive number, else
 * the figure cached in the kernel cache directory for this CPU model and
 * thread count, else measured by an FMA loop on every thread (~50 ms, once
 * per machine; the result is cached). */
JX_API double jx_peak_flops(void);
/* f32 FLOP/s jx's matmul reaches on 1024 x 1024 operands (best of 5 runs,
 * measured at each call): at most jx_peak_flops(). */
JX_API double jx_gemm_flops(void);

#ifndef JX_NO_LOCATION_MACROS
#define jx_check_grads(...) JX_LOCATED_STATUS(jx_check_grads, __VA_ARGS__)
/* located: an equation it records, and an error it reports, carry the caller's file:line */
#define jx_debug_print(...)                                                                        \
  ((void)(jx_loc_enter_(), jx_debug_print(__VA_ARGS__), jx_loc_leave_status_(JX_HERE, JX_OK)))
#endif

#ifdef __cplusplus
}
#endif
#endif
