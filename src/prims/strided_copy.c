#include "strided_copy.h"

#include <string.h>

#include "../array/array.h"
#include "../base/threadpool.h"

enum {
  TILE = 32,                /* transpose tiles: TILE x TILE elements */
  PARALLEL_BYTES = 1 << 20, /* smaller copies run on the calling thread */
  UNIT_BYTES = 64 << 10     /* the least work handed to one thread at a time */
};

typedef struct {
  char *out;
  const char *src;
  size_t es;
  int rank; /* after merging; the last dimension is the run */
  int64_t dims[JX_MAX_RANK], st[JX_MAX_RANK];
  int tiled; /* the last two dimensions are a 2-D transpose walked in tiles */
} copy_job;

/* One run of n elements from src with stride s (elements) to contiguous out. */
static void copy_run(char *out, const char *src, int64_t n, int64_t s, size_t es) {
  if (s == 1) {
    memcpy(out, src, (size_t)n * es);
    return;
  }
#define RUN(T)                                                                                     \
  do {                                                                                             \
    T *o = (T *)(void *)out;                                                                       \
    const T *x = (const T *)(const void *)src;                                                     \
    for (int64_t j = 0; j < n; j++) o[j] = x[j * s];                                               \
  } while (0)
  switch (es) {
  case 1: RUN(uint8_t); break;
  case 2: RUN(uint16_t); break;
  case 4: RUN(uint32_t); break;
  case 8: RUN(uint64_t); break;
  default:
    for (int64_t j = 0; j < n; j++) memcpy(out + (size_t)j * es, src + j * s * (int64_t)es, es);
  }
#undef RUN
}

/* The source offset (elements) of the first element of row `row` of the
 * leading `lead` dimensions. */
static int64_t row_offset(const copy_job *j, int lead, int64_t row) {
  int64_t off = 0;
  for (int d = lead - 1; d >= 0; d--) {
    off += (row % j->dims[d]) * j->st[d];
    row /= j->dims[d];
  }
  return off;
}

static void copy_rows(void *ctx, int64_t begin, int64_t end) {
  const copy_job *j = ctx;
  int last = j->rank - 1;
  int64_t n = j->dims[last], s = j->st[last];
  int64_t idx[JX_MAX_RANK] = {0}, off = row_offset(j, last, begin);
  for (int64_t q = begin, d = last - 1; d >= 0; d--) { /* the odometer starts at `begin` */
    idx[d] = q % j->dims[d];
    q /= j->dims[d];
  }
  for (int64_t row = begin; row < end; row++) {
    copy_run(j->out + (size_t)(row * n) * j->es, j->src + off * (int64_t)j->es, n, s, j->es);
    for (int d = last - 1; d >= 0; d--) { /* the next row */
      off += j->st[d];
      if (++idx[d] < j->dims[d]) break;
      off -= idx[d] * j->st[d];
      idx[d] = 0;
    }
  }
}

/* Units are (outer index, band of TILE rows of the 2-D block). */
static void copy_tiles(void *ctx, int64_t begin, int64_t end) {
  const copy_job *j = ctx;
  int r = j->rank;
  int64_t a = j->dims[r - 2], b = j->dims[r - 1], sa = j->st[r - 2], sb = j->st[r - 1];
  int64_t bands = (a + TILE - 1) / TILE;
  size_t es = j->es;
  for (int64_t u = begin; u < end; u++) {
    int64_t outer = u / bands, i0 = (u % bands) * TILE;
    int64_t i1 = i0 + TILE < a ? i0 + TILE : a;
    const char *src = j->src + row_offset(j, r - 2, outer) * (int64_t)es;
    char *out = j->out + (size_t)(outer * a * b) * es;
    for (int64_t j0 = 0; j0 < b; j0 += TILE) {
      int64_t j1 = j0 + TILE < b ? j0 + TILE : b;
      for (int64_t i = i0; i < i1; i++)
        copy_run(out + (size_t)(i * b + j0) * es, src + (i * sa + j0 * sb) * (int64_t)es, j1 - j0,
                 sb, es);
    }
  }
}

void jx_strided_copy(void *out, jx_shape shape, const void *src, const int64_t *strides,
                     size_t elem_size) {
  int64_t total = jx_shape_numel(shape);
  if (total == 0) return;
  copy_job j = {.out = out, .src = src, .es = elem_size};
  /* drop size-1 dimensions, merge neighbours contiguous in the source too */
  for (int d = 0; d < shape.rank; d++) {
    if (shape.dims[d] == 1) continue;
    if (j.rank > 0 && j.st[j.rank - 1] == strides[d] * shape.dims[d]) {
      j.dims[j.rank - 1] *= shape.dims[d];
      j.st[j.rank - 1] = strides[d];
      continue;
    }
    j.dims[j.rank] = shape.dims[d];
    j.st[j.rank] = strides[d];
    j.rank++;
  }
  if (j.rank == 0) { /* one element */
    memcpy(out, src, elem_size);
    return;
  }
  int r = j.rank;
  /* a transpose: the source runs along the second-to-last dimension */
  j.tiled = r >= 2 && j.st[r - 1] != 1 && j.st[r - 1] != 0 && j.st[r - 2] == 1 &&
            j.dims[r - 1] >= TILE / 4 && j.dims[r - 2] >= TILE / 4;
  int64_t units, unit_elems;
  if (j.tiled) {
    units = total / (j.dims[r - 2] * j.dims[r - 1]) * ((j.dims[r - 2] + TILE - 1) / TILE);
    unit_elems = TILE * j.dims[r - 1];
  } else {
    units = total / j.dims[r - 1];
    unit_elems = j.dims[r - 1];
  }
  size_t bytes = (size_t)total * elem_size;
  int64_t grain = 1 + (int64_t)(UNIT_BYTES / ((size_t)unit_elems * elem_size));
  jx_range_fn fn = j.tiled ? copy_tiles : copy_rows;
  if (bytes < PARALLEL_BYTES)
    fn(&j, 0, units);
  else
    jx_parallel_for(units, grain, fn, &j);
}
