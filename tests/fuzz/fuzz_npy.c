/* libFuzzer: jx_load_npy on arbitrary bytes. An input is either refused
 * with an error or loads as an array whose bytes the file holds. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[600];
  if (!*path) snprintf(path, sizeof path, "%s/input.npy", fuzz_scratch_dir());
  fuzz_write(path, data, size);
  jx_scope_begin();
  jx_array *a = jx_load_npy(path);
  if (a && !jx_is_poisoned(a)) {
    size_t bytes = (size_t)jx_size(a) * jx_dtype_size(jx_dtype_of(a));
    if (bytes > size) abort(); /* an array larger than the file: garbage */
    void *buf = malloc(bytes + 1);
    if (jx_read(a, buf, bytes) != JX_OK) abort();
    free(buf);
  }
  jx_scope_end();
  jx_clear_error();
  return 0;
}
