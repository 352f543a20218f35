/* .npy files, NumPy format versions 1.0 to 3.0: little- and big-endian data,
 * C and Fortran order. A 2-byte void dtype ('<V2'), which is how NumPy writes
 * ml_dtypes.bfloat16, loads as bf16, and bf16 arrays are saved that way;
 * complex is '<c8' (c64) and '<c16' (c128). Every
 * malformed header, unsupported dtype or short file is an error naming the
 * file; nothing here trusts a byte of the input. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "array.h"

static const char magic[6] = {(char)0x93, 'N', 'U', 'M', 'P', 'Y'};

static const struct {
  const char *code; /* descr without the byte-order character */
  jx_dtype dt;
} codes[] = {{"b1", JX_BOOL}, {"i1", JX_I8},  {"i2", JX_I16}, {"i4", JX_I32}, {"i8", JX_I64},
             {"u1", JX_U8},   {"u2", JX_U16}, {"u4", JX_U32}, {"u8", JX_U64}, {"f2", JX_F16},
             {"V2", JX_BF16}, {"f4", JX_F32}, {"f8", JX_F64}, {"c8", JX_C64}, {"c16", JX_C128}};

static const char *descr_of(jx_dtype dt) {
  for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
    if (codes[i].dt == dt) return codes[i].code;
  return NULL;
}

jx_status jx_save_npy(const char *path, const jx_array *a) {
  if (!path) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_save_npy: path is NULL");
  if (!a) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_save_npy: the array is NULL");
  if (a->poisoned)
    return jx_error_set(JX_ERR_POISONED, "jx_save_npy: the array carries an earlier error");
  if (jx_is_tracer(a))
    return jx_error_set(JX_ERR_TRACE, "jx_save_npy: the array is a tracer; save a concrete one");
  jx_status ready = jx_array_ready((jx_array *)a);
  if (ready) return ready;
  /* The header exactly as NumPy writes it (numpy/lib/format.py), so that the
   * bytes of a jx file and a NumPy file of the same array are the same: the
   * dict, spaces that leave room for the first dimension to grow to 21 digits,
   * then spaces and '\n' up to a multiple of 64 bytes (64 more when the
   * total is already a multiple: NumPy's padlen is never 0). */
  char header[512];
  int n = snprintf(header + 10, 400, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                   jx_dtype_size(a->dtype) == 1 ? '|' : '<', descr_of(a->dtype));
  for (int i = 0; i < a->shape.rank; i++)
    n += snprintf(header + 10 + n, 400 - (size_t)n, "%lld,%s", (long long)a->shape.dims[i],
                  (i + 1 < a->shape.rank) ? " " : "");
  if (a->shape.rank > 1) n--; /* "(2, 3,)" -> "(2, 3)"; a 1-tuple keeps its comma */
  n += snprintf(header + 10 + n, 400 - (size_t)n, "), }");
  if (a->shape.rank > 0) {
    char first[24];
    int growth = 21 - snprintf(first, sizeof first, "%lld", (long long)a->shape.dims[0]);
    for (int i = 0; i < growth; i++) header[10 + n++] = ' ';
  }
  size_t hlen = (size_t)n + 1;
  size_t padlen = 64 - (10 + hlen) % 64;
  size_t padded = 10 + hlen + padlen;
  memcpy(header, magic, 6);
  header[6] = 1;
  header[7] = 0;
  header[8] = (char)((hlen + padlen) & 0xff);
  header[9] = (char)((hlen + padlen) >> 8);
  memset(header + 10 + n, ' ', padlen);
  header[padded - 1] = '\n';

  FILE *f = fopen(path, "wb");
  if (!f)
    return jx_error_set(JX_ERR_IO, "jx_save_npy: cannot open '%s' for writing: %s", path,
                        strerror(errno));
  int ok = fwrite(header, 1, padded, f) == padded &&
           fwrite(a->buf->data, 1, a->buf->nbytes, f) == a->buf->nbytes;
  ok = (fclose(f) == 0) && ok;
  if (!ok) return jx_error_set(JX_ERR_IO, "jx_save_npy: writing '%s' failed", path);
  return JX_OK;
}

