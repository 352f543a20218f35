/* libFuzzer: a whole step directory from one input. The input is up to
 * three files joined by the marker "#jxfile#": manifest.json,
 * process_0.safetensors, process_1.safetensors (a part left out is a file
 * left out). Loaded as saved and onto fuzz_sample_tree's layout: errors
 * naming the file, never a crash, a hang or an absurd allocation. */
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static jx_tree *like;
static char step[600];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  jx_set_cpu_device_count(2);
  jx_mesh *mesh;
  jx_sharding *rows;
  like = fuzz_sample_tree(&mesh, &rows);
  snprintf(step, sizeof step, "%s/step_00000001", fuzz_scratch_dir());
  mkdir(step, 0755);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char marker[] = "#jxfile#";
  static const char *const names[] = {"manifest.json", "process_0.safetensors",
                                      "process_1.safetensors"};
  const uint8_t *p = data, *end = data + size;
  char path[700];
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", step, names[i]);
    if (!p) {
      unlink(path);
      continue;
    }
    const uint8_t *next = memmem(p, (size_t)(end - p), marker, sizeof marker - 1);
    fuzz_write(path, p, (size_t)((next ? next : end) - p));
    p = next ? next + sizeof marker - 1 : NULL;
  }
  jx_scope_begin();
  jx_tree_release(jx_checkpoint_load(fuzz_scratch_dir(), 1, NULL));
  jx_clear_error();
  jx_tree_release(jx_checkpoint_load(fuzz_scratch_dir(), 1, like));
  jx_clear_error();
  jx_scope_end();
  return 0;
}
