/* File helpers for checkpoints: paths in a step directory, durable writes,
 * reading JSON, removing a step directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint_internal.h"
#include "safetensors.h"

void ckpt_step_dir(char *buf, const char *dir, int64_t step) {
  snprintf(buf, CKPT_PATH_CAP, "%s/step_%08" PRId64, dir, step);
}

void ckpt_data_file(char *buf, size_t cap, int process) {
  snprintf(buf, cap, "process_%d.safetensors", process);
}

void ckpt_index_file(char *buf, size_t cap, int process) {
  snprintf(buf, cap, "process_%d.json", process);
}

int ckpt_fsync_path(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int ok = fsync(fd) == 0;
  close(fd);
  return ok;
}

jx_status ckpt_write_text(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return jx_report_error(JX_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  int ok = jx_write_all(fd, text, strlen(text)) && fsync(fd) == 0;
  ok = (close(fd) == 0) && ok;
  return ok ? JX_OK : jx_report_error(JX_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
}

cJSON *ckpt_read_json(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = len >= 0 && len < (64L << 20) ? malloc((size_t)len + 1) : NULL;
  size_t got = text ? fread(text, 1, (size_t)len, f) : 0;
  fclose(f);
  cJSON *j = text && got == (size_t)len ? cJSON_ParseWithLength(text, got) : NULL;
  free(text);
  return j;
}

void ckpt_remove_dir(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    char p[CKPT_FILE_CAP + 256];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(path);
}
