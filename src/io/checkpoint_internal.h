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
enum { CKPT_PATH_CAP = 4096, CKPT_FILE_CAP = CKPT_PATH_CAP + 64 }; /* a step dir, a file in it */

/* <dir>/step_<8 digits> */
void ckpt_step_dir(char *buf, const char *dir, int64_t step);
/* process_<p>.safetensors, process_<p>.json (the process's block index) */
void ckpt_data_file(char *buf, size_t cap, int process);
void ckpt_index_file(char *buf, size_t cap, int process);

int ckpt_fsync_path(const char *path);
/* Writes text to path and fsyncs it. */
jx_status ckpt_write_text(const char *path, const char *text);
/* The file's JSON (NULL and no error when it cannot be read or parsed). */
cJSON *ckpt_read_json(const char *path);
/* Removes a directory's files and the directory (it holds no subdirectories). */
void ckpt_remove_dir(const char *path);

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
