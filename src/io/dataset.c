/* Datasets held in memory: arrays sharing a leading example axis. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dataset.h"

jx_dataset *jx_dataset_from_arrays(int n, jx_array *const *arrays) {
  if (n < 1 || n > JX_DATASET_MAX_ARRAYS || !arrays) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "jx_dataset_from_arrays: needs 1 to %d arrays, given %d", JX_DATASET_MAX_ARRAYS,
                    n);
    return NULL;
  }
  int64_t len = -1;
  for (int i = 0; i < n; i++) {
    if (!arrays[i] || jx_is_poisoned(arrays[i]) || jx_ndim(arrays[i]) < 1) {
      jx_report_error(JX_ERR_INVALID_ARGUMENT,
                      "jx_dataset_from_arrays: array %d is %s; each needs a leading example axis",
                      i,
                      !arrays[i]                  ? "NULL"
                      : jx_is_poisoned(arrays[i]) ? "poisoned"
                                                  : "a scalar");
      return NULL;
    }
    int64_t li = jx_shape_of(arrays[i]).dims[0];
    if (len >= 0 && li != len) {
      jx_report_error(JX_ERR_SHAPE,
                      "jx_dataset_from_arrays: array %d has %lld examples but array 0 has %lld", i,
                      (long long)li, (long long)len);
      return NULL;
    }
    len = li;
  }
  jx_dataset *d = calloc(1, sizeof *d);
  if (!d) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_dataset_from_arrays: out of memory");
    return NULL;
  }
  d->n = n;
  d->len = len;
  for (int i = 0; i < n; i++) d->arrays[i] = jx_keep(arrays[i]);
  return d;
}

int64_t jx_dataset_size(const jx_dataset *d) { return d ? d->len : 0; }
int jx_dataset_arrays(const jx_dataset *d) { return d ? d->n : 0; }
jx_array *jx_dataset_array(const jx_dataset *d, int i) {
  return d && i >= 0 && i < d->n ? d->arrays[i] : NULL;
}

void jx_dataset_release(jx_dataset *d) {
  if (!d) return;
  for (int i = 0; i < d->n; i++) jx_release(d->arrays[i]);
  free(d);
}

/* ---- Fashion-MNIST: IDX files, big-endian header, optionally gzipped ---- */
static gzFile open_either(const char *dir, const char *base, char *used, size_t cap) {
  snprintf(used, cap, "%s/%s.gz", dir, base);
  gzFile f = gzopen(used, "rb");
  if (!f) {
    snprintf(used, cap, "%s/%s", dir, base);
    f = gzopen(used, "rb"); /* zlib reads uncompressed files as they are */
  }
  return f;
}

static int read_be32(gzFile f, uint32_t *v) {
  unsigned char b[4];
  if (gzread(f, b, 4) != 4) return 0;
  *v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
  return 1;
}

/* Reads an IDX file of unsigned bytes with ndims dims into a new array. */
static jx_array *read_idx(const char *dir, const char *base, int ndims, const char *op) {
  char path[4096];
  gzFile f = open_either(dir, base, path, sizeof path);
  if (!f) {
    jx_report_error(JX_ERR_IO,
                    "%s: cannot open '%s/%s(.gz)': %s (Debian: apt-get install "
                    "dataset-fashion-mnist)",
                    op, dir, base, strerror(errno));
    return NULL;
  }
  uint32_t magic = 0, dims[3] = {0};
  int ok = read_be32(f, &magic) && magic == (0x800u | (uint32_t)ndims);
  for (int k = 0; k < ndims && ok; k++) ok = read_be32(f, &dims[k]) && dims[k] <= (1u << 20);
  if (!ok) {
    gzclose(f);
    jx_report_error(JX_ERR_CORRUPT, "%s: '%s' is not an IDX file of %d-d unsigned bytes", op, path,
                    ndims);
    return NULL;
  }
  jx_shape s = {ndims, {0}};
  size_t n = 1;
  for (int k = 0; k < ndims; k++) {
    s.dims[k] = dims[k];
    n *= dims[k];
  }
  unsigned char *buf = malloc(n ? n : 1);
  int got = buf ? gzread(f, buf, (unsigned)n) : -1;
  gzclose(f);
  if (got != (int)n) {
    free(buf);
    jx_report_error(JX_ERR_CORRUPT, "%s: '%s' is truncated: %zu bytes expected", op, path, n);
    return NULL;
  }
  jx_array *a = jx_array_from(JX_U8, s, buf);
  free(buf);
  return a;
}

jx_dataset *jx_dataset_fashion_mnist(const char *dir, int train) {
  const char *op = "jx_dataset_fashion_mnist";
  if (!dir) dir = "/usr/share/datasets/fashion-mnist";
  jx_scope_begin();
  jx_array *images =
      read_idx(dir, train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte", 3, op);
  jx_array *labels =
      images ? read_idx(dir, train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte", 1, op)
             : NULL;
  jx_dataset *d = NULL;
  if (images && labels) {
    jx_array *arrays[2] = {images, jx_astype(labels, JX_I32)};
    d = jx_dataset_from_arrays(2, arrays);
  }
  jx_scope_end();
  return d;
}

jx_dataset *jx_dataset_text(int npaths, const char *const *paths, int64_t context) {
  const char *op = "jx_dataset_text";
  if (npaths < 1 || !paths || context < 1) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: needs at least one file and context >= 1", op);
    return NULL;
  }
  unsigned char *text = NULL;
  size_t len = 0;
  for (int p = 0; p < npaths; p++) {
    FILE *f = fopen(paths[p], "rb");
    if (!f) {
      jx_report_error(JX_ERR_IO, "%s: cannot open '%s': %s", op, paths[p], strerror(errno));
      free(text);
      return NULL;
    }
    unsigned char chunk[1 << 16];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
      unsigned char *t = realloc(text, len + got);
      if (!t) {
        fclose(f);
        free(text);
        jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory reading '%s'", op, paths[p]);
        return NULL;
      }
      text = t;
      memcpy(text + len, chunk, got);
      len += got;
    }
    fclose(f);
  }
  int64_t n = len > 0 ? (int64_t)(len - 1) / context : 0;
  if (n < 1) {
    free(text);
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: %zu bytes of text hold no window of %lld + 1", op,
                    len, (long long)context);
    return NULL;
  }
  int32_t *x = malloc(sizeof *x * (size_t)(n * context)),
          *y = malloc(sizeof *y * (size_t)(n * context));
  jx_dataset *d = NULL;
  if (x && y) {
    for (int64_t i = 0; i < n; i++)
      for (int64_t t = 0; t < context; t++) {
        x[i * context + t] = text[i * context + t];
        y[i * context + t] = text[i * context + t + 1];
      }
    jx_scope_begin();
    jx_array *arrays[2] = {jx_array_from(JX_I32, JX_SHAPE(n, context), x),
                           jx_array_from(JX_I32, JX_SHAPE(n, context), y)};
    d = jx_dataset_from_arrays(2, arrays);
    jx_scope_end();
  } else {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  free(x);
  free(y);
  free(text);
  return d;
}
