/* Files kept by content, for the suite's caches of compiled things (the
 * CUDA emulator's modules, tests/cuda_emu/cuda_emu_runner.c; NVRTC's images,
 * tests/unit/nvrtc_test_cache.h): a 64-bit FNV-1a hash names an entry, the
 * text it was made from is kept beside it and compared byte for byte on a
 * hit, and entries are written under a private name then renamed, so that
 * processes sharing a directory never read half a file. */
#ifndef JX_TESTS_CONTENT_CACHE_H
#define JX_TESTS_CONTENT_CACHE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONTENT_HASH_SEED 0xcbf29ce484222325ull

static inline uint64_t content_hash(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* The whole file at path, NUL-terminated (malloc'ed; *n bytes), or NULL. */
static inline char *content_read(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)size + 1)) &&
      fread(buf, 1, (size_t)size, f) != (size_t)size) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) {
    buf[size] = '\0';
    if (n) *n = (size_t)size;
  }
  return buf;
}

/* Writes bytes to path whole or not at all: 0, or -1. */
static inline int content_write(const char *path, const void *bytes, size_t n) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  int ok = f && fwrite(bytes, 1, n, f) == n;
  if (f && fclose(f)) ok = 0;
  if (ok && rename(tmp, path) == 0) return 0;
  unlink(tmp);
  return -1;
}

/* 1 when the file at path holds exactly text. */
static inline int content_matches(const char *path, const char *text) {
  size_t n = 0;
  char *kept = content_read(path, &n);
  int same = kept && n == strlen(text) && !memcmp(kept, text, n);
  free(kept);
  return same;
}

#endif
