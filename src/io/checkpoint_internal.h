/* Shared by the checkpoint files: paths, file helpers, the manifest's
 * format, and a save option for tests. */
#ifndef JX_SRC_IO_CHECKPOINT_INTERNAL_H
#define JX_SRC_IO_CHECKPOINT_INTERNAL_H

#include <cjson/cJSON.h>
#include <jx/jx.h>

#include "checkpoint_layout.h"

#define CKPT_MANIFEST "manifest.json"
#define CKPT_FORMAT   "jx-checkpoint"
#define CKPT_VERSION  2
/* a step dir, a file in it; the longest checkpoint directory name */
enum {
  CKPT_PATH_CAP = 4096,
  CKPT_FILE_CAP = CKPT_PATH_CAP + 64,
  CKPT_DIR_MAX = CKPT_PATH_CAP - 64
};

/* <dir>/step_<8 digits> */
void ckpt_step_dir(char *buf, const char *dir, int64_t step);
/* process_<p>.safetensors, process_<p>.json (the process's block index) */
void ckpt_data_file(char *buf, size_t cap, int process);
void ckpt_index_file(char *buf, size_t cap, int process);

/* Fault injection for tests of crash safety, at each durable step of a
 * save (its point): JX_CHECKPOINT_TEST_FAULT=crash:<point> ends the process
 * just before the step, as a crash there would; fail:<point> makes the step
 * fail with EIO. 1 when the step is to fail. The points, in order:
 * fsync:process_<p>.safetensors, fsync:process_<p>.json,
 * fsync:manifest.json, fsync:step (the new step's directory),
 * rename:aside (an existing step moved aside), rename:into-place,
 * fsync:dir (the checkpoint directory), remove:old. */
int ckpt_fault(const char *point);
/* fsync, through the fault point; 0 on failure (errno says why) */
int ckpt_fsync_fd(int fd, const char *point);
int ckpt_fsync_path(const char *path, const char *point);
/* Writes text to path and fsyncs it (fault point fsync:<file name>). */
jx_status ckpt_write_text(const char *path, const char *text);
/* A regular file of a step directory opened for reading, never through a
 * link and never blocking (a FIFO is refused); -1 when it cannot be, with
 * an error naming op and the file (op NULL: no error). */
int ckpt_open_regular(const char *path, const char *op);
/* The file's JSON; NULL when it cannot be read or parsed, with an error
 * naming op and the file (op NULL: no error). */
cJSON *ckpt_read_json(const char *path, const char *op);
/* Removes a step directory's files and the directory, never following a
 * link (a link is left as it is). */
void ckpt_remove_dir(const char *path);

/* A save's lock on a directory it works in: the directory opened (never
 * through a link) with flock held; -1 when another save holds it or it is
 * not a directory. Closing the descriptor releases it. */
int ckpt_lock_dir(const char *path);
/* Renames back a step a save moved aside when it crashed before putting
 * the new one in place (checkpoint_leftovers.c). */
void ckpt_restore_moved_steps(const char *dir);
/* That, and removes crashed saves' temporary and moved-aside directories. */
void ckpt_clean_leftovers(const char *dir);

/* One saved block of an array, as the manifest records it. */
typedef struct {
  char file[64]; /* process_<p>.safetensors, in the step directory */
  char *tensor;  /* its tensor name in that file */
  ckpt_box box;  /* where it lies in the global array */
  uint64_t checksum;
} ckpt_block;

/* An array's manifest entry, read and checked: its blocks cover it exactly. */
typedef struct {
  const char *name;
  jx_dtype dtype;
  jx_shape shape;
  int nblocks;
  ckpt_block *blocks;
} ckpt_entry;

/* Reads the entry called name out of manifest m (path names the manifest
 * in errors); JX_ERR_INVALID_ARGUMENT when there is none. */
jx_status ckpt_entry_read(const cJSON *m, const char *name, const char *path, const char *op,
                          ckpt_entry *out);
void ckpt_entry_free(ckpt_entry *e);
cJSON *ckpt_block_json(const char *file, const char *tensor, const ckpt_box *b, uint64_t sum);

/* Saving with options. split_blocks: write each distinct block as its own
 * tensor even where one process holds the whole array (tests use it to make
 * block checkpoints with one process). */
typedef struct {
  int split_blocks;
} ckpt_save_options;
jx_status ckpt_save_with(const char *dir, int64_t step, const jx_tree *t,
                         const ckpt_save_options *opts);

#endif
