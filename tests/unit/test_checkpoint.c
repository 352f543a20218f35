/* Checkpoints: exact round trips of every dtype, restoring onto another
 * mesh, reading files the safetensors library wrote, crash safety (a save
 * killed before its rename leaves the previous step loadable), and clear
 * errors for corrupt, truncated and mismatched checkpoints. Checkpoints of
 * blocks (what processes that each hold part of an array write) are made
 * here in one process with the split_blocks save option; tests/mpi/
 * test_mpi_io.c saves and loads them over several processes. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "io/checkpoint_internal.h"
#include "io/safetensors.h"
#include "test_util.h"

static char root[256];

/* A fresh directory under the test's temporary root. */
static const char *fresh_dir(const char *name) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", root, name);
  return path;
}

static void assert_same(jx_array *a, jx_array *b) {
  assert_int_equal(jx_dtype_of(a), jx_dtype_of(b));
  jx_shape s = jx_shape_of(a), t = jx_shape_of(b);
  assert_int_equal(s.rank, t.rank);
  for (int d = 0; d < s.rank; d++) assert_int_equal(s.dims[d], t.dims[d]);
  size_t n = (size_t)jx_size(a) * jx_dtype_size(jx_dtype_of(a));
  char *x = malloc(n + 1), *y = malloc(n + 1);
  check_ok(jx_read(a, x, n));
  check_ok(jx_read(b, y, n));
  assert_memory_equal(x, y, n);
  free(x);
  free(y);
}

static jx_tree *sample_tree(void) {
  jx_tree *t = jx_tree_create();
  jx_array *key = jx_random_key(11);
  jx_tree_set(t, "blocks.0.w", jx_random_normal(key, JX_F32, JX_SHAPE(4, 6)));
  jx_tree_set(t, "blocks.0.b", jx_astype(jx_random_normal(key, JX_F32, JX_SHAPE(6)), JX_BF16));
  jx_tree_set(t, "step", jx_full(JX_I64, JX_SHAPE(), 123456789012));
  jx_tree_set(t, "mask", jx_lt(jx_arange(JX_F32, 0, 5, 1), jx_scalar(JX_F32, 2)));
  jx_tree_set(t, "empty", jx_zeros(JX_F16, JX_SHAPE(0, 3)));
  jx_tree_set(t, "rng", key);
  return t;
}

static void round_trip_is_exact(void **state) {
  (void)state;
  const char *dir = fresh_dir("round");
  jx_tree *t = sample_tree();
  check_ok(jx_checkpoint_save(dir, 7, t));
  assert_int_equal(jx_checkpoint_latest(dir), 7);
  jx_tree *u = jx_checkpoint_load(dir, 7, NULL);
  assert_non_null(u);
  assert_int_equal(jx_tree_size(u), jx_tree_size(t));
  for (int i = 0; i < jx_tree_size(t); i++) {
    assert_string_equal(jx_tree_name(u, i), jx_tree_name(t, i));
    assert_same(jx_tree_at(u, i), jx_tree_at(t, i));
  }
  /* saving the same step again replaces it */
  jx_tree_set(t, "step", jx_full(JX_I64, JX_SHAPE(), 5));
  check_ok(jx_checkpoint_save(dir, 7, t));
  jx_tree *v = jx_checkpoint_load(dir, 7, t);
  assert_true(jx_item(jx_tree_get(v, "step")) == 5);
  check_ok(jx_checkpoint_save(dir, 12, t));
  assert_int_equal(jx_checkpoint_latest(dir), 12);
  assert_int_equal(jx_checkpoint_latest(fresh_dir("nothing-here")), -1);
  jx_tree_release(v);
  jx_tree_release(u);
  jx_tree_release(t);
}

/* Saved from 4 devices split by rows, restored onto 2 devices split by
 * columns: the values are the same and laid out as the new tree says. */
