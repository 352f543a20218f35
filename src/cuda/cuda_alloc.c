#include "cuda_alloc.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/hash.h"

enum { NBUCKETS = 1024 };

typedef struct block {
  uint64_t ptr;
  size_t size; /* its size class */
  struct block *next;
} block;

struct jx_cuda_allocator {
  pthread_mutex_t lock;
  jx_cuda_memory_ops ops;
  char device[256];
  block *live[NBUCKETS]; /* handed out, by pointer */
  block *free[NBUCKETS]; /* cached, by size class */
  jx_cuda_alloc_stats st;
};

static size_t bucket_of(uint64_t v) { return (size_t)(jx_hash_u64(JX_HASH_SEED, v) % NBUCKETS); }

size_t jx_cuda_size_class(size_t bytes) {
  const size_t min = 512, big = (size_t)64 << 20, page = (size_t)2 << 20;
  if (bytes <= min) return min;
  if (bytes > big) return (bytes + page - 1) / page * page;
  size_t octave = min;
  while (octave * 2 <= bytes) octave *= 2;
  size_t step = octave / 4;
  return (bytes + step - 1) / step * step;
}

void jx_cuda_format_bytes(size_t bytes, char *out, size_t cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(out, cap, "%zu B", bytes);
  else
    snprintf(out, cap, "%.2f %s", v, units[u]);
}

jx_status jx_cuda_memory_cap_parse(const char *text, size_t total_bytes, size_t *cap) {
  *cap = 0;
  if (!text || !*text) return JX_OK;
  char *end = NULL;
  double v = strtod(text, &end);
  const char *s = end;
  while (*s == ' ') s++;
  size_t scale = 1;
  int percent = 0;
  if (*s == '%') {
    percent = 1;
    s++;
  } else if (*s) {
    const char *units = "KMGT";
    const char *u = strchr(units, toupper((unsigned char)*s));
    if (u) {
      for (const char *p = units; p <= u; p++) scale *= 1024;
      s++;
      if (*s == 'i' || *s == 'I') s++;
      if (*s == 'B' || *s == 'b') s++;
    } else if (*s == 'B' || *s == 'b') {
      s++;
    }
  }
  int ok = end != text && !*s && v > 0 && (!percent || v <= 100);
  if (!ok)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "JX_CUDA_MEMORY_CAP='%s' is neither a positive byte count (e.g. 40G, "
                        "512MiB, 1000000) nor a share of device memory from 0 to 100%% (e.g. 80%%)",
                        text);
  *cap = percent ? (size_t)((double)total_bytes * v / 100.0) : (size_t)(v * (double)scale);
  return JX_OK;
}

jx_cuda_allocator *jx_cuda_allocator_create(jx_cuda_memory_ops ops, size_t cap,
                                            const char *device) {
  jx_cuda_allocator *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  pthread_mutex_init(&a->lock, NULL);
  a->ops = ops;
  a->st.cap = cap;
  snprintf(a->device, sizeof a->device, "%s", device ? device : "CUDA device");
  return a;
}

/* Returns every cached block to the device; under the lock. */
static void trim_locked(jx_cuda_allocator *a) {
  for (int b = 0; b < NBUCKETS; b++) {
    while (a->free[b]) {
      block *k = a->free[b];
      a->free[b] = k->next;
      a->ops.free(a->ops.ctx, k->ptr);
      free(k);
    }
  }
  a->st.cached = 0;
}

void jx_cuda_allocator_trim(jx_cuda_allocator *a) {
  pthread_mutex_lock(&a->lock);
  if (a->st.cached) a->st.trims++;
  trim_locked(a);
  pthread_mutex_unlock(&a->lock);
}

void jx_cuda_allocator_destroy(jx_cuda_allocator *a) {
  if (!a) return;
  trim_locked(a);
  for (int b = 0; b < NBUCKETS; b++) {
    while (a->live[b]) {
      block *k = a->live[b];
      a->live[b] = k->next;
      a->ops.free(a->ops.ctx, k->ptr);
      free(k);
    }
  }
  pthread_mutex_destroy(&a->lock);
  free(a);
}

