/* Checkpoints: a directory per step with the arrays in .safetensors and a
 * JSON manifest; written atomically (temporary directory, fsync, rename) and
 * checked on load (manifest, headers, sizes, checksums). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

#define DATA_FILE "process_0.safetensors"
#define MANIFEST  "manifest.json"
#define FORMAT    "jx-checkpoint"
enum { PATH_CAP = 4096, FILE_CAP = PATH_CAP + 64 }; /* a step dir, and a file in it */

static void step_dir(char *buf, const char *dir, int64_t step) {
  snprintf(buf, PATH_CAP, "%s/step_%08" PRId64, dir, step);
}

static int fsync_path(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int ok = fsync(fd) == 0;
  close(fd);
  return ok;
}

static jx_status write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return jx_report_error(JX_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  int ok = jx_write_all(fd, text, strlen(text)) && fsync(fd) == 0;
  ok = (close(fd) == 0) && ok;
  return ok ? JX_OK : jx_report_error(JX_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
}

/* Removes a step directory's files and the directory (they hold no subdirectories). */
static void remove_dir(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    char p[FILE_CAP + 256];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(path);
}

static cJSON *manifest_of(int64_t step, const jx_tree *t, const uint64_t *checksums) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "format", FORMAT);
  cJSON_AddNumberToObject(m, "version", 1);
  cJSON_AddNumberToObject(m, "step", (double)step);
  cJSON *arrays = cJSON_AddArrayToObject(m, "arrays");
  for (int i = 0; i < jx_tree_size(t); i++) {
    jx_array *a = jx_tree_at(t, i);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddItemToArray(arrays, e);
    cJSON_AddStringToObject(e, "name", jx_tree_name(t, i));
    cJSON_AddStringToObject(e, "dtype", jx_dtype_name(jx_dtype_of(a)));
    cJSON *shape = cJSON_AddArrayToObject(e, "shape");
    jx_shape s = jx_shape_of(a);
    for (int d = 0; d < s.rank; d++)
      cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)s.dims[d]));
    cJSON_AddStringToObject(e, "file", DATA_FILE);
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, checksums[i]);
    cJSON_AddStringToObject(e, "checksum", hex);
    jx_sharding *sh = jx_sharding_of(a);
    if (sh) { /* recorded so a reader can see how it was laid out */
      cJSON *js = cJSON_AddObjectToObject(e, "sharding");
      cJSON_AddStringToObject(js, "spec", jx_sharding_spec(sh));
      cJSON *mesh = cJSON_AddObjectToObject(js, "mesh");
      jx_mesh *mm = jx_sharding_mesh(sh);
      for (int k = 0; k < jx_mesh_ndim(mm); k++)
        cJSON_AddNumberToObject(mesh, jx_mesh_axis_name(mm, k),
                                (double)jx_mesh_axis_size(mm, jx_mesh_axis_name(mm, k)));
    } else {
      cJSON_AddNullToObject(e, "sharding");
    }
  }
  return m;
}

/* For tests of crash safety: JX_CHECKPOINT_TEST_CRASH=1 ends the process
 * after the files are written and before the rename, as a crash would. */
static void maybe_crash(void) {
  const char *v = getenv("JX_CHECKPOINT_TEST_CRASH");
  if (v && *v == '1') _exit(77);
}

jx_status jx_checkpoint_save(const char *dir, int64_t step, const jx_tree *t) {
  const char *op = "jx_checkpoint_save";
  if (!dir || !t)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the %s is NULL", op,
                           dir ? "tree" : "directory");
  if (step < 0)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: step %" PRId64 " is negative", op, step);
  for (int i = 0; i < jx_tree_size(t); i++)
    if (jx_is_poisoned(jx_tree_at(t, i)))
      return jx_report_error(JX_ERR_POISONED, "%s: array '%s' carries an earlier error", op,
                             jx_tree_name(t, i));
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return jx_report_error(JX_ERR_IO, "%s: cannot create '%s': %s", op, dir, strerror(errno));
  static atomic_int counter;
  char tmp[PATH_CAP], final[PATH_CAP], old[PATH_CAP], path[FILE_CAP];
  int k = atomic_fetch_add(&counter, 1);
  snprintf(tmp, sizeof tmp, "%s/.step_%08" PRId64 ".tmp.%d.%d", dir, step, (int)getpid(), k);
  snprintf(old, sizeof old, "%s/.step_%08" PRId64 ".old.%d.%d", dir, step, (int)getpid(), k);
  step_dir(final, dir, step);
  if (mkdir(tmp, 0755) != 0)
    return jx_report_error(JX_ERR_IO, "%s: cannot create '%s': %s", op, tmp, strerror(errno));
  int n = jx_tree_size(t);
  const char **names = malloc(sizeof *names * (size_t)(n + 1));
  jx_array **arrays = malloc(sizeof *arrays * (size_t)(n + 1));
  uint64_t *sums = calloc((size_t)n + 1, sizeof *sums);
  jx_status st = names && arrays && sums
                     ? JX_OK
                     : jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (int i = 0; i < n && !st; i++) {
    names[i] = jx_tree_name(t, i);
    arrays[i] = jx_tree_at(t, i);
  }
  snprintf(path, sizeof path, "%s/" DATA_FILE, tmp);
  if (!st) st = jx_safetensors_write(path, n, names, arrays, sums);
  char *text = NULL;
  if (!st) {
    cJSON *m = manifest_of(step, t, sums);
    text = m ? cJSON_Print(m) : NULL;
    cJSON_Delete(m);
    if (!text) st = jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  snprintf(path, sizeof path, "%s/" MANIFEST, tmp);
  if (!st) st = write_file(path, text);
  free(text);
  free(names);
  free(arrays);
  free(sums);
  if (!st && !fsync_path(tmp))
    st = jx_report_error(JX_ERR_IO, "%s: cannot flush '%s': %s", op, tmp, strerror(errno));
  if (st) {
    remove_dir(tmp);
    return st;
  }
  maybe_crash();
  /* a step saved again replaces the old one: move it aside first (rename
   * cannot replace a non-empty directory), then delete it */
  int had_old = rename(final, old) == 0;
  if (rename(tmp, final) != 0) {
    st = jx_report_error(JX_ERR_IO, "%s: cannot rename '%s' to '%s': %s", op, tmp, final,
                         strerror(errno));
    if (had_old) rename(old, final);
    remove_dir(tmp);
    return st;
  }
  fsync_path(dir);
  if (had_old) remove_dir(old);
  return JX_OK;
}

