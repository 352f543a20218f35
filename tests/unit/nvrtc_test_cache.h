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

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../content_cache.h"
#include "cuda/nvrtc.h"

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
  uint64_t key = content_hash(CONTENT_HASH_SEED, key_text, strlen(key_text));
  key = content_hash(key, src, strlen(src));
  char src_path[1024], image_path[1024];
  snprintf(src_path, sizeof src_path, "%s/%016llx.cu", dir, (unsigned long long)key);
  snprintf(image_path, sizeof image_path, "%s/%016llx.image", dir, (unsigned long long)key);
  if (content_matches(src_path, src) && (*image = content_read(image_path, n))) return JX_OK;
  jx_status st = jx_nvrtc_compile(src, file, opt, image, n);
  if (st == JX_OK && (mkdir(dir, 0755) == 0 || access(dir, W_OK) == 0)) {
    /* the image first: a reader checks the source, so an entry is whole once it is there */
    if (content_write(image_path, *image, *n) == 0) content_write(src_path, src, strlen(src));
  }
  return st;
}

#endif
