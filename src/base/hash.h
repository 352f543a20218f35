/* 64-bit FNV-1a hashing for caches keyed by structure. */
#ifndef JX_SRC_BASE_HASH_H
#define JX_SRC_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define JX_HASH_SEED 0xcbf29ce484222325ull

static inline uint64_t jx_hash_bytes(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
static inline uint64_t jx_hash_u64(uint64_t h, uint64_t v) {
  return jx_hash_bytes(h, &v, sizeof v);
}
static inline uint64_t jx_hash_str(uint64_t h, const char *s) {
  for (; s && *s; s++) {
    h ^= (unsigned char)*s;
    h *= 0x100000001b3ull;
  }
  return jx_hash_u64(h, 0xff);
}

#endif