/* ---- parsing the header dictionary ---- */
static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* Finds 'key' in the dict text and returns the position after its ':' or NULL. */
static const char *find_key(const char *dict, const char *end, const char *key) {
  size_t kl = strlen(key);
  for (const char *p = dict; p + kl + 2 < end; p++)
    if ((*p == '\'' || *p == '"') && memcmp(p + 1, key, kl) == 0 && p[kl + 1] == *p) {
      const char *q = skip_ws(p + kl + 2, end);
      if (q < end && *q == ':') return skip_ws(q + 1, end);
    }
  return NULL;
}

typedef struct {
  jx_dtype dt;
  int big_endian, fortran;
  jx_shape shape;
} npy_header;

static jx_status parse_header(const char *path, const char *dict, size_t len, npy_header *h) {
  const char *end = dict + len;
  const char *p = find_key(dict, end, "descr");
  if (!p || (*p != '\'' && *p != '"'))
    return jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s': the header has no 'descr'", path);
  char q = *p++;
  const char *close = memchr(p, q, (size_t)(end - p));
  if (!close || close - p < 2 || close - p > 8)
    return jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s': malformed 'descr'", path);
  char descr[9] = {0};
  memcpy(descr, p, (size_t)(close - p));
  char order = descr[0];
  const char *code = descr + 1;
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    order = '|';
    code = descr;
  }
  size_t i = 0;
  for (; i < sizeof codes / sizeof *codes; i++)
    if (strcmp(codes[i].code, code) == 0) break;
  if (i == sizeof codes / sizeof *codes)
    return jx_error_set(JX_ERR_DTYPE, "jx_load_npy: '%s': dtype '%s' is not supported", path,
                        descr);
  h->dt = codes[i].dt;
  h->big_endian = order == '>';

  p = find_key(dict, end, "fortran_order");
  if (!p) return jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s': no 'fortran_order'", path);
  if ((size_t)(end - p) >= 4 && memcmp(p, "True", 4) == 0)
    h->fortran = 1;
  else if ((size_t)(end - p) >= 5 && memcmp(p, "False", 5) == 0)
    h->fortran = 0;
  else
    return jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s': malformed 'fortran_order'", path);

  p = find_key(dict, end, "shape");
  if (!p || *p != '(')
    return jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s': the header has no 'shape'", path);
  p++;
  h->shape.rank = 0;
  for (;;) {
    p = skip_ws(p, end);
    if (p >= end)
      return jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s': unterminated shape", path);
    if (*p == ')') break;
    if (*p < '0' || *p > '9')
      return jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s': malformed shape", path);
    int64_t d = 0;
    while (p < end && *p >= '0' && *p <= '9') {
      if (d > (INT64_MAX - 9) / 10)
        return jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s': dimension too large", path);
      d = d * 10 + (*p++ - '0');
    }
    if (h->shape.rank == JX_MAX_RANK)
      return jx_error_set(JX_ERR_SHAPE, "jx_load_npy: '%s': more than %d dimensions", path,
                          JX_MAX_RANK);
    h->shape.dims[h->shape.rank++] = d;
    p = skip_ws(p, end);
    if (p < end && *p == ',') p++;
  }
  char what[1100];
  snprintf(what, sizeof what, "the shape in '%.1024s'", path);
  return jx_shape_check(h->shape, "jx_load_npy", what);
}

static void byteswap(unsigned char *data, size_t n, size_t es) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < es / 2; j++) {
      unsigned char t = data[i * es + j];
      data[i * es + j] = data[i * es + es - 1 - j];
      data[i * es + es - 1 - j] = t;
    }
}

