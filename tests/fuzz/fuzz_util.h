/* Shared by the libFuzzer harnesses: a scratch directory for the files an
 * input becomes (the loaders read paths), and the small checkpoint the
 * manifest and directory harnesses start from. Header only: each harness
 * is an executable of its own. */
#ifndef JX_TESTS_FUZZ_FUZZ_UTIL_H
#define JX_TESTS_FUZZ_FUZZ_UTIL_H

#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jx/jx.h>

static int fuzz_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static char fuzz_dir[512];

static void fuzz_remove_scratch(void) {
  nftw(fuzz_dir, fuzz_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh directory, removed at exit: under $TMPDIR, else in memory
 * (/dev/shm: ten times the executions of a disk), else under /tmp. Exits
 * when it cannot be made. */
static inline const char *fuzz_scratch_dir(void) {
  if (*fuzz_dir) return fuzz_dir;
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(fuzz_dir, sizeof fuzz_dir, "%s/jx-fuzz-XXXXXX", tmp);
  if (!mkdtemp(fuzz_dir)) {
    perror("jx fuzz: scratch directory");
    exit(1);
  }
  atexit(fuzz_remove_scratch);
  return fuzz_dir;
}

/* Writes data to path, replacing it; exits on failure (the harness is broken
 * then, not the code under test). */
static inline void fuzz_write(const char *path, const uint8_t *data, size_t size) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) != 0) {
    perror(path);
    exit(1);
  }
}

/* The checkpoint the seeds were saved from: a block-split f32 array on a
 * mesh of 2 devices, a whole i32 vector and a scalar. Needs 2 CPU devices. */
static inline jx_tree *fuzz_sample_tree(jx_mesh **mesh, jx_sharding **rows) {
  *mesh = jx_mesh_create_on(JX_SHAPE(2), (const char *[]){"data"}, (const int[]){0, 1});
  *rows = jx_sharding_create(*mesh, "data");
  jx_tree *t = jx_tree_create();
  jx_tree_set(t, "w", jx_device_put(jx_reshape(jx_arange(JX_F32, 0, 8, 1), JX_SHAPE(4, 2)), *rows));
  jx_tree_set(t, "ids", jx_arange(JX_I32, 5, 8, 1));
  jx_tree_set(t, "step", jx_full(JX_I64, JX_SHAPE(), 7));
  return t;
}

#endif
