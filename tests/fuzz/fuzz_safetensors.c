/* libFuzzer: a .safetensors file of arbitrary bytes, opened and every
 * tensor read whole and in part, as the checkpoint loader reads blocks.
 * Every header field is input: errors, never a crash or a read outside the
 * file. */
#include "io/safetensors.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[600];
  if (!*path) snprintf(path, sizeof path, "%s/process_0.safetensors", fuzz_scratch_dir());
  fuzz_write(path, data, size);
  jx_safetensors *f = jx_safetensors_open(path, "fuzz");
  for (int i = 0; f && i < jx_safetensors_count(f) && i < 16; i++) {
    const char *name = jx_safetensors_name(f, i);
    jx_scope_begin();
    uint64_t sum;
    jx_array *a = jx_safetensors_read(f, name, &sum, "fuzz");
    if (a && !jx_is_poisoned(a)) {
      jx_shape s = jx_shape_of(a);
      size_t es = jx_dtype_size(jx_dtype_of(a));
      if ((uint64_t)jx_size(a) * es > jx_safetensors_data_size(f)) abort();
      /* the second half along dim 0 (all of a scalar) */
      int64_t start[JX_MAX_RANK] = {0}, part[JX_MAX_RANK];
      size_t n = es;
      for (int d = 0; d < s.rank; d++) {
        start[d] = d == 0 ? s.dims[0] / 2 : 0;
        part[d] = s.dims[d] - start[d];
        n *= (size_t)part[d];
      }
      void *buf = malloc(n + 1);
      jx_safetensors_read_box(f, name, jx_dtype_of(a), s, start, part, buf, &sum, "fuzz");
      free(buf);
    }
    jx_scope_end();
  }
  jx_safetensors_close(f);
  jx_clear_error();
  return 0;
}