static void hand_out(jx_cuda_allocator *a, block *k) {
  size_t b = bucket_of(k->ptr);
  k->next = a->live[b];
  a->live[b] = k;
  a->st.in_use += k->size;
  if (a->st.in_use > a->st.peak) a->st.peak = a->st.in_use;
}

static block *take_cached(jx_cuda_allocator *a, size_t size) {
  for (block **p = &a->free[bucket_of(size)]; *p; p = &(*p)->next)
    if ((*p)->size == size) {
      block *k = *p;
      *p = k->next;
      a->st.cached -= size;
      return k;
    }
  return NULL;
}

static jx_status out_of_memory(jx_cuda_allocator *a, size_t bytes, size_t size, int by_cap) {
  char req[32], cls[32], used[32], cached[32], peak[32], cap[32];
  jx_cuda_format_bytes(bytes, req, sizeof req);
  jx_cuda_format_bytes(size, cls, sizeof cls);
  jx_cuda_format_bytes(a->st.in_use, used, sizeof used);
  jx_cuda_format_bytes(a->st.cached, cached, sizeof cached);
  jx_cuda_format_bytes(a->st.peak, peak, sizeof peak);
  jx_cuda_format_bytes(a->st.cap, cap, sizeof cap);
  return jx_error_set(JX_ERR_OUT_OF_MEMORY,
                      "%s: out of memory allocating %s (size class %s): %s in use, %s cached, "
                      "peak %s; %s%s%s",
                      a->device, req, cls, used, cached, peak,
                      by_cap ? "that would pass the cap of " : "the device has no more free memory",
                      by_cap ? cap : "", by_cap ? " (JX_CUDA_MEMORY_CAP)" : "");
}

jx_status jx_cuda_allocator_alloc(jx_cuda_allocator *a, size_t bytes, uint64_t *ptr) {
  *ptr = 0;
  size_t size = jx_cuda_size_class(bytes);
  pthread_mutex_lock(&a->lock);
  block *k = take_cached(a, size);
  if (k) {
    a->st.reuses++;
    hand_out(a, k);
    *ptr = k->ptr;
    pthread_mutex_unlock(&a->lock);
    return JX_OK;
  }
  k = malloc(sizeof *k);
  if (!k) {
    pthread_mutex_unlock(&a->lock);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of host memory for the allocator",
                        a->device);
  }
  for (int attempt = 0;; attempt++) {
    int over_cap = a->st.cap && a->st.in_use + a->st.cached + size > a->st.cap;
    uint64_t p = 0;
    if (!over_cap && a->ops.alloc(a->ops.ctx, size, &p) == 0) {
      *k = (block){p, size, NULL};
      a->st.device_allocs++;
      hand_out(a, k);
      *ptr = p;
      pthread_mutex_unlock(&a->lock);
      return JX_OK;
    }
    /* release the cache and try once more, unless there is nothing to release */
    if (attempt == 0 && a->st.cached) {
      a->st.trims++;
      trim_locked(a);
      continue;
    }
    free(k);
    jx_status st = out_of_memory(a, bytes, size, over_cap);
    pthread_mutex_unlock(&a->lock);
    return st;
  }
}

jx_status jx_cuda_allocator_free(jx_cuda_allocator *a, uint64_t ptr) {
  if (!ptr) return JX_OK;
  pthread_mutex_lock(&a->lock);
  for (block **p = &a->live[bucket_of(ptr)]; *p; p = &(*p)->next)
    if ((*p)->ptr == ptr) {
      block *k = *p;
      *p = k->next;
      a->st.in_use -= k->size;
      size_t b = bucket_of(k->size);
      k->next = a->free[b];
      a->free[b] = k;
      a->st.cached += k->size;
      pthread_mutex_unlock(&a->lock);
      return JX_OK;
    }
  pthread_mutex_unlock(&a->lock);
  return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "%s: freeing 0x%llx, which this allocator did not hand out (or freed twice)",
                      a->device, (unsigned long long)ptr);
}

jx_cuda_alloc_stats jx_cuda_allocator_stats(jx_cuda_allocator *a) {
  pthread_mutex_lock(&a->lock);
  jx_cuda_alloc_stats s = a->st;
  pthread_mutex_unlock(&a->lock);
  return s;
}
