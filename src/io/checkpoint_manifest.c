/* The manifest's array entries: their blocks as written, and reading them
 * back with every field checked (a manifest is input: it must never make
 * the loader read outside an array or outside the step directory). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_internal.h"
#include "safetensors.h"

static cJSON *dims_json(const int64_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int d = 0; d < n; d++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[d]));
  return a;
}

cJSON *ckpt_block_json(const char *file, const char *tensor, const ckpt_box *b, uint64_t sum) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "file", file);
  cJSON_AddStringToObject(e, "tensor", tensor);
  cJSON_AddItemToObject(e, "start", dims_json(b->start, b->rank));
  cJSON_AddItemToObject(e, "shape", dims_json(b->size, b->rank));
  char hex[17];
  snprintf(hex, sizeof hex, "%016" PRIx64, sum);
  cJSON_AddStringToObject(e, "checksum", hex);
  return e;
}

static int read_dims(const cJSON *a, int64_t *out, int *rank) {
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > JX_MAX_RANK) return 0;
  *rank = cJSON_GetArraySize(a);
  for (int d = 0; d < *rank; d++) {
    const cJSON *v = cJSON_GetArrayItem(a, d);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 9.0e15) ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
      return 0;
    out[d] = (int64_t)v->valuedouble;
  }
  return 1;
}

static int read_checksum(const cJSON *c, uint64_t *out) {
  char *end = NULL;
  if (!cJSON_IsString(c) || strlen(c->valuestring) != 16) return 0;
  *out = strtoull(c->valuestring, &end, 16);
  return end && *end == 0;
}

/* A file name of the step directory, not a path (no '/', no "..") */
static int plain_file_name(const char *s) {
  return s && *s && strlen(s) < sizeof(((ckpt_block *)0)->file) && !strchr(s, '/') &&
         strcmp(s, ".") && strcmp(s, "..");
}

void ckpt_entry_free(ckpt_entry *e) {
  for (int i = 0; i < e->nblocks; i++) free(e->blocks[i].tensor);
  free(e->blocks);
  memset(e, 0, sizeof *e);
}

static jx_status corrupt(ckpt_entry *e, const char *op, const char *path, const char *name,
                         const char *why) {
  ckpt_entry_free(e);
  return jx_report_error(JX_ERR_CORRUPT, "%s: '%s' is corrupt: array '%s' %s", op, path, name, why);
}

typedef struct {
  int64_t lo, hi;
} range;

static int range_cmp(const void *a, const void *b) {
  const range *x = a, *y = b;
  if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
  return (x->hi > y->hi) - (x->hi < y->hi);
}

static int cell_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The distinct ranges of the non-empty blocks along dim d, sorted, in
 * out[0..*k); NULL when they tile [0, dim) (no gap, no overlap), else why not. */
static const char *dim_ranges(const ckpt_entry *e, int d, range *out, int64_t *k) {
  int64_t m = 0;
  for (int i = 0; i < e->nblocks; i++) {
    const ckpt_box *b = &e->blocks[i].box;
    if (ckpt_box_numel(b) > 0) out[m++] = (range){b->start[d], b->start[d] + b->size[d]};
  }
  qsort(out, (size_t)m, sizeof *out, range_cmp);
  *k = 0;
  for (int64_t i = 0; i < m; i++)
    if (*k == 0 || range_cmp(&out[*k - 1], &out[i]) != 0) out[(*k)++] = out[i];
  for (int64_t i = 0; i < *k; i++) {
    int64_t expect = i ? out[i - 1].hi : 0;
    if (out[i].lo < expect) return "has overlapping blocks";
    if (out[i].lo > expect) return "is not covered by its blocks: parts of it were not saved";
  }
  if (*k == 0 || out[*k - 1].hi != e->shape.dims[d])
    return "is not covered by its blocks: parts of it were not saved";
  return NULL;
}

/* Exactly covered, in O(n log n) for n blocks: every block inside the
 * array, and the non-empty blocks a grid (as a sharding's blocks are): along
 * each dim their ranges tile the dim, and each cell of the grid those ranges
 * make is exactly one block. Empty blocks hold nothing to read. */
