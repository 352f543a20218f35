/* Checkpoints of jobs of many processes, run by tests/mpi/run_mpi_io_test.sh:
 *   test_mpi_io save DIR   (mpirun -np 2, 2 devices each) saves a tree of
 *       arrays split over rows across processes, over columns across
 *       processes, in 2-D blocks, replicated, and on one device; checks that
 *       each process wrote exactly its distinct blocks (tensor names and
 *       file sizes), then loads it back onto the same layouts, onto other
 *       meshes (where each process reads parts of blocks of both files),
 *       unsharded, and whole (like NULL); an async save too.
 *   test_mpi_io load DIR   (-np 1, 2 devices) restores that checkpoint in
 *       one process onto a 2-device mesh.
 * Every result is compared byte for byte with the global values, which
 * every process computes the same way (gathered with jx_process_allgather
 * where a process holds only part of an array). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jx/jx.h>

#include "mpi_check.h"

#include "io/safetensors.h"

enum { NARRAYS = 6 };
static const char *const NAMES[NARRAYS] = {"x", "w", "g", "r", "d", "step"};

/* The global values, the same on every process. */
static jx_array *global(int i) {
  switch (i) {
  case 0: return jx_reshape(jx_arange(JX_F32, 0, 32, 1), JX_SHAPE(8, 4));
  case 1: return jx_reshape(jx_arange(JX_F32, 0, 24, 0.5), JX_SHAPE(6, 8));
  case 2: return jx_reshape(jx_arange(JX_I32, 100, 148, 1), JX_SHAPE(8, 6));
  case 3: return jx_arange(JX_F32, 0, -6, -1);
  case 4: return jx_astype(jx_reshape(jx_arange(JX_F32, 1, 9, 1), JX_SHAPE(4, 2)), JX_BF16);
  default: return jx_full(JX_I64, JX_SHAPE(), 123456789012);
  }
}

/* 1 when a's global value equals want's, byte for byte */
static int same_value(jx_array *a, jx_array *want) {
  if (!a || jx_is_poisoned(a) || jx_dtype_of(a) != jx_dtype_of(want) || jx_size(a) != jx_size(want))
    return 0;
  jx_array *g = jx_process_allgather(a);
  size_t n = (size_t)jx_size(want) * jx_dtype_size(jx_dtype_of(want));
  char *x = malloc(n + 1), *y = malloc(n + 1);
  int ok = jx_read(g, x, n) == JX_OK && jx_read(want, y, n) == JX_OK && memcmp(x, y, n) == 0;
  free(x);
  free(y);
  return ok;
}

/* The tensors of a step's process_<p>.safetensors, in order, and its size. */
static void check_file(const char *dir, int p, const char *const *want, int n, long bytes) {
  char path[1024];
  snprintf(path, sizeof path, "%s/step_00000001/process_%d.safetensors", dir, p);
  jx_safetensors *f = jx_safetensors_open(path, "test");
  CHECK(f != NULL);
  if (!f) return;
  CHECK(jx_safetensors_count(f) == n);
  for (int i = 0; i < n && i < jx_safetensors_count(f); i++) {
    CHECK(strcmp(jx_safetensors_name(f, i), want[i]) == 0);
    if (strcmp(jx_safetensors_name(f, i), want[i]) != 0)
      fprintf(stderr, "process %d: tensor %d of %s is %s, not %s\n", me, i, path,
              jx_safetensors_name(f, i), want[i]);
  }
  jx_safetensors_close(f);
  /* the data section holds exactly those blocks: the header length is in
   * the first 8 bytes */
  FILE *fp = fopen(path, "rb");
  unsigned char len[8] = {0};
  CHECK(fp && fread(len, 1, 8, fp) == 8);
  if (fp) fclose(fp);
  long hlen = 0;
  for (int k = 7; k >= 0; k--) hlen = hlen * 256 + len[k];
  struct stat st;
  CHECK(stat(path, &st) == 0 && st.st_size - 8 - hlen == bytes);
}

/* Loads dir's step with each array laid out as `like` says, and checks the
 * layout and the values against scale * the global values (x only). */
static void check_load(const char *dir, int64_t step, jx_sharding *const *layout, float x_scale) {
  jx_scope_begin();
  jx_tree *like = jx_tree_create();
  for (int i = 0; i < NARRAYS; i++) {
    jx_array *z = jx_zeros(jx_dtype_of(global(i)), jx_shape_of(global(i)));
    jx_tree_set(like, NAMES[i], layout[i] ? jx_device_put(z, layout[i]) : z);
  }
  jx_tree *u = jx_checkpoint_load(dir, step, like);
  CHECK(u != NULL);
  for (int i = 0; u && i < NARRAYS; i++) {
    jx_array *a = jx_tree_get(u, NAMES[i]);
    CHECK(jx_sharding_of(a) == layout[i]);
    jx_array *want = i == 0 ? jx_mul(global(0), jx_scalar(JX_F32, x_scale)) : global(i);
    CHECK(same_value(a, want));
  }
  jx_tree_release(u);
  jx_tree_release(like);
  jx_scope_end();
}

static void check_load_whole(const char *dir, int64_t step) {
  jx_scope_begin();
  jx_tree *u = jx_checkpoint_load(dir, step, NULL);
  CHECK(u != NULL && jx_tree_size(u) == NARRAYS);
  for (int i = 0; u && i < NARRAYS; i++) {
    CHECK(jx_sharding_of(jx_tree_get(u, NAMES[i])) == NULL);
    CHECK(same_value(jx_tree_get(u, NAMES[i]), global(i)));
  }
  jx_tree_release(u);
  jx_scope_end();
}

