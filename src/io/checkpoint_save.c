/* Saving checkpoints. Every process writes the distinct blocks its devices
 * hold to process_<p>.safetensors, and a list of them (with checksums) to
 * process_<p>.json, in one temporary step directory all processes see;
 * after a barrier process 0 merges the lists into manifest.json, flushes
 * the directory and renames it into place. The phases:
 *   begin   process 0 makes the temporary directory; barrier; the others
 *           check they see it (the file system must be shared)
 *   write   the data file and the block list of this process
 *   finish  barrier; process 0 writes the manifest and renames; barrier;
 *           the others check that the step is in place.
 * A step saved again is replaced crash-safely (checkpoint_leftovers.c), and
 * a step path that is a link or not a directory is refused: jx never
 * replaces, follows or removes through a link. Names of any length are
 * saved whole.
 * Every process runs every barrier even after a failure, so a failure on
 * one process becomes an error on all of them, never a hang. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint_internal.h"
#include "safetensors.h"

#define SAVE_ID "save_id"

typedef struct {
  int array;    /* index in the tree */
  int position; /* the mesh position whose shard is written; -1: the whole array */
  ckpt_box box;
  char *tensor;
} planned_block;

struct jx_checkpoint_job {
  pthread_t thread;
  int started; /* the thread runs */
  char *dir;
  int64_t step;
  jx_tree *tree; /* holds references to the arrays */
  ckpt_save_options opts;
  int me, nproc;
  char tmp[CKPT_PATH_CAP], final[CKPT_PATH_CAP], old[CKPT_PATH_CAP];
  char save_id[64];
  int tmp_lock; /* process 0's lock on tmp while it saves; -1: none */
  int nblocks;
  planned_block *blocks;
  jx_status status; /* the first failure of this process's part */
  char *message;    /* its message, when it happened on the writer thread */
};

static const char *const OP = "jx_checkpoint_save";

static jx_status check_args(const char *op, const char *dir, int64_t step, const jx_tree *t) {
  if (!dir || !t)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the %s is NULL", op,
                           dir ? "tree" : "directory");
  if (step < 0)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: step %" PRId64 " is negative", op, step);
  if (strlen(dir) > CKPT_DIR_MAX)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT,
                           "%s: dir is %zu characters long; at most %d are supported", op,
                           strlen(dir), CKPT_DIR_MAX);
  for (int i = 0; i < jx_tree_size(t); i++)
    if (jx_is_poisoned(jx_tree_at(t, i)))
      return jx_report_error(JX_ERR_POISONED, "%s: array '%s' carries an earlier error", op,
                             jx_tree_name(t, i));
  return JX_OK;
}

static void job_free(jx_checkpoint_job *j) {
  if (!j) return;
  for (int i = 0; i < j->nblocks; i++) free(j->blocks[i].tensor);
  free(j->blocks);
  if (j->tmp_lock >= 0) close(j->tmp_lock);
  jx_tree_release(j->tree);
  free(j->message);
  free(j->dir);
  free(j);
}

/* A job holding its own references to t's arrays; the temporary
 * directory's name is agreed by all processes: they save in the same order. */