static const char *coverage_problem(const ckpt_entry *e) {
  if (e->nblocks == 0) return "has no blocks";
  ckpt_box whole = ckpt_box_whole(e->shape);
  int rank = e->shape.rank;
  int64_t m = 0;
  for (int i = 0; i < e->nblocks; i++) {
    const ckpt_box *b = &e->blocks[i].box;
    if (b->rank != rank) return "has a block of another rank than the array";
    for (int d = 0; d < rank; d++)
      if (b->start[d] > whole.size[d] || b->size[d] > whole.size[d] - b->start[d])
        return "has a block outside the array";
    m += ckpt_box_numel(b) > 0;
  }
  if (ckpt_box_numel(&whole) == 0) return NULL;
  if (m == 0) return "is not covered by its blocks: parts of it were not saved";
  range *r[JX_MAX_RANK] = {0};
  int64_t k[JX_MAX_RANK], *cell = malloc(sizeof *cell * (size_t)m);
  const char *why = cell ? NULL : "(out of memory)";
  for (int d = 0; d < rank && !why; d++) {
    r[d] = malloc(sizeof *r[d] * (size_t)m);
    why = r[d] ? dim_ranges(e, d, r[d], &k[d]) : "(out of memory)";
  }
  /* as many cells as non-empty blocks, else some overlap or some cell has none */
  int64_t cells = 1;
  for (int d = 0; d < rank && !why && cells <= m; d++) cells *= k[d];
  if (!why && cells != m)
    why = cells < m ? "has overlapping blocks"
                    : "is not covered by its blocks: parts of it were not saved";
  /* the cell of each block, from its range's index along each dim (always
   * found: the ranges were made from the blocks); then each cell once */
  for (int i = 0, c = 0; i < e->nblocks && !why; i++) {
    const ckpt_box *b = &e->blocks[i].box;
    if (ckpt_box_numel(b) == 0) continue;
    int64_t at = 0;
    for (int d = 0; d < rank; d++) {
      range key = {b->start[d], b->start[d] + b->size[d]};
      const range *hit = bsearch(&key, r[d], (size_t)k[d], sizeof key, range_cmp);
      at = at * k[d] + (hit - r[d]);
    }
    cell[c++] = at;
  }
  if (!why) {
    qsort(cell, (size_t)m, sizeof *cell, cell_cmp);
    for (int64_t i = 1; i < m && !why; i++)
      if (cell[i] == cell[i - 1]) why = "has overlapping blocks";
  }
  for (int d = 0; d < rank; d++) free(r[d]);
  free(cell);
  return why;
}

/* The array's bytes fit in an int64 (checked before any product is used:
 * ckpt_box_numel of its blocks relies on it). */
static int shape_fits(jx_shape s, jx_dtype dt) {
  int64_t n = (int64_t)jx_dtype_size(dt);
  for (int d = 0; d < s.rank; d++)
    if (s.dims[d] > 0 && __builtin_mul_overflow(n, s.dims[d], &n)) return 0;
  return 1;
}

jx_status ckpt_entry_read(const cJSON *m, const char *name, const char *path, const char *op,
                          ckpt_entry *out) {
  memset(out, 0, sizeof *out);
  const cJSON *e = NULL, *it;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(m, "arrays")) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "name");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) {
      e = it;
      break;
    }
  }
  if (!e)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the checkpoint '%s' has no array '%s'", op,
                           path, name);
  out->name = name;
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  int dtype = -1;
  for (int d = 0; cJSON_IsString(dt) && d < JX_NUM_DTYPES; d++)
    if (strcmp(jx_dtype_name((jx_dtype)d), dt->valuestring) == 0) dtype = d;
  if (dtype < 0) return corrupt(out, op, path, name, "has an unknown dtype");
  out->dtype = (jx_dtype)dtype;
  if (!read_dims(cJSON_GetObjectItemCaseSensitive(e, "shape"), out->shape.dims, &out->shape.rank))
    return corrupt(out, op, path, name, "has a bad shape");
  if (!shape_fits(out->shape, out->dtype))
    return corrupt(out, op, path, name, "has a shape too large to exist");
  const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(e, "blocks");
  if (!blocks) { /* version 1: one file holding the whole array under its name */
    ckpt_block *b = out->blocks = calloc(1, sizeof *b);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
    if (!b || !(b->tensor = strdup(name))) return corrupt(out, op, path, name, "(out of memory)");
    out->nblocks = 1;
    b->box = ckpt_box_whole(out->shape);
    if (!cJSON_IsString(file) || !plain_file_name(file->valuestring) ||
        !read_checksum(cJSON_GetObjectItemCaseSensitive(e, "checksum"), &b->checksum))
      return corrupt(out, op, path, name, "has a bad file or checksum");
    strcpy(b->file, file->valuestring);
    return JX_OK;
  }
  int n = cJSON_IsArray(blocks) ? cJSON_GetArraySize(blocks) : -1;
  if (n < 0) return corrupt(out, op, path, name, "has a bad block list");
  out->blocks = calloc((size_t)n + 1, sizeof *out->blocks);
  if (!out->blocks) return corrupt(out, op, path, name, "(out of memory)");
  cJSON_ArrayForEach(it, blocks) {
    ckpt_block *b = &out->blocks[out->nblocks++];
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(it, "file");
    const cJSON *tensor = cJSON_GetObjectItemCaseSensitive(it, "tensor");
    int r1 = -1, r2 = -2;
    if (!cJSON_IsString(file) || !plain_file_name(file->valuestring) || !cJSON_IsString(tensor) ||
        !read_dims(cJSON_GetObjectItemCaseSensitive(it, "start"), b->box.start, &r1) ||
        !read_dims(cJSON_GetObjectItemCaseSensitive(it, "shape"), b->box.size, &r2) || r1 != r2 ||
        !read_checksum(cJSON_GetObjectItemCaseSensitive(it, "checksum"), &b->checksum))
      return corrupt(out, op, path, name, "has a malformed block entry");
    b->box.rank = r1;
    strcpy(b->file, file->valuestring);
    if (!(b->tensor = strdup(tensor->valuestring)))
      return corrupt(out, op, path, name, "(out of memory)");
  }
  const char *why = coverage_problem(out);
  return why ? corrupt(out, op, path, name, why) : JX_OK;
}
