/* Reading and writing .safetensors files. Every field of a header is
 * checked before any byte is read on its account: a corrupt or truncated
 * file gives an error naming it, never a crash or garbage. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint_internal.h"

#define MAX_HEADER ((uint64_t)100 << 20) /* as the safetensors library's limit */

/* C128 is not in the safetensors spec (its library stops at C64); jx's own
 * checkpoints write and read it. */
static const char *const DTYPE_NAMES[JX_NUM_DTYPES] = {
    [JX_BOOL] = "BOOL", [JX_I8] = "I8",   [JX_I16] = "I16", [JX_I32] = "I32", [JX_I64] = "I64",
    [JX_U8] = "U8",     [JX_U16] = "U16", [JX_U32] = "U32", [JX_U64] = "U64", [JX_F16] = "F16",
    [JX_BF16] = "BF16", [JX_F32] = "F32", [JX_F64] = "F64", [JX_C64] = "C64", [JX_C128] = "C128"};

const char *jx_safetensors_dtype_name(jx_dtype dt) {
  return (int)dt >= 0 && dt < JX_NUM_DTYPES ? DTYPE_NAMES[dt] : "?";
}

int jx_safetensors_dtype_parse(const char *s) {
  for (int d = 0; s && d < JX_NUM_DTYPES; d++)
    if (strcmp(DTYPE_NAMES[d], s) == 0) return d;
  return -1;
}

/* 64-bit words through a multiply-xorshift mix, the tail byte by byte. */
uint64_t jx_checksum_bytes(const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  h ^= h >> 29;
  return h * 0xc4ceb9fe1a85ec53ull;
}

int jx_write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return 0;
    p += w;
    n -= (size_t)w;
  }
  return 1;
}

jx_status jx_safetensors_write(const char *path, int n, const char *const *names,
                               jx_array *const *arrays, uint64_t *checksums) {
  cJSON *h = cJSON_CreateObject();
  uint64_t offset = 0;
  for (int i = 0; i < n && h; i++) {
    jx_shape s = jx_shape_of(arrays[i]);
    cJSON *t = cJSON_AddObjectToObject(h, names[i]);
    cJSON_AddStringToObject(t, "dtype", jx_safetensors_dtype_name(jx_dtype_of(arrays[i])));
    cJSON *shape = cJSON_AddArrayToObject(t, "shape");
    for (int d = 0; d < s.rank; d++)
      cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)s.dims[d]));
    uint64_t bytes = (uint64_t)jx_size(arrays[i]) * jx_dtype_size(jx_dtype_of(arrays[i]));
    cJSON *off = cJSON_AddArrayToObject(t, "data_offsets");
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)offset));
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(offset + bytes)));
    offset += bytes;
  }
  cJSON *meta = h ? cJSON_AddObjectToObject(h, "__metadata__") : NULL;
  if (meta) cJSON_AddStringToObject(meta, "format", "pt");
  char *text = h ? cJSON_PrintUnformatted(h) : NULL;
  cJSON_Delete(h);
  if (!text) return jx_report_error(JX_ERR_OUT_OF_MEMORY, "writing '%s': out of memory", path);
  size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    free(text);
    return jx_report_error(JX_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  }
  unsigned char lenbytes[8];
  for (int k = 0; k < 8; k++) lenbytes[k] = (unsigned char)((uint64_t)padded >> (8 * k));
  int ok = jx_write_all(fd, lenbytes, 8) && jx_write_all(fd, text, len) &&
           jx_write_all(fd, "        ", padded - len);
  free(text);
  for (int i = 0; i < n && ok; i++) {
    size_t bytes = (size_t)jx_size(arrays[i]) * jx_dtype_size(jx_dtype_of(arrays[i]));
    void *buf = malloc(bytes ? bytes : 1);
    ok = buf && jx_read(arrays[i], buf, bytes) == JX_OK; /* gathers a sharded array */
    if (ok) {
      checksums[i] = jx_checksum_bytes(buf, bytes);
      ok = jx_write_all(fd, buf, bytes);
    }
    free(buf);
  }
  const char *slash = strrchr(path, '/');
  char point[96];
  snprintf(point, sizeof point, "fsync:%s", slash ? slash + 1 : path);
  ok = ok && ckpt_fsync_fd(fd, point);
  int saved = errno;
  ok = (close(fd) == 0) && ok;
  if (!ok && saved) errno = saved;
  if (!ok) {
    if (jx_last_status()) return jx_last_status();
    return jx_report_error(JX_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
  }
  return JX_OK;
}

struct jx_safetensors {
  char *path;
  int fd;
  uint64_t data_start, data_size;
  cJSON *header;
};