static void restore_onto_another_mesh(void **state) {
  (void)state;
  const char *dir = fresh_dir("reshard");
  jx_mesh *m4 = jx_mesh_create_on(JX_SHAPE(4), (const char *[]){"data"}, (const int[]){0, 1, 2, 3});
  jx_mesh *m2 = jx_mesh_create_on(JX_SHAPE(2), (const char *[]){"model"}, (const int[]){4, 5});
  jx_sharding *rows = jx_sharding_create(m4, "data"), *cols = jx_sharding_create(m2, "None,model");
  jx_array *w = jx_random_normal(jx_random_key(3), JX_F32, JX_SHAPE(8, 6));
  jx_tree *t = jx_tree_create();
  jx_tree_set(t, "w", jx_device_put(w, rows));
  check_ok(jx_checkpoint_save(dir, 1, t));
  jx_tree *like = jx_tree_create();
  jx_tree_set(like, "w", jx_device_put(jx_zeros(JX_F32, JX_SHAPE(8, 6)), cols));
  jx_tree *u = jx_checkpoint_load(dir, 1, like);
  assert_non_null(u);
  assert_ptr_equal(jx_sharding_of(jx_tree_get(u, "w")), cols);
  assert_same(jx_tree_get(u, "w"), w);
  jx_tree_release(u);
  jx_tree_release(like);
  jx_tree_release(t);
  jx_sharding_release(rows);
  jx_sharding_release(cols);
  jx_mesh_release(m4);
  jx_mesh_release(m2);
}

static void reads_the_safetensors_library(void **state) {
  (void)state;
  jx_safetensors *f =
      jx_safetensors_open(JX_TEST_DATA "/checkpoint/from_python.safetensors", "test");
  assert_non_null(f);
  assert_int_equal(jx_safetensors_count(f), 5);
  const char *names[] = {"w", "ids", "mask", "half", "scalar"};
  for (int i = 0; i < 5; i++) {
    char path[512];
    snprintf(path, sizeof path, JX_TEST_DATA "/checkpoint/%s.npy", names[i]);
    jx_array *a = jx_safetensors_read(f, names[i], NULL, "test");
    assert_non_null(a);
    assert_same(a, jx_load_npy(path));
  }
  jx_safetensors_close(f);
}

/* A save that dies after writing its files but before the rename (as a
 * crash or kill would) leaves the earlier checkpoint as the latest. */
static void crash_mid_save_keeps_the_last_good_step(void **state) {
  (void)state;
  const char *dir = fresh_dir("crash");
  jx_tree *t = sample_tree();
  check_ok(jx_checkpoint_save(dir, 1, t));
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("JX_CHECKPOINT_TEST_FAULT", "crash:rename:into-place", 1);
    jx_checkpoint_save(dir, 2, t);
    _exit(0); /* not reached: the save ends the process first */
  }
  int status = 0;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 77);
  assert_int_equal(jx_checkpoint_latest(dir), 1);
  jx_tree *u = jx_checkpoint_load(dir, 1, t);
  assert_non_null(u);
  assert_same(jx_tree_get(u, "blocks.0.w"), jx_tree_get(t, "blocks.0.w"));
  assert_null(jx_checkpoint_load(dir, 2, t));
  assert_error_has("no checkpoint at");
  /* the next save succeeds beside the dead one's leftovers */
  check_ok(jx_checkpoint_save(dir, 2, t));
  assert_int_equal(jx_checkpoint_latest(dir), 2);
  jx_tree_release(u);
  jx_tree_release(t);
}

static void flip_byte(const char *path, long offset_from_end) {
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, -offset_from_end, SEEK_END);
  int c = fgetc(f);
  fseek(f, -offset_from_end, SEEK_END);
  fputc(c ^ 0x40, f);
  fclose(f);
}

static void damaged_checkpoints_are_named(void **state) {
  (void)state;
  const char *dir = fresh_dir("damaged");
  char path[600];
  jx_tree *t = sample_tree();
  check_ok(jx_checkpoint_save(dir, 3, t));
  snprintf(path, sizeof path, "%s/step_00000003/process_0.safetensors", dir);

  flip_byte(path, 3); /* inside the last tensor's bytes */
  assert_null(jx_checkpoint_load(dir, 3, NULL));
  assert_error_has("process_0.safetensors' is corrupt: array 'rng' does not match its checksum");

  check_ok(jx_checkpoint_save(dir, 3, t));
  struct stat st;
  stat(path, &st);
  assert_int_equal(truncate(path, st.st_size - 16), 0);
  assert_null(jx_checkpoint_load(dir, 3, NULL));
  assert_error_has("truncated");

  assert_int_equal(truncate(path, 5), 0);
  assert_null(jx_checkpoint_load(dir, 3, NULL));
  assert_error_has("process_0.safetensors' is truncated");

  check_ok(jx_checkpoint_save(dir, 3, t));
  snprintf(path, sizeof path, "%s/step_00000003/manifest.json", dir);
  FILE *f = fopen(path, "w");
  fputs("{\"format\": \"something else\"}", f);
  fclose(f);
  assert_null(jx_checkpoint_load(dir, 3, NULL));
  assert_error_has("manifest.json' is corrupt: not a jx checkpoint manifest");

  check_ok(jx_checkpoint_save(dir, 3, t));
  jx_tree *like = jx_tree_create();
  jx_tree_set(like, "blocks.0.w", jx_zeros(JX_F32, JX_SHAPE(4, 7)));
  assert_null(jx_checkpoint_load(dir, 3, like));
  assert_error_has("array 'blocks.0.w' in");
  jx_tree_set(like, "blocks.0.w", jx_zeros(JX_F32, JX_SHAPE(4, 6)));
  jx_tree_set(like, "blocks.1.w", jx_zeros(JX_F32, JX_SHAPE(4, 6)));
  assert_null(jx_checkpoint_load(dir, 3, like));
  assert_error_has("has no array 'blocks.1.w'");
  assert_null(jx_checkpoint_load(dir, 4, NULL));
  assert_error_has("no checkpoint at");
  jx_tree_release(like);
  jx_tree_release(t);
}

