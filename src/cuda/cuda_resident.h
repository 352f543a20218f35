/* Device-resident arrays on CUDA devices: the CUDA side of array.h's
 * jx_device_copy. A copy holds one block of the device's caching allocator
 * (cuda_alloc.h), returned to it when the array is freed, and the event
 * after which the block holds the value (the run that made it queues its
 * kernels on the compute stream and returns; jx_block_until_ready waits for
 * the event, jx_array_ready copies the value down once, ordered after the
 * same work on the compute stream). */
#ifndef JX_SRC_CUDA_CUDA_RESIDENT_H
#define JX_SRC_CUDA_CUDA_RESIDENT_H

#include "../array/array.h"
#include "cuda_device.h"

/* An event recorded on a device's compute stream, shared (reference
 * counted) by the outputs of one run. */
typedef struct jx_cuda_ready jx_cuda_ready;
/* Records one after the work queued so far on d's compute stream; NULL
 * with the error recorded when the driver refuses. */
jx_cuda_ready *jx_cuda_ready_record(jx_cuda_device *d);
void jx_cuda_ready_release(jx_cuda_ready *r);

/* Gives concrete array a (no device copy yet) block ptr of d as its device
 * copy, which owns the block from then on; ready (a new reference is taken;
 * may be NULL: the compute stream orders the value) is what
 * jx_block_until_ready waits for. 1: attached; 0: a already has a copy
 * (another thread's), the caller still owns ptr; -1: out of host memory
 * (error recorded), the caller still owns ptr. */
int jx_cuda_resident_attach(jx_array *a, jx_cuda_device *d, uint64_t ptr, jx_cuda_ready *ready);

/* a's block on d, or 0 when a has no copy there. */
uint64_t jx_cuda_resident_ptr(const jx_array *a, const jx_cuda_device *d);

/* Donation: takes a's block on d (*ptr, now the caller's to free), drops a's
 * host buffer and marks a donated to fn as input `input` (array.h). a must
 * have a copy on d. */
jx_status jx_cuda_resident_take(jx_array *a, jx_cuda_device *d, const char *fn, int input,
                                uint64_t *ptr);

/* For tests: how many times a device-resident value was copied down for a
 * host reader (jx_array_ready, or a sharded array's gather reading a block). */
int64_t jx_cuda_resident_downloads(void);

#endif