static jx_safetensors *fail_open(jx_safetensors *f, jx_status code, const char *op,
                                 const char *why) {
  jx_report_error(code, "%s: '%s' %s", op, f->path, why);
  jx_safetensors_close(f);
  return NULL;
}

jx_safetensors *jx_safetensors_open(const char *path, const char *op) {
  jx_safetensors *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(path))) {
    free(f);
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  f->fd = ckpt_open_regular(path, op);
  if (f->fd < 0) {
    jx_safetensors_close(f);
    return NULL;
  }
  struct stat st;
  unsigned char lenbytes[8];
  if (fstat(f->fd, &st) != 0 || pread(f->fd, lenbytes, 8, 0) != 8)
    return fail_open(f, JX_ERR_CORRUPT, op, "is truncated: shorter than its 8-byte header length");
  uint64_t hlen = 0;
  for (int k = 0; k < 8; k++) hlen |= (uint64_t)lenbytes[k] << (8 * k);
  if (hlen > MAX_HEADER || hlen + 8 > (uint64_t)st.st_size)
    return fail_open(f, JX_ERR_CORRUPT, op,
                     "is corrupt or truncated: its header length runs past the end of the file");
  char *text = malloc(hlen + 1);
  if (!text) return fail_open(f, JX_ERR_OUT_OF_MEMORY, op, "needs more memory to read");
  ssize_t got = pread(f->fd, text, hlen, 8);
  text[got > 0 ? got : 0] = 0;
  f->header = (uint64_t)got == hlen ? cJSON_ParseWithLength(text, hlen) : NULL;
  free(text);
  if (!f->header || !cJSON_IsObject(f->header))
    return fail_open(f, JX_ERR_CORRUPT, op, "is corrupt: its header is not a JSON object");
  f->data_start = 8 + hlen;
  f->data_size = (uint64_t)st.st_size - f->data_start;
  return f;
}

void jx_safetensors_close(jx_safetensors *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  cJSON_Delete(f->header);
  free(f->path);
  free(f);
}

uint64_t jx_safetensors_data_size(const jx_safetensors *f) { return f->data_size; }

int jx_safetensors_count(const jx_safetensors *f) {
  int n = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, f->header) n += strcmp(t->string, "__metadata__") != 0;
  return n;
}

const char *jx_safetensors_name(const jx_safetensors *f, int i) {
  const cJSON *t;
  cJSON_ArrayForEach(t, f->header) {
    if (strcmp(t->string, "__metadata__") == 0) continue;
    if (i-- == 0) return t->string;
  }
  return NULL;
}

static jx_array *bad(const jx_safetensors *f, const char *name, const char *op, jx_status code,
                     const char *why) {
  jx_report_error(code, "%s: '%s', tensor '%s': %s", op, f->path, name, why);
  return NULL;
}

/* A tensor's entry, checked against the file: dtype, shape, and the byte
 * offset of its data in the data section. NULL with an error otherwise. */
static const cJSON *tensor_info(jx_safetensors *f, const char *name, const char *op, int *dtype,
                                jx_shape *s, uint64_t *begin) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(f->header, name);
  if (!t) return bad(f, name, op, JX_ERR_CORRUPT, "not in the file"), NULL;
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
  *dtype = cJSON_IsString(dt) ? jx_safetensors_dtype_parse(dt->valuestring) : -1;
  if (*dtype < 0) return bad(f, name, op, JX_ERR_CORRUPT, "corrupt header: unknown dtype"), NULL;
  if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > JX_MAX_RANK)
    return bad(f, name, op, JX_ERR_CORRUPT, "corrupt header: bad shape"), NULL;
  *s = (jx_shape){cJSON_GetArraySize(shape), {0}};
  /* the product of the non-zero dims is bounded, as NumPy bounds it: a
   * zero dim must not let the others be anything */
  uint64_t nonzero = 1, numel = 1;
  for (int d = 0; d < s->rank; d++) {
    const cJSON *v = cJSON_GetArrayItem(shape, d);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 9.0e15) ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
      return bad(f, name, op, JX_ERR_CORRUPT, "corrupt header: bad shape"), NULL;
    s->dims[d] = (int64_t)v->valuedouble;
    if (s->dims[d] == 0) numel = 0;
    if (s->dims[d] > 0 && (__builtin_mul_overflow(nonzero, (uint64_t)s->dims[d], &nonzero) ||
                           nonzero > ((uint64_t)1 << 50)))
      return bad(f, name, op, JX_ERR_CORRUPT, "corrupt header: shape too large"), NULL;
  }
  if (numel) numel = nonzero;
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
      !cJSON_IsNumber(cJSON_GetArrayItem(off, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(off, 1)))
    return bad(f, name, op, JX_ERR_CORRUPT, "corrupt header: bad data_offsets"), NULL;
  double b = cJSON_GetArrayItem(off, 0)->valuedouble, e = cJSON_GetArrayItem(off, 1)->valuedouble;
  uint64_t bytes = numel * jx_dtype_size((jx_dtype)*dtype);
  if (!(b >= 0 && e >= b && e <= 9.0e15) || b != (double)(uint64_t)b || e != (double)(uint64_t)e)
    return bad(f, name, op, JX_ERR_CORRUPT, "corrupt header: bad data_offsets"), NULL;
  if ((uint64_t)e - (uint64_t)b != bytes)
    return bad(f, name, op, JX_ERR_CORRUPT,
               "corrupt header: data_offsets do not match the dtype and shape"),
           NULL;
  if ((uint64_t)e > f->data_size) {
    char why[200];
    snprintf(why, sizeof why, "truncated: its data ends at byte %.0f of %llu", e,
             (unsigned long long)f->data_size);
    return bad(f, name, op, JX_ERR_CORRUPT, why), NULL;
  }
  *begin = (uint64_t)b;
  return t;
}