static void async_save_completes(void **state) {
  (void)state;
  const char *dir = fresh_dir("async");
  jx_tree *t = sample_tree();
  jx_checkpoint_job *job = jx_checkpoint_save_async(dir, 9, t);
  assert_non_null(job);
  jx_tree_set(t, "step", jx_full(JX_I64, JX_SHAPE(), 1)); /* training goes on */
  check_ok(jx_checkpoint_wait(job));
  jx_tree *u = jx_checkpoint_load(dir, 9, NULL);
  assert_true(jx_item(jx_tree_get(u, "step")) == 123456789012.0);
  jx_tree_release(u);
  /* an async save's error reaches the waiter */
  job = jx_checkpoint_save_async("/proc/no-such-dir/x", 1, t);
  assert_int_equal(jx_checkpoint_wait(job), JX_ERR_IO);
  assert_error_has("cannot create");
  jx_tree_release(t);
}

/* ---- checkpoints of blocks ---- */

typedef struct {
  jx_mesh *m4, *m22, *m2;
  jx_sharding *rows, *grid, *rep, *cols2, *grid_t, *rows2;
} meshes;

static meshes make_meshes(void) {
  meshes k;
  k.m4 = jx_mesh_create_on(JX_SHAPE(4), (const char *[]){"data"}, (const int[]){0, 1, 2, 3});
  k.m22 = jx_mesh_create_on(JX_SHAPE(2, 2), (const char *[]){"data", "model"},
                            (const int[]){4, 5, 6, 7});
  k.m2 = jx_mesh_create_on(JX_SHAPE(2), (const char *[]){"model"}, (const int[]){1, 0});
  k.rows = jx_sharding_create(k.m4, "data");
  k.grid = jx_sharding_create(k.m22, "data,model");
  k.rep = jx_sharding_create(k.m4, "");
  k.cols2 = jx_sharding_create(k.m2, "None,model");
  k.grid_t = jx_sharding_create(k.m22, "model,data");
  k.rows2 = jx_sharding_create(k.m2, "model");
  return k;
}

static void free_meshes(meshes *k) {
  jx_sharding *s[] = {k->rows, k->grid, k->rep, k->cols2, k->grid_t, k->rows2};
  for (int i = 0; i < 6; i++) jx_sharding_release(s[i]);
  jx_mesh_release(k->m4);
  jx_mesh_release(k->m22);
  jx_mesh_release(k->m2);
}

/* rows: 4 blocks of rows; grid: 2 x 2 blocks; rep: replicated (one block);
 * plain: on one device (whole, under its own name) */
static jx_tree *block_tree(const meshes *k) {
  jx_tree *t = jx_tree_create();
  jx_tree_set(t, "rows",
              jx_device_put(jx_reshape(jx_arange(JX_F32, 0, 48, 1), JX_SHAPE(8, 6)), k->rows));
  jx_tree_set(t, "grid",
              jx_device_put(jx_reshape(jx_arange(JX_I32, 100, 148, 1), JX_SHAPE(8, 6)), k->grid));
  jx_tree_set(t, "rep", jx_device_put(jx_astype(jx_arange(JX_F32, 0, 12, 1), JX_BF16), k->rep));
  jx_tree_set(t, "plain", jx_full(JX_I64, JX_SHAPE(3), 7));
  return t;
}

