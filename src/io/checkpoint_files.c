/* File helpers for checkpoints: paths in a step directory, durable writes,
 * reading JSON, removing a step directory, and the test hook that crashes
 * or fails a save at each of its durable steps. A step directory is jx's
 * own layout: its files are opened without following links and only when
 * they are regular files, and removing one never follows a link. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint_internal.h"
#include "safetensors.h"
#include "../base/env.h"

void ckpt_step_dir(char *buf, const char *dir, int64_t step) {
  snprintf(buf, CKPT_PATH_CAP, "%s/step_%08" PRId64, dir, step);
}

void ckpt_data_file(char *buf, size_t cap, int process) {
  snprintf(buf, cap, "process_%d.safetensors", process);
}

void ckpt_index_file(char *buf, size_t cap, int process) {
  snprintf(buf, cap, "process_%d.json", process);
}

int ckpt_fault(const char *point) {
  const char *v = jx_env_string("JX_CHECKPOINT_TEST_FAULT");
  if (!v) return 0;
  if (!strncmp(v, "crash:", 6) && !strcmp(v + 6, point)) _exit(77);
  if (!strncmp(v, "fail:", 5) && !strcmp(v + 5, point)) {
    errno = EIO;
    return 1;
  }
  return 0;
}

int ckpt_fsync_fd(int fd, const char *point) { return !ckpt_fault(point) && fsync(fd) == 0; }

int ckpt_fsync_path(const char *path, const char *point) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int ok = ckpt_fsync_fd(fd, point);
  int saved = errno;
  close(fd);
  errno = saved;
  return ok;
}

/* "fsync:<file name>", the fault point of a file's flush */
static void fsync_point(char *buf, size_t cap, const char *path) {
  const char *slash = strrchr(path, '/');
  snprintf(buf, cap, "fsync:%s", slash ? slash + 1 : path);
}

jx_status ckpt_write_text(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return jx_report_error(JX_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  char point[96];
  fsync_point(point, sizeof point, path);
  int ok = jx_write_all(fd, text, strlen(text)) && ckpt_fsync_fd(fd, point);
  int saved = errno;
  ok = (close(fd) == 0) && ok;
  if (!ok && saved) errno = saved;
  return ok ? JX_OK : jx_report_error(JX_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
}

int ckpt_open_regular(const char *path, const char *op) {
  /* O_NONBLOCK: opening a FIFO must not wait for a writer */
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (!op) return -1;
    if (errno == ELOOP)
      jx_report_error(JX_ERR_IO,
                      "%s: '%s' is a symbolic link (a checkpoint's files are read only as "
                      "regular files, never through links)",
                      op, path);
    else
      jx_report_error(JX_ERR_IO, "%s: cannot open '%s': %s", op, path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    if (op) jx_report_error(JX_ERR_IO, "%s: '%s' is not a regular file", op, path);
    return -1;
  }
  return fd;
}

cJSON *ckpt_read_json(const char *path, const char *op) {
  enum { MAX_JSON = 64 << 20 };
  int fd = ckpt_open_regular(path, op);
  if (fd < 0) return NULL;
  struct stat st;
  char *text = NULL;
  ssize_t got = -1;
  if (fstat(fd, &st) == 0 && st.st_size < MAX_JSON && (text = malloc((size_t)st.st_size + 1)))
    got = pread(fd, text, (size_t)st.st_size, 0);
  close(fd);
  cJSON *j = text && got == st.st_size ? cJSON_ParseWithLength(text, (size_t)got) : NULL;
  free(text);
  if (!j && op)
    jx_report_error(JX_ERR_CORRUPT, "%s: '%s' is corrupt: %s", op, path,
                    st.st_size >= MAX_JSON ? "larger than 64 MiB" : "not readable JSON");
  return j;
}

void ckpt_remove_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return; /* not a directory, or a link: left as it is */
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  unlinkat(fd, CKPT_MANIFEST, 0); /* first: a step half removed is never loadable */
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(fd, e->d_name, 0);
  closedir(d);
  rmdir(path);
}