/* Reads n bytes at offset `at` of the data section. */
static int read_at(jx_safetensors *f, void *buf, size_t n, uint64_t at) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(f->fd, (char *)buf + done, n - done, (off_t)(f->data_start + at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    done += (size_t)r;
  }
  return 1;
}

jx_array *jx_safetensors_read(jx_safetensors *f, const char *name, uint64_t *checksum,
                              const char *op) {
  int dtype;
  jx_shape s;
  uint64_t begin;
  if (!tensor_info(f, name, op, &dtype, &s, &begin)) return NULL;
  size_t bytes = jx_dtype_size((jx_dtype)dtype);
  for (int d = 0; d < s.rank; d++) bytes *= (size_t)s.dims[d];
  void *buf = malloc(bytes ? bytes : 1);
  if (!buf) return bad(f, name, op, JX_ERR_OUT_OF_MEMORY, "out of memory");
  if (!read_at(f, buf, bytes, begin)) {
    free(buf);
    return bad(f, name, op, JX_ERR_IO, "read failed");
  }
  if (checksum) *checksum = jx_checksum_bytes(buf, bytes);
  jx_array *a = jx_array_from((jx_dtype)dtype, s, buf);
  free(buf);
  return a;
}

jx_status jx_safetensors_read_box(jx_safetensors *f, const char *name, jx_dtype dt, jx_shape shape,
                                  const int64_t *start, const int64_t *size, void *out,
                                  uint64_t *checksum, const char *op) {
  int dtype;
  jx_shape s;
  uint64_t begin;
  if (!tensor_info(f, name, op, &dtype, &s, &begin)) return jx_last_status();
  int same = dtype == (int)dt && s.rank == shape.rank;
  for (int d = 0; same && d < s.rank; d++) same = s.dims[d] == shape.dims[d];
  if (!same)
    return bad(f, name, op, JX_ERR_CORRUPT, "its dtype or shape is not the one the manifest says"),
           jx_last_status();
  for (int d = 0; d < s.rank; d++)
    if (start[d] < 0 || size[d] < 0 || start[d] + size[d] > s.dims[d])
      return bad(f, name, op, JX_ERR_INVALID_ARGUMENT, "the box to read lies outside it"),
             jx_last_status();
  size_t es = jx_dtype_size(dt);
  int64_t numel = 1;
  for (int d = 0; d < s.rank; d++) numel *= size[d];
  if (numel == 0) {
    if (checksum) *checksum = jx_checksum_bytes(out, 0);
    return JX_OK;
  }
  /* dims k+1.. are read whole, so each index of dims ..k-1 is one contiguous run */
  int k = s.rank - 1;
  while (k > 0 && size[k] == s.dims[k]) k--;
  int64_t inner = 1;
  for (int d = k + 1; d < s.rank; d++) inner *= s.dims[d];
  size_t run = (size_t)((k >= 0 ? size[k] : 1) * inner) * es;
  int64_t idx[JX_MAX_RANK] = {0};
  char *dst = out;
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < s.rank; d++) off = off * s.dims[d] + start[d] + (d < k ? idx[d] : 0);
    if (!read_at(f, dst, run, begin + (uint64_t)off * es))
      return bad(f, name, op, JX_ERR_IO, "read failed"), jx_last_status();
    dst += run;
    int d = k - 1;
    while (d >= 0 && ++idx[d] == size[d]) idx[d--] = 0;
    if (d < 0) break;
  }
  if (checksum) *checksum = jx_checksum_bytes(out, (size_t)numel * es);
  return JX_OK;
}
