/* Memory accounting: live and peak bytes of array buffers per device, kept
 * with atomics so the hooks in array.c cost a few instructions. While
 * tracking is on (JX_DEBUG_MEMORY=1 or a running profiler) each buffer is
 * also listed with the primitive that made it, for out-of-memory reports. */
#ifndef JX_SRC_BASE_MEMSTATS_H
#define JX_SRC_BASE_MEMSTATS_H

#include <stddef.h>
#include <stdint.h>

#define JX_MEMSTATS_DEVICES 256 /* devices past this count on the last slot */

/* What array.c keeps beside each buffer. */
typedef struct jx_mem_rec {
  int device;
  int listed; /* in the list of live buffers (tracking was on when it was made) */
  size_t bytes;
  const char *creator; /* a static string (a primitive's name), or NULL */
  struct jx_mem_rec *prev, *next;
} jx_mem_rec;

/* Counts bytes on the calling thread's device; returns non-zero (counting
 * nothing) when that would pass the device's limit (jx_memstats_set_limit). */
int jx_memstats_on_alloc(jx_mem_rec *r, size_t bytes);
void jx_memstats_on_free(jx_mem_rec *r);

/* The primitive or kernel whose outputs the calling thread is allocating
 * (a static string); returns the previous one. */
const char *jx_memstats_set_op(const char *op);
/* Tracking: nesting count (the profiler turns it on while it runs). */
void jx_memstats_track(int on);

/* Per device (-1 in set_limit: all): 0 = no limit. For tests and for
 * capping a run's memory (JX_MEMORY_LIMIT_BYTES sets it for every device). */
void jx_memstats_set_limit(int device, int64_t bytes);
int64_t jx_memstats_live(int device);
int64_t jx_memstats_peak(int device);
int64_t jx_memstats_buffers(int device);
void jx_memstats_reset_peak(int device);

/* Appends "; largest live buffers: 4.0 MiB by dot_general on device 0, ..."
 * (up to n) to buf, when tracking listed any. */
void jx_memstats_describe_largest(char *buf, size_t cap, int n);

/* Called on every change of a device's live bytes while set (the profiler's
 * counter events). */
extern void (*volatile jx_memstats_counter_hook)(int device, int64_t live);

#endif