/* 2 processes x 2 devices: devices 0, 1 on process 0, 2, 3 on process 1 */
static void save_and_restore(const char *dir) {
  const int order[] = {0, 1, 2, 3}, crossed[] = {0, 2, 1, 3};
  jx_mesh *rows4 = jx_mesh_create_on(JX_SHAPE(4), (const char *[]){"data"}, order);
  jx_mesh *m22 = jx_mesh_create_on(JX_SHAPE(2, 2), (const char *[]){"data", "model"}, order);
  /* the same grid with "model" across processes and "data" within them */
  jx_mesh *x22 = jx_mesh_create_on(JX_SHAPE(2, 2), (const char *[]){"data", "model"}, crossed);
  jx_sharding *saved[NARRAYS] = {
      jx_sharding_create(rows4, "data"),     /* x: 4 row blocks, 2 per process */
      jx_sharding_create(x22, "None,model"), /* w: a column half per process */
      jx_sharding_create(m22, "data,model"), /* g: 2 x 2 blocks */
      jx_sharding_create(m22, ""),           /* r: replicated everywhere */
      jx_sharding_create(m22, "data"),       /* d: a row half per process, 2 replicas each */
      NULL};                                 /* step: on one device */
  jx_tree *t = jx_tree_create();
  for (int i = 0; i < NARRAYS; i++)
    jx_tree_set(t, NAMES[i], saved[i] ? jx_device_put(global(i), saved[i]) : global(i));
  CHECK(jx_checkpoint_save(dir, 1, t) == JX_OK);
  CHECK(jx_checkpoint_latest(dir) == 1);

  /* each process wrote its distinct blocks and nothing else; process 0
   * writes what it holds whole (r, step) under the arrays' own names */
  const char *p0[] = {"x@0:2,0:4", "x@2:4,0:4", "w@0:6,0:4", "g@0:4,0:3",
                      "g@0:4,3:6", "r",         "d@0:2,0:2", "step"};
  const char *p1[] = {"x@4:6,0:4", "x@6:8,0:4", "w@0:6,4:8", "g@4:8,0:3", "g@4:8,3:6", "d@2:4,0:2"};
  check_file(dir, 0, p0, 8, 4 * (16 + 24 + 24 + 6) + 2 * 4 + 8);
  check_file(dir, 1, p1, 6, 4 * (16 + 24 + 24) + 2 * 4);
  char path[1024];
  snprintf(path, sizeof path, "%s/step_00000001/process_1.json", dir);
  CHECK(access(path, F_OK) != 0); /* the block lists were merged into the manifest */

  check_load(dir, 1, saved, 1);
  /* other layouts: x by columns across processes (each reads the left or
   * right half of all four row blocks, from both files), w by rows across
   * processes, g transposed (whole blocks of both files), r split across
   * processes, d on one device, step replicated */
  jx_sharding *other[NARRAYS] = {jx_sharding_create(x22, "None,model"),
                                 jx_sharding_create(m22, "data"),
                                 jx_sharding_create(m22, "model,data"),
                                 jx_sharding_create(x22, "model"),
                                 NULL,
                                 jx_sharding_create(rows4, "")};
  check_load(dir, 1, other, 1);
  check_load_whole(dir, 1);

  /* in the background, while the tree changes */
  jx_tree_set(t, "x", jx_device_put(jx_mul(global(0), jx_scalar(JX_F32, 3)), saved[0]));
  jx_checkpoint_job *job = jx_checkpoint_save_async(dir, 2, t);
  CHECK(job != NULL);
  jx_tree_set(t, "x", jx_device_put(global(0), saved[0]));
  CHECK(jx_checkpoint_wait(job) == JX_OK);
  CHECK(jx_checkpoint_latest(dir) == 2);
  check_load(dir, 2, other, 3);

  jx_tree_release(t);
  for (int i = 0; i < NARRAYS; i++) {
    jx_sharding_release(saved[i]);
    jx_sharding_release(other[i]);
  }
  jx_mesh_release(rows4);
  jx_mesh_release(m22);
  jx_mesh_release(x22);
}

/* 1 process x 2 devices: the checkpoint the 2 processes wrote */
static void restore_in_one_process(const char *dir) {
  jx_mesh *m2 = jx_mesh_create(JX_SHAPE(2), (const char *[]){"data"});
  jx_sharding *layout[NARRAYS] = {jx_sharding_create(m2, "data"),
                                  jx_sharding_create(m2, "None,data"),
                                  jx_sharding_create(m2, "None,data"),
                                  jx_sharding_create(m2, ""),
                                  NULL,
                                  jx_sharding_create(m2, "")};
  check_load(dir, 1, layout, 1);
  check_load(dir, 2, layout, 3);
  check_load_whole(dir, 1);
  for (int i = 0; i < NARRAYS; i++) jx_sharding_release(layout[i]);
  jx_mesh_release(m2);
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "save") && strcmp(argv[1], "load"))) {
    fprintf(stderr, "usage: test_mpi_io save|load DIR\n");
    return 2;
  }
  if (mpi_check_begin()) return 2;
  jx_scope_begin();
  if (strcmp(argv[1], "save") == 0) {
    CHECK(P == 2 && jx_local_device_count() == 2);
    if (P == 2) save_and_restore(argv[2]);
  } else {
    CHECK(P == 1 && jx_local_device_count() == 2);
    restore_in_one_process(argv[2]);
  }
  jx_scope_end();
  return mpi_check_end();
}
