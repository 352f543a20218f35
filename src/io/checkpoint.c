/* Loading checkpoints: each array is read block by block, only the parts
 * this process needs (the box its devices hold under like's sharding), and
 * laid out as like says; every header, size and checksum is checked, and
 * errors name the file and the array. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint_internal.h"
#include "safetensors.h"

/* The step of a step directory's name, exactly as ckpt_step_dir spells it
 * (jx_checkpoint_load finds no other); -1 for any other name. */
static int64_t step_of_name(const char *name) {
  if (strncmp(name, "step_", 5) != 0) return -1;
  const char *p = name + 5, *q = p;
  while (*q >= '0' && *q <= '9') q++;
  if (*q || q - p < 8 || q - p > 18 || (q - p > 8 && *p == '0')) return -1;
  return strtoll(p, NULL, 10);
}

int64_t jx_checkpoint_latest(const char *dir) {
  if (!dir || strlen(dir) > CKPT_DIR_MAX) return -1;
  ckpt_restore_moved_steps(dir);
  DIR *d = opendir(dir);
  if (!d) return -1;
  int64_t best = -1;
  struct dirent *e;
  char path[CKPT_FILE_CAP + 256];
  while ((e = readdir(d))) {
    int64_t s = step_of_name(e->d_name);
    struct stat st;
    if (s <= best) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue; /* a link is no step */
    snprintf(path, sizeof path, "%s/%s/" CKPT_MANIFEST, dir, e->d_name);
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) best = s;
  }
  closedir(d);
  return best;
}

/* The step's data files, opened on first use. */
typedef struct {
  const char *sdir;
  int n;
  struct {
    char name[64];
    jx_safetensors *f;
  } open[64];
} file_cache;

static jx_safetensors *file_get(file_cache *c, const char *name, const char *array) {
  for (int i = 0; i < c->n; i++)
    if (strcmp(c->open[i].name, name) == 0) return c->open[i].f;
  char path[CKPT_FILE_CAP + 64], op[512];
  snprintf(path, sizeof path, "%s/%s", c->sdir, name);
  snprintf(op, sizeof op, "jx_checkpoint_load: array '%s'", array);
  if (access(path, F_OK) != 0) {
    jx_report_error(JX_ERR_IO, "%s: its block file '%s' is missing: %s", op, path, strerror(errno));
    return NULL;
  }
  jx_safetensors *f = jx_safetensors_open(path, op);
  if (!f) return NULL;
  if (c->n == (int)(sizeof c->open / sizeof c->open[0])) { /* full: drop the oldest */
    jx_safetensors_close(c->open[0].f);
    memmove(&c->open[0], &c->open[1], sizeof c->open[0] * (size_t)(c->n - 1));
    c->n--;
  }
  snprintf(c->open[c->n].name, sizeof c->open[c->n].name, "%s", name);
  c->open[c->n++].f = f;
  return f;
}

static void file_cache_close(file_cache *c) {
  for (int i = 0; i < c->n; i++) jx_safetensors_close(c->open[i].f);
  c->n = 0;
}

/* Fills buf (the box `want` of array e, row-major) from the blocks that
 * overlap it. A block read whole is checked against its checksum; a part
 * of a block cannot be (the checksum is over the whole block). */
static jx_status read_box(file_cache *c, const ckpt_entry *e, const ckpt_box *want, void *buf) {
  size_t es = jx_dtype_size(e->dtype);
  for (int i = 0; i < e->nblocks; i++) {
    const ckpt_block *b = &e->blocks[i];
    ckpt_box part;
    if (!ckpt_box_intersect(&b->box, want, &part)) continue;
    jx_safetensors *f = file_get(c, b->file, e->name);
    if (!f) return jx_last_status();
    int whole = ckpt_box_equal(&part, &b->box), direct = ckpt_box_equal(&part, want);
    void *tmp = direct ? buf : malloc((size_t)ckpt_box_numel(&part) * es + 1);
    if (!tmp) return jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_checkpoint_load: out of memory");
    int64_t at[JX_MAX_RANK];
    jx_shape bshape = {b->box.rank, {0}};
    for (int d = 0; d < part.rank; d++) {
      at[d] = part.start[d] - b->box.start[d];
      bshape.dims[d] = b->box.size[d];
    }
    uint64_t sum = 0;
    char op[512];
    snprintf(op, sizeof op, "jx_checkpoint_load: array '%s'", e->name);
    jx_status st = jx_safetensors_read_box(f, b->tensor, e->dtype, bshape, at, part.size, tmp,
                                           whole ? &sum : NULL, op);
    if (!st && whole && sum != b->checksum) {
      if (strcmp(b->tensor, e->name) == 0)
        st = jx_report_error(JX_ERR_CORRUPT,
                             "jx_checkpoint_load: '%s/%s' is corrupt: array '%s' does not match "
                             "its checksum",
                             c->sdir, b->file, e->name);
      else
        st = jx_report_error(JX_ERR_CORRUPT,
                             "jx_checkpoint_load: '%s/%s' is corrupt: array '%s' (block '%s') "
                             "does not match its checksum",
                             c->sdir, b->file, e->name, b->tensor);
    }
    if (!st && !direct) ckpt_copy_box(tmp, &part, buf, want, &part, es);
    if (!direct) free(tmp);
    if (st) return st;
  }
  return JX_OK;
}