int64_t jx_checkpoint_latest(const char *dir) {
  DIR *d = dir ? opendir(dir) : NULL;
  if (!d) return -1;
  int64_t best = -1;
  struct dirent *e;
  char path[FILE_CAP + 256];
  while ((e = readdir(d))) {
    long long s;
    char tail;
    if (sscanf(e->d_name, "step_%lld%c", &s, &tail) != 1 || s < 0) continue;
    snprintf(path, sizeof path, "%s/%s/" MANIFEST, dir, e->d_name);
    if (access(path, R_OK) == 0 && s > best) best = s;
  }
  closedir(d);
  return best;
}

static cJSON *read_manifest(const char *sdir, const char *op) {
  char path[FILE_CAP];
  snprintf(path, sizeof path, "%s/" MANIFEST, sdir);
  FILE *f = fopen(path, "rb");
  if (!f) {
    jx_report_error(JX_ERR_IO, "%s: no checkpoint at '%s': %s", op, sdir, strerror(errno));
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = len >= 0 && len < (64L << 20) ? malloc((size_t)len + 1) : NULL;
  size_t got = text ? fread(text, 1, (size_t)len, f) : 0;
  fclose(f);
  cJSON *m = text && got == (size_t)len ? cJSON_ParseWithLength(text, got) : NULL;
  free(text);
  const cJSON *fmt = m ? cJSON_GetObjectItemCaseSensitive(m, "format") : NULL;
  if (!m || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT) != 0 ||
      !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(m, "arrays"))) {
    cJSON_Delete(m);
    jx_report_error(JX_ERR_CORRUPT, "%s: '%s' is corrupt: not a jx checkpoint manifest", op, path);
    return NULL;
  }
  return m;
}

static const cJSON *manifest_entry(const cJSON *m, const char *name) {
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m, "arrays")) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) return e;
  }
  return NULL;
}

/* Reads array `name` and checks it against the manifest and like_a. */
static jx_array *load_one(jx_safetensors *f, const cJSON *m, const char *sdir, const char *name,
                          jx_array *like_a, const char *op) {
  const cJSON *e = manifest_entry(m, name);
  if (!e) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the checkpoint '%s' has no array '%s'", op, sdir,
                    name);
    return NULL;
  }
  uint64_t sum = 0;
  jx_array *a = jx_safetensors_read(f, name, &sum, op);
  if (!a) return NULL;
  const cJSON *want = cJSON_GetObjectItemCaseSensitive(e, "checksum");
  char hex[17];
  snprintf(hex, sizeof hex, "%016" PRIx64, sum);
  if (!cJSON_IsString(want) || strcmp(want->valuestring, hex) != 0) {
    jx_report_error(JX_ERR_CORRUPT,
                    "%s: '%s/" DATA_FILE "' is corrupt: array '%s' does not match its checksum", op,
                    sdir, name);
    return NULL;
  }
  if (like_a) {
    jx_shape s = jx_shape_of(a), w = jx_shape_of(like_a);
    int same = jx_dtype_of(a) == jx_dtype_of(like_a) && s.rank == w.rank;
    for (int d = 0; same && d < s.rank; d++) same = s.dims[d] == w.dims[d];
    if (!same) {
      char got[160] = "", exp[160] = "";
      size_t gl = (size_t)snprintf(got, sizeof got, "%s[", jx_dtype_name(jx_dtype_of(a)));
      size_t el = (size_t)snprintf(exp, sizeof exp, "%s[", jx_dtype_name(jx_dtype_of(like_a)));
      for (int d = 0; d < s.rank && gl < sizeof got; d++)
        gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%lld", d ? "," : "",
                               (long long)s.dims[d]);
      for (int d = 0; d < w.rank && el < sizeof exp; d++)
        el += (size_t)snprintf(exp + el, sizeof exp - el, "%s%lld", d ? "," : "",
                               (long long)w.dims[d]);
      jx_report_error(JX_ERR_SHAPE,
                      "%s: array '%s' in '%s' is %s] but the tree to load into has %s]", op, name,
                      sdir, got, exp);
      return NULL;
    }
    jx_sharding *sh = jx_sharding_of(like_a);
    if (sh) a = jx_device_put(a, sh); /* restore onto the mesh the caller uses now */
  }
  return a;
}