static jx_status save_blocks(const char *dir, int64_t step, const jx_tree *t) {
  ckpt_save_options o = {.split_blocks = 1};
  return ckpt_save_with(dir, step, t, &o);
}

static void blocks_are_written_once_and_restore_anywhere(void **state) {
  (void)state;
  const char *dir = fresh_dir("blocks");
  meshes k = make_meshes();
  jx_tree *t = block_tree(&k);
  check_ok(save_blocks(dir, 1, t));
  char path[600];
  snprintf(path, sizeof path, "%s/step_00000001/process_0.safetensors", dir);
  jx_safetensors *f = jx_safetensors_open(path, "test");
  assert_non_null(f);
  /* each distinct block once: replicas are skipped */
  const char *want[] = {"rows@0:2,0:6", "rows@2:4,0:6", "rows@4:6,0:6", "rows@6:8,0:6",
                        "grid@0:4,0:3", "grid@0:4,3:6", "grid@4:8,0:3", "grid@4:8,3:6",
                        "rep@0:12",     "plain"};
  assert_int_equal(jx_safetensors_count(f), 10);
  for (int i = 0; i < 10; i++) assert_string_equal(jx_safetensors_name(f, i), want[i]);
  /* a part of a block, read by itself */
  float part[3];
  check_ok(jx_safetensors_read_box(f, "rows@2:4,0:6", JX_F32, JX_SHAPE(2, 6),
                                   (const int64_t[]){1, 2}, (const int64_t[]){1, 3}, part, NULL,
                                   "test"));
  for (int i = 0; i < 3; i++) assert_true(part[i] == (float)(3 * 6 + 2 + i));
  int32_t col[4];
  check_ok(jx_safetensors_read_box(f, "grid@4:8,3:6", JX_I32, JX_SHAPE(4, 3),
                                   (const int64_t[]){0, 1}, (const int64_t[]){4, 1}, col, NULL,
                                   "test"));
  for (int i = 0; i < 4; i++) assert_int_equal(col[i], 100 + (4 + i) * 6 + 4);
  jx_safetensors_close(f);

  /* whole arrays, assembled from the blocks */
  jx_tree *u = jx_checkpoint_load(dir, 1, NULL);
  assert_non_null(u);
  for (int i = 0; i < jx_tree_size(t); i++) assert_same(jx_tree_at(u, i), jx_tree_at(t, i));
  assert_null(jx_sharding_of(jx_tree_get(u, "rows")));
  /* onto other meshes and layouts */
  jx_tree *like = jx_tree_create();
  jx_tree_set(like, "rows", jx_device_put(jx_zeros(JX_F32, JX_SHAPE(8, 6)), k.cols2));
  jx_tree_set(like, "grid", jx_device_put(jx_zeros(JX_I32, JX_SHAPE(8, 6)), k.grid_t));
  jx_tree_set(like, "rep", jx_device_put(jx_zeros(JX_BF16, JX_SHAPE(12)), k.rows2));
  jx_tree_set(like, "plain", jx_device_put(jx_zeros(JX_I64, JX_SHAPE(3)), k.rep));
  jx_tree *v = jx_checkpoint_load(dir, 1, like);
  assert_non_null(v);
  for (int i = 0; i < jx_tree_size(like); i++) {
    jx_array *a = jx_tree_get(v, jx_tree_name(like, i));
    assert_ptr_equal(jx_sharding_of(a), jx_sharding_of(jx_tree_at(like, i)));
    assert_same(a, jx_tree_get(t, jx_tree_name(like, i)));
  }
  /* an array held whole by this process is written whole, as the
   * safetensors library reads it */
  check_ok(jx_checkpoint_save(dir, 2, t));
  snprintf(path, sizeof path, "%s/step_00000002/process_0.safetensors", dir);
  f = jx_safetensors_open(path, "test");
  assert_int_equal(jx_safetensors_count(f), 4);
  assert_string_equal(jx_safetensors_name(f, 0), "rows");
  jx_safetensors_close(f);
  jx_tree_release(v);
  jx_tree_release(like);
  jx_tree_release(u);
  jx_tree_release(t);
  free_meshes(&k);
}

