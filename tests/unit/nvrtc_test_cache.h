/* NVRTC through a cache of its images, for the tests that check NVRTC
 * accepts the library's CUDA sources (test_render_cuda, test_cuda_fused_ops):
 * the suite's two passes (gcc, then the sanitizers) compile the same
 * sources with the same NVRTC, ~1 s an image. With $NVRTC_TEST_CACHE_DIR
 * set (scripts/test.sh gives both passes one directory in the gcc build),
 * an image is stored there keyed by a hash of the source, the
 * file name, the target and NVRTC's version, with the source beside it so
 * a hit is checked byte for byte; unset, every call compiles. */
#ifndef JX_TESTS_NVRTC_TEST_CACHE_H
#define JX_TESTS_NVRTC_TEST_CACHE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda/nvrtc.h"

static uint64_t nvrtc_test_hash(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* The whole file at path (malloc'ed, *n bytes), or NULL. */
static char *nvrtc_test_read(const char *path, size_t *n) {
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
  if (buf) *n = (size_t)size;
  return buf;
}

/* Writes bytes to path whole or not at all (a private name, then rename). */
static void nvrtc_test_write(const char *path, const void *bytes, size_t n) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  int ok = f && fwrite(bytes, 1, n, f) == n;
  if (f && fclose(f)) ok = 0;
  if (!ok || rename(tmp, path)) unlink(tmp);
}

/* jx_nvrtc_compile, through the cache when there is one. */
static jx_status nvrtc_test_compile(const char *src, const char *file, const jx_nvrtc_options *opt,
                                    char **image, size_t *n) {
  const char *dir = getenv("NVRTC_TEST_CACHE_DIR");
  int major = 0, minor = 0;
  if (!dir || !*dir || jx_nvrtc_version(&major, &minor) || (opt && opt->nextra))
    return jx_nvrtc_compile(src, file, opt, image, n);
  char key_text[200];
  snprintf(key_text, sizeof key_text, "%s|%s|%d|%d.%d", file, opt && opt->arch ? opt->arch : "",
           opt ? (int)opt->output : 0, major, minor);
  uint64_t key = nvrtc_test_hash(0xcbf29ce484222325ull, key_text, strlen(key_text));
  key = nvrtc_test_hash(key, src, strlen(src));
  char src_path[1024], image_path[1024];
  snprintf(src_path, sizeof src_path, "%s/%016llx.cu", dir, (unsigned long long)key);
  snprintf(image_path, sizeof image_path, "%s/%016llx.image", dir, (unsigned long long)key);
  size_t len = 0;
  char *kept = nvrtc_test_read(src_path, &len);
  int same = kept && len == strlen(src) && !memcmp(kept, src, len);
  free(kept);
  if (same && (*image = nvrtc_test_read(image_path, n))) return JX_OK;
  jx_status st = jx_nvrtc_compile(src, file, opt, image, n);
  if (st == JX_OK && (mkdir(dir, 0755) == 0 || access(dir, W_OK) == 0)) {
    /* the image first: a reader checks the source, so an entry is whole once it is there */
    nvrtc_test_write(image_path, *image, *n);
    nvrtc_test_write(src_path, src, strlen(src));
  }
  return st;
}

#endif