static jx_status shape_mismatch(const ckpt_entry *e, jx_array *like_a, const char *sdir) {
  char got[160] = "", exp[160] = "";
  jx_shape w = jx_shape_of(like_a);
  size_t gl = (size_t)snprintf(got, sizeof got, "%s[", jx_dtype_name(e->dtype));
  size_t el = (size_t)snprintf(exp, sizeof exp, "%s[", jx_dtype_name(jx_dtype_of(like_a)));
  for (int d = 0; d < e->shape.rank && gl < sizeof got; d++)
    gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%lld", d ? "," : "",
                           (long long)e->shape.dims[d]);
  for (int d = 0; d < w.rank && el < sizeof exp; d++)
    el += (size_t)snprintf(exp + el, sizeof exp - el, "%s%lld", d ? "," : "", (long long)w.dims[d]);
  return jx_report_error(JX_ERR_SHAPE,
                         "jx_checkpoint_load: array '%s' in '%s' is %s] but the tree to load "
                         "into has %s]",
                         e->name, sdir, got, exp);
}

static int block_file_cmp(const void *a, const void *b) {
  return strcmp((*(const ckpt_block *const *)a)->file, (*(const ckpt_block *const *)b)->file);
}

/* Before memory is set aside for the box `want` of e: the blocks it needs
 * claim no more bytes of each file than the file holds (a manifest is
 * input; without this one could make the loader allocate any amount). */
static jx_status check_claims(file_cache *c, const ckpt_entry *e, const ckpt_box *want) {
  const ckpt_block **used = malloc(sizeof *used * ((size_t)e->nblocks + 1));
  if (!used) return jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_checkpoint_load: out of memory");
  int n = 0;
  ckpt_box part;
  for (int i = 0; i < e->nblocks; i++)
    if (ckpt_box_intersect(&e->blocks[i].box, want, &part)) used[n++] = &e->blocks[i];
  qsort(used, (size_t)n, sizeof *used, block_file_cmp);
  jx_status st = JX_OK;
  uint64_t es = jx_dtype_size(e->dtype);
  for (int i = 0; i < n && !st;) {
    uint64_t claimed = 0, size;
    jx_safetensors *f = file_get(c, used[i]->file, e->name);
    if (!f) {
      st = jx_last_status();
      break;
    }
    size = jx_safetensors_data_size(f);
    int first = i;
    for (; i < n && strcmp(used[i]->file, used[first]->file) == 0; i++)
      if (claimed <= size) claimed += (uint64_t)ckpt_box_numel(&used[i]->box) * es;
    if (claimed > size)
      st = jx_report_error(JX_ERR_CORRUPT,
                           "jx_checkpoint_load: '%s/%s' is corrupt or truncated: the manifest "
                           "says it holds %s%llu bytes of array '%s' but it holds %llu",
                           c->sdir, used[first]->file, i - first > 1 ? "at least " : "",
                           (unsigned long long)claimed, e->name, (unsigned long long)size);
  }
  free(used);
  return st;
}

