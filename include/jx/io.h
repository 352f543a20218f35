/* jx/io.h: checkpoints.
 *
 * A checkpoint is a directory per step, <dir>/step_<step, 8 digits>/,
 * holding the tree's arrays in process_<p>.safetensors files and
 * manifest.json (format, step, and per array its name, dtype, shape,
 * sharding and blocks: file, tensor, box, checksum). Each process writes the
 * distinct blocks its devices hold (replicas once), tensors named
 * "name@r0:r1,c0:c1"; an array one process holds whole is written whole
 * under its own name, so a one-process checkpoint is a plain file the
 * safetensors library reads. Anything a run needs to resume — optimizer
 * state, the PRNG key, the data position — is saved as arrays of the tree.
 *
 * Saving is atomic: the step is written to a temporary directory, flushed to
 * disk (fsync) and renamed into place, so a crash mid-write leaves earlier
 * checkpoints intact and never a half-written step. A step saved again is
 * replaced the same way: a crash at any point leaves one whole copy of it
 * (the old one, which the next jx_checkpoint_latest or load renames back, or
 * the new); the next save removes what crashed saves left. A step directory
 * that is a symbolic link is refused, and a checkpoint's files are read only
 * as regular files, never through links. Array names and block names of any
 * length are saved whole. In a job of many processes every process calls
 * save (in the same order) and dir must be on a file system they all share;
 * process 0 renames after a barrier. Loading checks every file (truncation,
 * malformed headers, checksums of blocks read whole, blocks covering each
 * array) and names the file and the array on any problem, and lays each
 * array out as `like` says (its arrays' shardings), reading only the parts
 * of blocks this process's devices hold: a checkpoint restores onto another
 * mesh and another process count. */
#ifndef JX_IO_H
#define JX_IO_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

JX_API jx_status jx_checkpoint_save(const char *dir, int64_t step, const jx_tree *t); /* atomic */
/* like: the names to load, and the dtype, shape and sharding each must have
 * (NULL: every array as saved, on one device). */
JX_API jx_tree *jx_checkpoint_load(const char *dir, int64_t step, const jx_tree *like);
/* The highest step saved in dir (a step_<8 digits> directory with a
 * manifest, as jx_checkpoint_load finds it), or -1 when there is none. */
JX_API int64_t jx_checkpoint_latest(const char *dir);

/* Saving in the background: training goes on while the files are written
 * (the arrays are immutable, so the job reads them safely). wait returns
 * the save's status and frees the job. With many processes the barriers
 * run on the calling thread (one in save_async, the last ones and the
 * rename in wait), so every process must call wait too. */
typedef struct jx_checkpoint_job jx_checkpoint_job;
JX_API jx_checkpoint_job *jx_checkpoint_save_async(const char *dir, int64_t step, const jx_tree *t);
JX_API jx_status jx_checkpoint_wait(jx_checkpoint_job *job);

#ifndef JX_NO_LOCATION_MACROS
#define jx_checkpoint_save(...) JX_LOCATED_STATUS(jx_checkpoint_save, __VA_ARGS__)
#define jx_checkpoint_wait(...) JX_LOCATED_STATUS(jx_checkpoint_wait, __VA_ARGS__)

#define jx_checkpoint_load(...) JX_LOCATED_PTR(jx_tree *, jx_checkpoint_load, __VA_ARGS__)
#define jx_checkpoint_save_async(...)                                                              \
  JX_LOCATED_PTR(jx_checkpoint_job *, jx_checkpoint_save_async, __VA_ARGS__)
#define jx_checkpoint_latest(...) JX_LOCATED_I64(jx_checkpoint_latest, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
