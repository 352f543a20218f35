/* libFuzzer: manifest.json of arbitrary bytes beside the data files of a
 * real checkpoint (fuzz_sample_tree saved in blocks), loaded as saved and onto the tree's
 * own layout. A manifest must never make the loader read outside a file,
 * allocate what the files cannot hold, or crash. */
#include "fuzz_util.h"
#include "io/checkpoint_internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static jx_tree *like;
static char manifest[600];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  jx_set_cpu_device_count(2);
  jx_mesh *mesh;
  jx_sharding *rows;
  like = fuzz_sample_tree(&mesh, &rows);
  ckpt_save_options blocks = {.split_blocks = 1};
  if (ckpt_save_with(fuzz_scratch_dir(), 1, like, &blocks) != JX_OK) {
    fprintf(stderr, "jx fuzz: %s\n", jx_last_error());
    exit(1);
  }
  snprintf(manifest, sizeof manifest, "%s/step_00000001/manifest.json", fuzz_scratch_dir());
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_write(manifest, data, size);
  jx_scope_begin();
  jx_tree_release(jx_checkpoint_load(fuzz_scratch_dir(), 1, NULL));
  jx_clear_error();
  jx_tree_release(jx_checkpoint_load(fuzz_scratch_dir(), 1, like));
  jx_clear_error();
  jx_scope_end();
  return 0;
}