static jx_checkpoint_job *job_new(const char *op, const char *dir, int64_t step, const jx_tree *t,
                                  const ckpt_save_options *opts) {
  static atomic_int counter;
  jx_checkpoint_job *j = calloc(1, sizeof *j);
  if (j) j->tmp_lock = -1;
  jx_array **flat = malloc(sizeof *flat * (size_t)(jx_tree_size(t) + 1));
  if (j && flat && (j->dir = strdup(dir))) {
    jx_tree_flatten(t, flat);
    j->tree = jx_tree_unflatten(t, flat);
  }
  free(flat);
  if (!j || !j->tree) {
    job_free(j);
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  j->step = step;
  if (opts) j->opts = *opts;
  j->me = jx_process_index();
  j->nproc = jx_process_count();
  int k = atomic_fetch_add(&counter, 1);
  if (j->nproc > 1) /* the same name on every process */
    snprintf(j->tmp, sizeof j->tmp, "%s/.step_%08" PRId64 ".tmp.job%d", dir, step, k);
  else /* a pid keeps separate jobs saving into one directory apart */
    snprintf(j->tmp, sizeof j->tmp, "%s/.step_%08" PRId64 ".tmp.%d.%d", dir, step, (int)getpid(),
             k);
  snprintf(j->old, sizeof j->old, "%s/.step_%08" PRId64 ".old.%d.%d", dir, step, (int)getpid(), k);
  ckpt_step_dir(j->final, dir, step);
  return j;
}

static jx_status barrier(jx_checkpoint_job *j, const char *phase) {
  if (j->nproc == 1) return JX_OK;
  char name[96];
  snprintf(name, sizeof name, "jx_checkpoint_save %s step %" PRId64, phase, j->step);
  jx_status st = jx_sync_global_devices(name);
  if (st && !j->status) j->status = st;
  return st;
}

static void fail(jx_checkpoint_job *j, jx_status st) {
  if (!j->status) j->status = st;
}

/* The blocks this process writes. */
static jx_status plan(jx_checkpoint_job *j) {
  int n = jx_tree_size(j->tree), cap = 0;
  for (int i = 0; i < n; i++) {
    jx_array *a = jx_tree_at(j->tree, i);
    const char *name = jx_tree_name(j->tree, i);
    ckpt_layout l;
    jx_status st = ckpt_layout_of(jx_sharding_of(a), jx_shape_of(a), &l, OP);
    if (st) return st;
    int whole = jx_sharding_of(a) == NULL || (!j->opts.split_blocks && l.whole_by >= 0);
    for (int p = 0; p < l.n; p++) {
      int mine = whole ? p == 0 && l.whole_by == j->me : l.writer[p] && l.process[p] == j->me;
      if (!mine) continue;
      if (j->nblocks == cap) {
        cap = cap ? 2 * cap : 16;
        planned_block *b = realloc(j->blocks, sizeof *b * (size_t)cap);
        if (!b) {
          ckpt_layout_free(&l);
          return jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", OP);
        }
        j->blocks = b;
      }
      planned_block *b = &j->blocks[j->nblocks];
      b->array = i;
      b->position = whole ? -1 : p;
      b->box = whole ? ckpt_box_whole(jx_shape_of(a)) : l.box[p];
      b->tensor = whole ? strdup(name) : ckpt_block_name(name, &b->box);
      if (!b->tensor) {
        ckpt_layout_free(&l);
        return jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", OP);
      }
      j->nblocks++;
    }
    ckpt_layout_free(&l);
  }
  return JX_OK;
}

/* The step's path may hold an earlier save of it (a directory), nothing
 * else: never a link, which a re-save would replace and remove through. */
static jx_status check_step_path(const jx_checkpoint_job *j) {
  struct stat st;
  if (lstat(j->final, &st) != 0) return JX_OK;
  if (S_ISLNK(st.st_mode))
    return jx_report_error(JX_ERR_IO,
                           "%s: '%s' is a symbolic link; a step directory must be a real "
                           "directory (jx does not save, replace or remove through links)",
                           OP, j->final);
  if (!S_ISDIR(st.st_mode))
    return jx_report_error(JX_ERR_IO, "%s: '%s' exists and is not a directory", OP, j->final);
  return JX_OK;
}

static void save_begin(jx_checkpoint_job *j) {
  char path[CKPT_FILE_CAP];
  snprintf(path, sizeof path, "%s/" SAVE_ID, j->tmp);
  if (mkdir(j->dir, 0755) != 0 && errno != EEXIST)
    fail(j, jx_report_error(JX_ERR_IO, "%s: cannot create '%s': %s", OP, j->dir, strerror(errno)));
  if (j->me == 0 && !j->status) {
    ckpt_clean_leftovers(j->dir); /* crashed saves' */
    fail(j, check_step_path(j));
  }
  if (j->me == 0 && !j->status) {
    if (mkdir(j->tmp, 0755) != 0 || (j->tmp_lock = ckpt_lock_dir(j->tmp)) < 0)
      fail(j,
           jx_report_error(JX_ERR_IO, "%s: cannot create '%s': %s", OP, j->tmp, strerror(errno)));
    snprintf(j->save_id, sizeof j->save_id, "%d.%lld.%" PRId64, (int)getpid(),
             (long long)time(NULL), j->step);
    if (!j->status && j->nproc > 1) fail(j, ckpt_write_text(path, j->save_id));
  }
  barrier(j, "begin");
  if (j->me != 0 && !j->status) {
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(j->save_id, 1, sizeof j->save_id - 1, f) : 0;
    if (f) fclose(f);
    j->save_id[got] = 0;
    if (!got)
      fail(j, jx_report_error(JX_ERR_IO,
                              "%s: process %d cannot see '%s', which process 0 makes (if "
                              "process 0 reports no error, dir is not on a file system all "
                              "processes share, as a checkpoint of many processes needs)",
                              OP, j->me, j->tmp));
  }
  if (!j->status) fail(j, plan(j));
}

static void save_write(jx_checkpoint_job *j) {
  if (j->status) return;
  char file[64], path[CKPT_FILE_CAP];
  int n = j->nblocks;
  const char **names = malloc(sizeof *names * (size_t)(n + 1));
  jx_array **arrays = malloc(sizeof *arrays * (size_t)(n + 1));
  uint64_t *sums = calloc((size_t)n + 1, sizeof *sums);
  if (!names || !arrays || !sums)
    fail(j, jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", OP));
  jx_scope_begin();
  for (int i = 0; i < n && !j->status; i++) {
    jx_array *a = jx_tree_at(j->tree, j->blocks[i].array);
    names[i] = j->blocks[i].tensor;
    arrays[i] = j->blocks[i].position < 0 ? a : jx_array_shard(a, j->blocks[i].position);
    if (jx_is_poisoned(arrays[i])) fail(j, jx_last_status());
  }
  ckpt_data_file(file, sizeof file, j->me);
  snprintf(path, sizeof path, "%s/%s", j->tmp, file);
  if (!j->status && n > 0) fail(j, jx_safetensors_write(path, n, names, arrays, sums));
  jx_scope_end();
  cJSON *index = cJSON_CreateObject();
  cJSON_AddNumberToObject(index, "process", j->me);
  cJSON *list = cJSON_AddArrayToObject(index, "blocks");
  for (int i = 0; i < n && !j->status; i++) {
    cJSON *b = ckpt_block_json(file, j->blocks[i].tensor, &j->blocks[i].box, sums[i]);
    cJSON_AddStringToObject(b, "array", jx_tree_name(j->tree, j->blocks[i].array));
    cJSON_AddItemToArray(list, b);
  }
  char *text = j->status ? NULL : cJSON_Print(index);
  cJSON_Delete(index);
  ckpt_index_file(file, sizeof file, j->me);
  snprintf(path, sizeof path, "%s/%s", j->tmp, file);
  if (!j->status)
    fail(j, text ? ckpt_write_text(path, text)
                 : jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", OP));
  free(text);
  free(names);
  free(arrays);
  free(sums);
}

static cJSON *sharding_json(jx_sharding *sh) {
  if (!sh) return cJSON_CreateNull();
  cJSON *js = cJSON_CreateObject();
  cJSON_AddStringToObject(js, "spec", jx_sharding_spec(sh));
  cJSON *mesh = cJSON_AddObjectToObject(js, "mesh");
  jx_mesh *m = jx_sharding_mesh(sh);
  for (int k = 0; k < jx_mesh_ndim(m); k++)
    cJSON_AddNumberToObject(mesh, jx_mesh_axis_name(m, k),
                            (double)jx_mesh_axis_size(m, jx_mesh_axis_name(m, k)));
  return js;
}

/* Process 0: the manifest, from the tree and every process's block list. */
static jx_status write_manifest(jx_checkpoint_job *j) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "format", CKPT_FORMAT);
  cJSON_AddNumberToObject(m, "version", CKPT_VERSION);
  cJSON_AddNumberToObject(m, "step", (double)j->step);
  cJSON_AddNumberToObject(m, "processes", j->nproc);
  cJSON_AddStringToObject(m, SAVE_ID, j->save_id);
  cJSON *arrays = cJSON_AddArrayToObject(m, "arrays");
  int n = jx_tree_size(j->tree);
  cJSON **blocks = calloc((size_t)n + 1, sizeof *blocks);
  for (int i = 0; i < n && blocks; i++) {
    jx_array *a = jx_tree_at(j->tree, i);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddItemToArray(arrays, e);
    cJSON_AddStringToObject(e, "name", jx_tree_name(j->tree, i));
    cJSON_AddStringToObject(e, "dtype", jx_dtype_name(jx_dtype_of(a)));
    jx_shape s = jx_shape_of(a);
    cJSON *shape = cJSON_AddArrayToObject(e, "shape");
    for (int d = 0; d < s.rank; d++)
      cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)s.dims[d]));
    cJSON_AddItemToObject(e, "sharding", sharding_json(jx_sharding_of(a)));
    blocks[i] = cJSON_AddArrayToObject(e, "blocks");
  }
  jx_status st = blocks ? JX_OK : jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", OP);
  char file[64], path[CKPT_FILE_CAP];
  for (int q = 0; q < j->nproc && !st; q++) {
    ckpt_index_file(file, sizeof file, q);
    snprintf(path, sizeof path, "%s/%s", j->tmp, file);
    cJSON *index = ckpt_read_json(path, NULL);
    if (!index) {
      st = jx_report_error(JX_ERR_IO,
                           "%s: process %d did not write its part of step %" PRId64
                           " ('%s' is missing or unreadable; its own error says why)",
                           OP, q, j->step, path);
      break;
    }
    cJSON *b;
    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(index, "blocks")) {
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(b, "array");
      for (int i = 0; i < n && cJSON_IsString(name); i++)
        if (strcmp(jx_tree_name(j->tree, i), name->valuestring) == 0) {
          cJSON *copy = cJSON_Duplicate(b, 1);
          cJSON_DeleteItemFromObjectCaseSensitive(copy, "array");
          cJSON_AddItemToArray(blocks[i], copy);
          break;
        }
    }
    cJSON_Delete(index);
    unlink(path);
  }
  char *text = st ? NULL : cJSON_Print(m);
  cJSON_Delete(m);
  free(blocks);
  if (!st && !text) st = jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", OP);
  snprintf(path, sizeof path, "%s/" CKPT_MANIFEST, j->tmp);
  if (!st) st = ckpt_write_text(path, text);
  free(text);
  return st;
}

