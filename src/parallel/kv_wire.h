/* The key-value store's messages (kv_store.h), shared by kv_server.c and
 * kv_client.c. A message is its length (u32) then its body. A request's
 * body is an op (u8) then its fields; an answer's is a status (u8: 0 done,
 * 1 refused or failed) then the value, the counter or the reason. Fields:
 * strings and values as a u32 length then the bytes; numbers as i64; both
 * ends have the same byte order (the processes of a job run one build of
 * jx). A client has one request in flight at a time. */
#ifndef JX_SRC_PARALLEL_KV_WIRE_H
#define JX_SRC_PARALLEL_KV_WIRE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
  KV_HELLO = 1, /* token */
  KV_SET,       /* key, value */
  KV_GET,       /* key, timeout (ms) */
  KV_WAIT,      /* count, keys..., timeout (ms) */
  KV_ADD,       /* key, delta -> the new value (i64) */
  KV_JOIN       /* id, nproc, host, timeout (ms) */
};
#define KV_MAX_MESSAGE ((uint32_t)1 << 30)

/* a message being built */
typedef struct {
  char *p;
  size_t len, cap;
  int failed; /* out of memory */
} kv_buf;

static inline void kv_put(kv_buf *b, const void *x, size_t n) {
  if (b->failed) return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->failed = 1;
      return;
    }
    b->p = p, b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, x, n);
  b->len += n;
}
static inline void kv_put_i64(kv_buf *b, int64_t v) { kv_put(b, &v, sizeof v); }
static inline void kv_put_bytes(kv_buf *b, const void *x, size_t n) {
  uint32_t len = (uint32_t)n;
  kv_put(b, &len, sizeof len);
  kv_put(b, x, n);
}
static inline void kv_put_str(kv_buf *b, const char *s) { kv_put_bytes(b, s, strlen(s)); }
/* starts a message: room for its length, filled in by kv_seal */
static inline void kv_begin(kv_buf *b, uint8_t head) {
  b->len = 0;
  b->failed = 0;
  uint32_t zero = 0;
  kv_put(b, &zero, sizeof zero);
  kv_put(b, &head, 1);
}
static inline void kv_seal(kv_buf *b) {
  if (b->failed) return;
  uint32_t body = (uint32_t)(b->len - 4);
  memcpy(b->p, &body, sizeof body);
}

/* a message being read: fields in order; a short one marks bad */
typedef struct {
  const char *p;
  size_t len, at;
  int bad;
} kv_reader;

static inline int64_t kv_get_i64(kv_reader *r) {
  int64_t v = 0;
  if (r->at + sizeof v > r->len) {
    r->bad = 1;
    return 0;
  }
  memcpy(&v, r->p + r->at, sizeof v);
  r->at += sizeof v;
  return v;
}
/* a field's bytes (not terminated) and their count */
static inline const char *kv_get_bytes(kv_reader *r, size_t *n) {
  uint32_t len = 0;
  if (r->at + sizeof len > r->len) {
    r->bad = 1;
    return NULL;
  }
  memcpy(&len, r->p + r->at, sizeof len);
  r->at += sizeof len;
  if (len > r->len - r->at) {
    r->bad = 1;
    return NULL;
  }
  const char *x = r->p + r->at;
  r->at += len;
  *n = len;
  return x;
}

#endif
