/* The caching device-memory allocator: one per device. Requests are rounded
 * up to size classes; freed blocks stay cached in per-class free lists and
 * are handed out again, so a training step's repeated shapes cost no
 * cuMemAlloc after the first step. Device memory is taken on demand (no
 * preallocation), up to an optional cap (JX_CUDA_MEMORY_CAP: bytes such as
 * "40G", or a share of the device such as "80%"). When the device or the cap
 * refuses a block, the cache is released and the request tried once more;
 * then the error names the device, the request, and the bytes in use and
 * cached.
 *
 * The bookkeeping calls the device through two function pointers, so tests
 * drive it with malloc/free standing in for cuMemAlloc/cuMemFree.
 * Thread-safe: one lock per allocator (held across the device call). */
#ifndef JX_SRC_CUDA_CUDA_ALLOC_H
#define JX_SRC_CUDA_CUDA_ALLOC_H

#include <jx/base.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  /* 0 and *ptr on success; nonzero when the device has no memory left */
  int (*alloc)(void *ctx, size_t bytes, uint64_t *ptr);
  void (*free)(void *ctx, uint64_t ptr);
  void *ctx;
} jx_cuda_memory_ops;

typedef struct {
  size_t in_use;         /* bytes of blocks handed out (size classes, not requests) */
  size_t cached;         /* bytes of freed blocks kept for reuse */
  size_t peak;           /* the most bytes in use at once */
  size_t cap;            /* 0: no cap */
  int64_t device_allocs; /* blocks taken from the device */
  int64_t reuses;        /* requests served from the cache */
  int64_t trims;         /* times the cache was released to make room */
} jx_cuda_alloc_stats;

typedef struct jx_cuda_allocator jx_cuda_allocator;

/* `device` names the device in messages ("CUDA device 0 (NVIDIA H200)");
 * cap 0 means no cap. NULL when out of host memory. */
jx_cuda_allocator *jx_cuda_allocator_create(jx_cuda_memory_ops ops, size_t cap, const char *device);
/* Returns every block, cached or still in use, to the device. */
void jx_cuda_allocator_destroy(jx_cuda_allocator *a);

/* A block of at least `bytes` in *ptr, or JX_ERR_OUT_OF_MEMORY with the
 * message above (and *ptr = 0). */
jx_status jx_cuda_allocator_alloc(jx_cuda_allocator *a, size_t bytes, uint64_t *ptr);
/* Keeps the block for reuse; 0 is ignored; a pointer this allocator did not
 * hand out is an error (JX_ERR_INVALID_ARGUMENT), never a crash. */
jx_status jx_cuda_allocator_free(jx_cuda_allocator *a, uint64_t ptr);
/* Returns the cached blocks to the device. */
void jx_cuda_allocator_trim(jx_cuda_allocator *a);
jx_cuda_alloc_stats jx_cuda_allocator_stats(jx_cuda_allocator *a);

/* The size class of a request: at least 512 bytes; up to 64 MiB, four
 * classes per power of two (at most 25 % over the request); above, a
 * multiple of 2 MiB (the device's page). */
size_t jx_cuda_size_class(size_t bytes);

/* Parses a cap: NULL or "" -> 0 (no cap); "123", "40G", "512MiB" -> bytes
 * (K, M, G, T are powers of 1024); "80%" -> that share of total_bytes.
 * Anything else is JX_ERR_INVALID_ARGUMENT naming JX_CUDA_MEMORY_CAP. */
jx_status jx_cuda_memory_cap_parse(const char *text, size_t total_bytes, size_t *cap);

/* "1.50 GiB", "512 B": for messages. */
void jx_cuda_format_bytes(size_t bytes, char *out, size_t cap);

#endif