/* Rewrites the manifest of dir's step 1 with edit applied. */
static void edit_manifest(const char *dir, void (*edit)(cJSON *)) {
  char path[600];
  snprintf(path, sizeof path, "%s/step_00000001/manifest.json", dir);
  cJSON *m = ckpt_read_json(path, NULL);
  assert_non_null(m);
  edit(m);
  char *text = cJSON_Print(m);
  check_ok(ckpt_write_text(path, text));
  free(text);
  cJSON_Delete(m);
}

static cJSON *entry_blocks(cJSON *m, int i) {
  return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "arrays"), i), "blocks");
}
static void drop_a_block(cJSON *m) { cJSON_DeleteItemFromArray(entry_blocks(m, 1), 2); }
static void overlap_blocks(cJSON *m) {
  cJSON *start = cJSON_GetObjectItem(cJSON_GetArrayItem(entry_blocks(m, 0), 1), "start");
  cJSON_ReplaceItemInArray(start, 0, cJSON_CreateNumber(1));
}
static void escape_the_step(cJSON *m) {
  cJSON *b = cJSON_GetArrayItem(entry_blocks(m, 0), 0);
  cJSON_ReplaceItemInObject(b, "file", cJSON_CreateString("../process_0.safetensors"));
}

static void damaged_block_checkpoints_are_named(void **state) {
  (void)state;
  const char *dir = fresh_dir("blocks-damaged");
  meshes k = make_meshes();
  jx_tree *t = block_tree(&k);
  char path[600];
  snprintf(path, sizeof path, "%s/step_00000001/process_0.safetensors", dir);

  check_ok(save_blocks(dir, 1, t));
  flip_byte(path, 60); /* inside grid's last block (4 x 3 i32), before rep's 24 bytes, plain's 24 */
  assert_null(jx_checkpoint_load(dir, 1, NULL));
  assert_error_has("process_0.safetensors' is corrupt: array 'grid' (block 'grid@4:8,3:6') does "
                   "not match its checksum");

  check_ok(save_blocks(dir, 1, t));
  struct stat st;
  stat(path, &st);
  assert_int_equal(truncate(path, st.st_size - 60), 0);
  assert_null(jx_checkpoint_load(dir, 1, NULL));
  assert_error_has("array 'grid': '");
  check_ok(save_blocks(dir, 1, t));
  assert_int_equal(truncate(path, st.st_size - 60), 0);
  assert_null(jx_checkpoint_load(dir, 1, NULL));
  assert_error_has("tensor 'grid@4:8,3:6': truncated");

  check_ok(save_blocks(dir, 1, t));
  assert_int_equal(unlink(path), 0);
  assert_null(jx_checkpoint_load(dir, 1, NULL));
  assert_error_has("array 'rows': its block file '");
  assert_null(jx_checkpoint_load(dir, 1, NULL));
  assert_error_has("process_0.safetensors' is missing");

  check_ok(save_blocks(dir, 1, t));
  edit_manifest(dir, drop_a_block);
  assert_null(jx_checkpoint_load(dir, 1, NULL));
  assert_error_has("manifest.json' is corrupt: array 'grid' is not covered by its blocks");

  check_ok(save_blocks(dir, 1, t));
  edit_manifest(dir, overlap_blocks);
  assert_null(jx_checkpoint_load(dir, 1, NULL));
  assert_error_has("array 'rows' has overlapping blocks");

  check_ok(save_blocks(dir, 1, t));
  edit_manifest(dir, escape_the_step);
  assert_null(jx_checkpoint_load(dir, 1, NULL));
  assert_error_has("array 'rows' has a malformed block entry");
  jx_tree_release(t);
  free_meshes(&k);
}

int main(void) {
  jx_set_cpu_device_count(8);
  snprintf(root, sizeof root, "%s/jx-ckpt-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(root)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(round_trip_is_exact, setup, teardown),
      cmocka_unit_test_setup_teardown(restore_onto_another_mesh, setup, teardown),
      cmocka_unit_test_setup_teardown(reads_the_safetensors_library, setup, teardown),
      cmocka_unit_test_setup_teardown(crash_mid_save_keeps_the_last_good_step, setup, teardown),
      cmocka_unit_test_setup_teardown(damaged_checkpoints_are_named, setup, teardown),
      cmocka_unit_test_setup_teardown(async_save_completes, setup, teardown),
      cmocka_unit_test_setup_teardown(blocks_are_written_once_and_restore_anywhere, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(damaged_block_checkpoints_are_named, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (rc == 0 && system(cmd) != 0) rc = 1;
  return rc;
}