/* Process 0: the temporary directory becomes the step. A step saved again
 * replaces the old one: it is moved aside first (rename cannot replace a
 * non-empty directory), locked, so that nothing restores it meanwhile, and
 * removed once the new one is in place. A crash between the two renames
 * leaves the old copy, which loading renames back. */
static jx_status publish(jx_checkpoint_job *j) {
  if (!ckpt_fsync_fd(j->tmp_lock, "fsync:step"))
    return jx_report_error(JX_ERR_IO, "%s: cannot flush '%s': %s", OP, j->tmp, strerror(errno));
  jx_status st = check_step_path(j); /* again: it may have changed since begin */
  if (st) return st;
  int old_lock = ckpt_lock_dir(j->final), had_old = 0;
  if (old_lock >= 0) {
    had_old = !ckpt_fault("rename:aside") && rename(j->final, j->old) == 0;
    if (!had_old)
      st = jx_report_error(JX_ERR_IO, "%s: cannot move '%s' aside to '%s': %s", OP, j->final,
                           j->old, strerror(errno));
  }
  if (!st && (ckpt_fault("rename:into-place") || rename(j->tmp, j->final) != 0)) {
    st = jx_report_error(JX_ERR_IO, "%s: cannot rename '%s' to '%s': %s", OP, j->tmp, j->final,
                         strerror(errno));
    if (had_old) rename(j->old, j->final);
  }
  if (!st && !ckpt_fsync_path(j->dir, "fsync:dir"))
    st = jx_report_error(JX_ERR_IO,
                         "%s: step %" PRId64 " is in place but flushing '%s' failed: %s (it may "
                         "not survive a power loss)",
                         OP, j->step, j->dir, strerror(errno));
  if (had_old && !st && !ckpt_fault("remove:old")) ckpt_remove_dir(j->old);
  if (old_lock >= 0) close(old_lock);
  return st;
}