/* Array `name`, laid out as like_a (NULL: whole, on one device). */
static jx_array *load_one(file_cache *c, const cJSON *m, const char *mpath, const char *name,
                          jx_array *like_a) {
  const char *op = "jx_checkpoint_load";
  ckpt_entry e;
  if (ckpt_entry_read(m, name, mpath, op, &e)) return NULL;
  jx_array *r = NULL;
  jx_sharding *s = like_a ? jx_sharding_of(like_a) : NULL;
  if (like_a) {
    jx_shape w = jx_shape_of(like_a);
    int same = e.dtype == jx_dtype_of(like_a) && e.shape.rank == w.rank;
    for (int d = 0; same && d < w.rank; d++) same = e.shape.dims[d] == w.dims[d];
    if (!same) {
      shape_mismatch(&e, like_a, c->sdir);
      ckpt_entry_free(&e);
      return NULL;
    }
  }
  /* the part this process needs: the box its devices hold, or all of it */
  ckpt_box box = ckpt_box_whole(e.shape);
  if (s) {
    ckpt_layout l;
    if (ckpt_layout_of(s, e.shape, &l, op)) {
      ckpt_entry_free(&e);
      return NULL;
    }
    if (!ckpt_layout_local_box(&l, jx_process_index(), &box)) box = ckpt_box_whole(e.shape);
    ckpt_layout_free(&l);
  }
  size_t bytes = (size_t)ckpt_box_numel(&box) * jx_dtype_size(e.dtype);
  void *buf = NULL;
  jx_status st = check_claims(c, &e, &box); /* its error names the file */
  if (!st && !(buf = malloc(bytes ? bytes : 1)))
    st = jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory for array '%s'", op, name);
  if (!st && !read_box(c, &e, &box, buf)) {
    jx_shape bs = {box.rank, {0}};
    for (int d = 0; d < box.rank; d++) bs.dims[d] = box.size[d];
    r = jx_array_from(e.dtype, bs, buf);
    /* restore onto the mesh the caller uses now */
    if (s) r = jx_array_from_process_local(s, e.shape, r);
    if (jx_is_poisoned(r)) r = NULL;
  }
  free(buf);
  ckpt_entry_free(&e);
  return r;
}

jx_tree *jx_checkpoint_load(const char *dir, int64_t step, const jx_tree *like) {
  const char *op = "jx_checkpoint_load";
  if (!dir || step < 0 || strlen(dir) > CKPT_DIR_MAX) {
    if (!dir)
      jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: dir is NULL", op);
    else if (step < 0)
      jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: step %" PRId64 " is negative", op, step);
    else
      jx_report_error(JX_ERR_INVALID_ARGUMENT,
                      "%s: dir is %zu characters long; at most %d are supported", op, strlen(dir),
                      CKPT_DIR_MAX);
    return NULL;
  }
  ckpt_restore_moved_steps(dir);
  char sdir[CKPT_PATH_CAP], mpath[CKPT_FILE_CAP];
  ckpt_step_dir(sdir, dir, step);
  snprintf(mpath, sizeof mpath, "%s/" CKPT_MANIFEST, sdir);
  struct stat st;
  if (lstat(sdir, &st) == 0 && S_ISLNK(st.st_mode)) {
    jx_report_error(JX_ERR_IO,
                    "%s: '%s' is a symbolic link; a step directory must be a real directory "
                    "(jx does not read a checkpoint through links)",
                    op, sdir);
    return NULL;
  }
  if (lstat(mpath, &st) != 0) {
    jx_report_error(JX_ERR_IO, "%s: no checkpoint at '%s': %s", op, sdir, strerror(errno));
    return NULL;
  }
  cJSON *m = ckpt_read_json(mpath, op);
  if (!m) return NULL;
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m, "format");
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CKPT_FORMAT) != 0 ||
      !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(m, "arrays"))) {
    cJSON_Delete(m);
    jx_report_error(JX_ERR_CORRUPT, "%s: '%s' is corrupt: not a jx checkpoint manifest", op, mpath);
    return NULL;
  }
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(m, "step");
  if (!cJSON_IsNumber(ms) || !(ms->valuedouble >= 0 && ms->valuedouble <= 9.0e18) ||
      (int64_t)ms->valuedouble != step) {
    jx_report_error(JX_ERR_CORRUPT, "%s: '%s' is for another step", op, mpath);
    cJSON_Delete(m);
    return NULL;
  }
  file_cache c = {.sdir = sdir};
  jx_tree *t = jx_tree_create();
  jx_scope_begin();
  if (like) {
    for (int i = 0; i < jx_tree_size(like) && t; i++) {
      jx_array *a = load_one(&c, m, mpath, jx_tree_name(like, i), jx_tree_at(like, i));
      if (a)
        jx_tree_set(t, jx_tree_name(like, i), a);
      else {
        jx_tree_release(t);
        t = NULL;
      }
    }
  } else {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m, "arrays")) {
      const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
      jx_array *a = cJSON_IsString(n) ? load_one(&c, m, mpath, n->valuestring, NULL) : NULL;
      if (!a) {
        if (!jx_last_status())
          jx_report_error(JX_ERR_CORRUPT, "%s: '%s' is corrupt: an entry has no name", op, mpath);
        jx_tree_release(t);
        t = NULL;
        break;
      }
      jx_tree_set(t, n->valuestring, a);
    }
  }
  jx_scope_end();
  file_cache_close(&c);
  cJSON_Delete(m);
  return t;
}