jx_tree *jx_checkpoint_load(const char *dir, int64_t step, const jx_tree *like) {
  const char *op = "jx_checkpoint_load";
  if (!dir) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the directory is NULL", op);
    return NULL;
  }
  char sdir[PATH_CAP], path[FILE_CAP];
  step_dir(sdir, dir, step);
  cJSON *m = read_manifest(sdir, op);
  if (!m) return NULL;
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(m, "step");
  if (!cJSON_IsNumber(ms) || (int64_t)ms->valuedouble != step) {
    jx_report_error(JX_ERR_CORRUPT, "%s: '%s/" MANIFEST "' is for another step", op, sdir);
    cJSON_Delete(m);
    return NULL;
  }
  snprintf(path, sizeof path, "%s/" DATA_FILE, sdir);
  jx_safetensors *f = jx_safetensors_open(path, op);
  jx_tree *t = f ? jx_tree_create() : NULL;
  jx_scope_begin();
  if (t && like) {
    for (int i = 0; i < jx_tree_size(like) && t; i++) {
      jx_array *a = load_one(f, m, sdir, jx_tree_name(like, i), jx_tree_at(like, i), op);
      if (a)
        jx_tree_set(t, jx_tree_name(like, i), a);
      else {
        jx_tree_release(t);
        t = NULL;
      }
    }
  } else if (t) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m, "arrays")) {
      const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
      jx_array *a = cJSON_IsString(n) ? load_one(f, m, sdir, n->valuestring, NULL, op) : NULL;
      if (!a) {
        if (!jx_last_status())
          jx_report_error(JX_ERR_CORRUPT, "%s: '%s/" MANIFEST "' is corrupt: an entry has no name",
                          op, sdir);
        jx_tree_release(t);
        t = NULL;
        break;
      }
      jx_tree_set(t, n->valuestring, a);
    }
  }
  jx_scope_end();
  jx_safetensors_close(f);
  cJSON_Delete(m);
  return t;
}

/* ---- saving in the background ---- */
struct jx_checkpoint_job {
  pthread_t thread;
  char *dir;
  int64_t step;
  jx_tree *tree; /* holds references to the arrays */
  jx_status status;
  char *message;
};

static void *save_main(void *arg) {
  jx_checkpoint_job *j = arg;
  j->status = jx_checkpoint_save(j->dir, j->step, j->tree);
  if (j->status) j->message = strdup(jx_last_error());
  jx_clear_error();
  jx_shutdown(); /* this thread's scope and caches */
  return NULL;
}

jx_checkpoint_job *jx_checkpoint_save_async(const char *dir, int64_t step, const jx_tree *t) {
  if (!dir || !t) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_checkpoint_save_async: the %s is NULL",
                    dir ? "tree" : "directory");
    return NULL;
  }
  jx_checkpoint_job *j = calloc(1, sizeof *j);
  if (!j || !(j->dir = strdup(dir))) {
    free(j);
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_checkpoint_save_async: out of memory");
    return NULL;
  }
  j->step = step;
  jx_array **flat = malloc(sizeof *flat * (size_t)(jx_tree_size(t) + 1));
  if (flat) {
    jx_tree_flatten(t, flat);
    j->tree = jx_tree_unflatten(t, flat);
  }
  free(flat);
  if (!j->tree || pthread_create(&j->thread, NULL, save_main, j) != 0) {
    jx_tree_release(j->tree);
    free(j->dir);
    free(j);
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_checkpoint_save_async: cannot start the writer");
    return NULL;
  }
  return j;
}

jx_status jx_checkpoint_wait(jx_checkpoint_job *j) {
  if (!j) return jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_checkpoint_wait: the job is NULL");
  pthread_join(j->thread, NULL);
  jx_status st = j->status;
  if (st) jx_report_error(st, "%s", j->message ? j->message : "checkpoint save failed");
  jx_tree_release(j->tree);
  free(j->message);
  free(j->dir);
  free(j);
  return st;
}
