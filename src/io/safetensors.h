/* The .safetensors format: an 8-byte little-endian header length, a JSON
 * header {"name": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]},
 * "__metadata__": {...}} padded with spaces to 8 bytes, then the tensors'
 * bytes (row-major, little-endian). */
#ifndef JX_SRC_IO_SAFETENSORS_H
#define JX_SRC_IO_SAFETENSORS_H

#include <jx/jx.h>

/* Writes the arrays (gathered to their global values) to path and fsyncs
 * it; fills checksums[i] (a hash of array i's bytes). */
jx_status jx_safetensors_write(const char *path, int n, const char *const *names,
                               jx_array *const *arrays, uint64_t *checksums);

/* An open file whose header has been read and checked. Only a regular file
 * is opened, never through a link (path is a file of jx's own layout). */
typedef struct jx_safetensors jx_safetensors;
jx_safetensors *jx_safetensors_open(const char *path, const char *op);
void jx_safetensors_close(jx_safetensors *f);
/* The bytes after the header: what its tensors can hold at most. */
uint64_t jx_safetensors_data_size(const jx_safetensors *f);
int jx_safetensors_count(const jx_safetensors *f);
const char *jx_safetensors_name(const jx_safetensors *f, int i);
/* Reads the tensor called name into a new array (owned by the innermost
 * scope); NULL with an error naming the file and tensor when it is missing
 * or does not fit. *checksum gets the hash of its bytes. */
jx_array *jx_safetensors_read(jx_safetensors *f, const char *name, uint64_t *checksum,
                              const char *op);

/* Reads the box [start, start + size) of tensor name into out (row-major,
 * the box's own shape), with preads of only the rows it needs. The tensor
 * must have dtype dt and shape `shape`, else an error naming the file and
 * tensor. *checksum (when not NULL) gets the hash of the bytes read: the
 * tensor's checksum when the box is all of it. */
jx_status jx_safetensors_read_box(jx_safetensors *f, const char *name, jx_dtype dt, jx_shape shape,
                                  const int64_t *start, const int64_t *size, void *out,
                                  uint64_t *checksum, const char *op);

/* Writes all n bytes to fd (retrying short writes and EINTR); 0 on failure
 * (errno says why). */
int jx_write_all(int fd, const void *buf, size_t n);

/* The hash stored in manifests: 64-bit, over the bytes in order. */
uint64_t jx_checksum_bytes(const void *data, size_t n);
/* "F32", "BF16", ... and back (-1 when unknown). */
const char *jx_safetensors_dtype_name(jx_dtype dt);
int jx_safetensors_dtype_parse(const char *s);

#endif
