/* jx/io.h: checkpoints.
 *
 * A checkpoint is a directory per step, <dir>/step_<step, 8 digits>/,
 * holding the tree's arrays as a .safetensors file (readable by the
 * safetensors library) and manifest.json (format, step, and per array its
 * name, dtype, shape, sharding and checksum). Anything a run needs to resume
 * — optimizer state, the PRNG key, the data position — is saved as arrays of
 * the tree.
 *
 * Saving is atomic: the step is written to a temporary directory, flushed to
 * disk (fsync) and renamed into place, so a crash mid-write leaves earlier
 * checkpoints intact and never a half-written step. Loading checks every
 * file (truncation, malformed headers, checksums) and names the file and
 * the array on any problem, and lays each array out as `like` says (its
 * arrays' shardings): a checkpoint saved on one mesh restores onto another. */
#ifndef JX_IO_H
#define JX_IO_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

jx_status jx_checkpoint_save(const char *dir, int64_t step, const jx_tree *t); /* atomic */
/* like: the names to load, and the dtype, shape and sharding each must have
 * (NULL: every array as saved, on one device). */
jx_tree *jx_checkpoint_load(const char *dir, int64_t step, const jx_tree *like);
/* The highest step saved in dir, or -1 when there is none. */
int64_t jx_checkpoint_latest(const char *dir);

/* Saving in the background: training goes on while the files are written
 * (the arrays are immutable, so the job reads them safely). wait returns
 * the save's status and frees the job. */
typedef struct jx_checkpoint_job jx_checkpoint_job;
jx_checkpoint_job *jx_checkpoint_save_async(const char *dir, int64_t step, const jx_tree *t);
jx_status jx_checkpoint_wait(jx_checkpoint_job *job);

#ifndef JX_NO_LOCATION_MACROS
#define jx_checkpoint_save(...) JX_LOCATED_STATUS(jx_checkpoint_save, __VA_ARGS__)
#define jx_checkpoint_wait(...) JX_LOCATED_STATUS(jx_checkpoint_wait, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