static void save_finish(jx_checkpoint_job *j) {
  barrier(j, "written");
  if (j->me == 0) {
    if (!j->status) fail(j, write_manifest(j));
    if (!j->status) fail(j, publish(j));
    if (j->status) ckpt_remove_dir(j->tmp);
  }
  barrier(j, "renamed");
  if (j->me != 0 && !j->status) { /* did process 0 put this save in place? */
    char path[CKPT_FILE_CAP];
    snprintf(path, sizeof path, "%s/" CKPT_MANIFEST, j->final);
    cJSON *m = ckpt_read_json(path, NULL);
    const cJSON *id = m ? cJSON_GetObjectItemCaseSensitive(m, SAVE_ID) : NULL;
    if (!cJSON_IsString(id) || strcmp(id->valuestring, j->save_id) != 0)
      fail(j, jx_report_error(JX_ERR_IO,
                              "%s: process 0 did not complete step %" PRId64
                              " in '%s' (its error says why)",
                              OP, j->step, j->dir));
    cJSON_Delete(m);
  }
}

jx_status ckpt_save_with(const char *dir, int64_t step, const jx_tree *t,
                         const ckpt_save_options *opts) {
  jx_status st = check_args(OP, dir, step, t);
  if (st) return st;
  jx_checkpoint_job *j = job_new(OP, dir, step, t, opts);
  if (!j) return jx_last_status();
  save_begin(j);
  save_write(j);
  save_finish(j);
  st = j->status;
  job_free(j);
  return st;
}

