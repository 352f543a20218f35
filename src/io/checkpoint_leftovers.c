/* What a crashed save leaves in a checkpoint directory, and putting it
 * right. A save writes .step_<N>.tmp.<id>/ and renames it to step_<N>; a
 * save of a step that exists first moves the old step aside to
 * .step_<N>.old.<id>/, then renames the new one into place, then removes the
 * old. A crash between the two renames leaves no step_<N> but a complete
 * old copy: it is renamed back (loading and listing steps do that). Other
 * leftovers are removed by the next save. A save holds a lock (flock) on
 * each directory it is working in, so leftovers of a save still running in
 * another job are never touched. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint_internal.h"

int ckpt_lock_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* A leftover's step and kind ('t': .tmp, 'o': .old); 0 when name is not one. */
static int leftover(const char *name, int64_t *step, char *kind) {
  if (strncmp(name, ".step_", 6) != 0) return 0;
  const char *p = name + 6, *q = p;
  while (*q >= '0' && *q <= '9') q++;
  if (q == p || q - p > 18) return 0;
  if (strncmp(q, ".tmp.", 5) == 0)
    *kind = 't';
  else if (strncmp(q, ".old.", 5) == 0)
    *kind = 'o';
  else
    return 0;
  *step = strtoll(p, NULL, 10);
  return 1;
}

/* Visits each leftover not locked by a running save, with that lock held. */
static void each_leftover(const char *dir, int remove) {
  DIR *d = dir ? opendir(dir) : NULL;
  if (!d) return;
  struct dirent *e;
  char path[CKPT_FILE_CAP + 256], step_dir[CKPT_PATH_CAP], manifest[CKPT_FILE_CAP + 320];
  while ((e = readdir(d))) {
    int64_t step;
    char kind;
    if (!leftover(e->d_name, &step, &kind)) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    int lock = ckpt_lock_dir(path);
    if (lock < 0) continue; /* a save at work, or not a directory */
    ckpt_step_dir(step_dir, dir, step);
    snprintf(manifest, sizeof manifest, "%s/" CKPT_MANIFEST, path);
    struct stat st;
    int step_exists = lstat(step_dir, &st) == 0;
    if (kind == 'o' && !step_exists && lstat(manifest, &st) == 0)
      rename(path, step_dir); /* the crash came between the two renames */
    else if (remove)
      ckpt_remove_dir(path);
    close(lock);
  }
  closedir(d);
}

void ckpt_restore_moved_steps(const char *dir) { each_leftover(dir, 0); }

void ckpt_clean_leftovers(const char *dir) { each_leftover(dir, 1); }