/* Fortran (column-major) to row-major: element at column-major position k. */
static void from_fortran(const unsigned char *src, unsigned char *dst, jx_shape s, size_t es) {
  int64_t n = jx_shape_numel(s), strides[JX_MAX_RANK];
  jx_shape_strides(s, strides);
  int64_t idx[JX_MAX_RANK] = {0};
  for (int64_t k = 0; k < n; k++) {
    int64_t off = 0;
    for (int d = 0; d < s.rank; d++) off += idx[d] * strides[d];
    memcpy(dst + (size_t)off * es, src + (size_t)k * es, es);
    for (int d = 0; d < s.rank; d++) { /* first index varies fastest */
      if (++idx[d] < s.dims[d]) break;
      idx[d] = 0;
    }
  }
}

jx_array *jx_load_npy(const char *path) {
  if (!path) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_load_npy: path is NULL");
    return jx_poison();
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    jx_error_set(JX_ERR_IO, "jx_load_npy: cannot open '%s': %s", path, strerror(errno));
    return jx_poison();
  }
  jx_array *result = jx_poison();
  char *dict = NULL;
  unsigned char pre[12];
  if (fread(pre, 1, 8, f) != 8 || memcmp(pre, magic, 6) != 0) {
    jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s' is not a .npy file (bad magic)", path);
    goto out;
  }
  int major = pre[6];
  size_t hlen;
  if (major == 1) {
    if (fread(pre + 8, 1, 2, f) != 2) goto truncated;
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
  } else if (major == 2 || major == 3) {
    if (fread(pre + 8, 1, 4, f) != 4) goto truncated;
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    if (hlen > (1u << 24)) {
      jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s': header length %zu is implausible", path,
                   hlen);
      goto out;
    }
  } else {
    jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s': unsupported format version %d", path, major);
    goto out;
  }
  dict = malloc(hlen + 1);
  if (!dict || fread(dict, 1, hlen, f) != hlen) goto truncated;
  dict[hlen] = '\0';
  npy_header h = {0};
  if (parse_header(path, dict, hlen, &h)) goto out;
  size_t es = jx_dtype_size(h.dt), n = (size_t)jx_shape_numel(h.shape);
  /* check the data is all there before allocating what the header promises */
  long pos = ftell(f);
  if (pos < 0 || fseek(f, 0, SEEK_END) != 0) goto truncated;
  long size = ftell(f);
  if (size < pos || fseek(f, pos, SEEK_SET) != 0) goto truncated;
  if ((size_t)(size - pos) < n * es) {
    char sb[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_CORRUPT,
                 "jx_load_npy: '%s' is truncated: %s needs %zu bytes of data, the file has %ld",
                 path, jx_aval_str(h.dt, h.shape, sb), n * es, size - pos);
    goto out;
  }
  jx_array *a = jx_array_alloc(h.dt, h.shape, 0);
  if (a->poisoned) goto out;
  unsigned char *data = a->buf->data, *tmp = NULL;
  if (h.fortran && h.shape.rank > 1) {
    tmp = malloc(n * es > 0 ? n * es : 1);
    if (!tmp) {
      jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_load_npy: '%s': out of memory", path);
      goto out;
    }
    data = tmp;
  }
  if (fread(data, 1, n * es, f) != n * es) {
    free(tmp);
    goto truncated;
  }
  if (h.big_endian && es > 1) { /* a complex element is two floats, each swapped */
    size_t word = jx_is_complex(h.dt) ? es / 2 : es;
    byteswap(data, n * (es / word), word);
  }
  if (tmp) {
    from_fortran(tmp, a->buf->data, h.shape, es);
    free(tmp);
  }
  if (h.dt == JX_BOOL) { /* any non-zero byte is true; jx keeps bools as 0/1 */
    unsigned char *b = a->buf->data;
    for (size_t i = 0; i < n; i++) b[i] = b[i] != 0;
  }
  result = a;
  goto out;
truncated:
  jx_error_set(JX_ERR_CORRUPT, "jx_load_npy: '%s' is truncated", path);
out:
  free(dict);
  fclose(f);
  return result;
}