jx_status jx_checkpoint_save(const char *dir, int64_t step, const jx_tree *t) {
  return ckpt_save_with(dir, step, t, NULL);
}

/* ---- saving in the background ----
 * One process: the whole save runs on the writer thread. Many processes:
 * the barriers stay on the calling thread, in the order every process
 * calls them (begin at save_async, finish at wait), so they never run
 * beside the caller's own collectives; only the file writes are in the
 * background. */
static void *save_main(void *arg) {
  jx_checkpoint_job *j = arg;
  jx_status before = j->status; /* a failure of begin on the calling thread */
  if (j->nproc == 1) save_begin(j);
  save_write(j);
  if (j->nproc == 1) save_finish(j);
  if (j->status && !before) j->message = strdup(jx_last_error());
  jx_clear_error();
  jx_thread_end(); /* this thread's scopes, not the process's dispatch thread */
  return NULL;
}

jx_checkpoint_job *jx_checkpoint_save_async(const char *dir, int64_t step, const jx_tree *t) {
  const char *op = "jx_checkpoint_save_async";
  if (check_args(op, dir, step, t)) return NULL;
  jx_checkpoint_job *j = job_new(op, dir, step, t, NULL);
  if (!j) return NULL;
  if (j->nproc > 1) save_begin(j); /* its errors are recorded here; wait returns its status */
  if (pthread_create(&j->thread, NULL, save_main, j) != 0) {
    job_free(j);
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: cannot start the writer", op);
    return NULL;
  }
  j->started = 1;
  return j;
}

jx_status jx_checkpoint_wait(jx_checkpoint_job *j) {
  if (!j) return jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_checkpoint_wait: the job is NULL");
  if (j->started) pthread_join(j->thread, NULL);
  if (j->message) jx_report_error(j->status, "%s", j->message);
  if (j->nproc > 1) save_finish(j);
  jx_status st = j->status;
  job_free(j);
  return st;
}
