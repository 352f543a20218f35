/* Datasets and loaders: every example once per epoch in the PRNG's order,
 * the same batches for the same seed, seeking to a position, sharded
 * batches, Fashion-MNIST as Debian ships it, and byte windows of text. */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

enum { N = 40, B = 8 };

/* Examples 0..N-1: x[i] = (i, 10 i), y[i] = i. */
static jx_dataset *numbered(void) {
  float x[N][2];
  int32_t y[N];
  for (int i = 0; i < N; i++) {
    x[i][0] = (float)i;
    x[i][1] = (float)(10 * i);
    y[i] = i;
  }
  jx_array *a[2] = {jx_array_from(JX_F32, JX_SHAPE(N, 2), x),
                    jx_array_from(JX_I32, JX_SHAPE(N), y)};
  return jx_dataset_from_arrays(2, a);
}

static void batch_ids(jx_loader *l, int32_t *ids) {
  jx_array *out[2];
  check_ok(jx_loader_next(l, out));
  float x[B][2];
  check_ok(jx_read(out[0], x, sizeof x));
  check_ok(jx_read(out[1], ids, sizeof(int32_t) * B));
  for (int i = 0; i < B; i++) {
    assert_true(x[i][0] == (float)ids[i]); /* rows stay together */
    assert_true(x[i][1] == (float)(10 * ids[i]));
  }
}

static void epochs_follow_the_prng(void **state) {
  (void)state;
  jx_dataset *d = numbered();
  jx_loader_options o = {.batch = B, .seed = 5, .shuffle = 1};
  jx_loader *l = jx_loader_create(d, &o);
  assert_int_equal(jx_loader_batches_per_epoch(l), N / B);
  int32_t ids[B], first[N];
  for (int epoch = 0; epoch < 3; epoch++) {
    int32_t want[N];
    jx_array *key = jx_random_fold_in(jx_random_key(5), (uint32_t)epoch);
    check_ok(jx_read(jx_random_permutation(key, N), want, sizeof want));
    int seen[N] = {0};
    for (int b = 0; b < N / B; b++) {
      batch_ids(l, ids);
      for (int i = 0; i < B; i++) {
        assert_int_equal(ids[i], want[b * B + i]);
        seen[ids[i]]++;
        if (epoch == 0) first[b * B + i] = ids[i];
      }
    }
    for (int i = 0; i < N; i++) assert_int_equal(seen[i], 1);
    if (epoch == 1) assert_memory_not_equal(first, want, sizeof want); /* reshuffled */
  }
  assert_int_equal(jx_loader_position(l), 3 * (N / B));
  /* a loader sought to a position gives what the first gave there */
  jx_loader *m = jx_loader_create(d, &o);
  check_ok(jx_loader_seek(m, 2));
  int32_t again[B];
  batch_ids(m, again);
  assert_memory_equal(again, first + 2 * B, sizeof again);
  check_ok(jx_loader_seek(m, 0));
  batch_ids(m, again);
  assert_memory_equal(again, first, sizeof again);
  jx_loader_release(m);
  jx_loader_release(l);
  /* unshuffled: in order */
  jx_loader_options in_order = {.batch = B};
  l = jx_loader_create(d, &in_order);
  batch_ids(l, ids);
  for (int i = 0; i < B; i++) assert_int_equal(ids[i], i);
  jx_loader_release(l);
  jx_dataset_release(d);
}

static void batches_are_laid_out(void **state) {
  (void)state;
  jx_dataset *d = numbered();
  jx_mesh *m = jx_mesh_create_on(JX_SHAPE(4), (const char *[]){"data"}, (const int[]){0, 1, 2, 3});
  jx_sharding *rows = jx_sharding_create(m, "data");
  jx_loader_options o = {.batch = B, .seed = 1, .shuffle = 1, .sharding = rows, .prefetch = 3};
  jx_loader *l = jx_loader_create(d, &o);
  jx_array *out[2];
  check_ok(jx_loader_next(l, out));
  assert_ptr_equal(jx_sharding_of(out[0]), rows);
  assert_ptr_equal(jx_sharding_of(out[1]), rows);
  assert_int_equal(jx_shape_of(jx_array_shard(out[0], 3)).dims[0], B / 4);
  int64_t first = -1; /* one process builds every row (tests/mpi/test_mpi_data.c: several) */
  assert_int_equal(jx_loader_local_rows(l, &first), B);
  assert_int_equal(first, 0);
  jx_loader_release(l);

  o.batch = 6; /* 6 rows do not split over 4 devices */
  assert_null(jx_loader_create(d, &o));
  assert_error_has("has size 6, which the mesh axes 'data' (4 devices) do not divide");
  o.batch = N + 1;
  assert_null(jx_loader_create(d, &o));
  assert_error_has("batch 41 does not fit a dataset of 40 examples");
  jx_sharding_release(rows);
  jx_mesh_release(m);
  jx_dataset_release(d);
  jx_array *bad[2] = {jx_zeros(JX_F32, JX_SHAPE(3, 2)), jx_zeros(JX_F32, JX_SHAPE(4))};
  assert_null(jx_dataset_from_arrays(2, bad));
  assert_error_has("array 1 has 4 examples but array 0 has 3");
}

static void fashion_mnist_as_shipped(void **state) {
  (void)state;
  if (access("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", R_OK) != 0) {
    fprintf(stderr, "SKIP: dataset-fashion-mnist is not installed (scripts/install-deps.sh)\n");
    skip();
  }
  jx_dataset *train = jx_dataset_fashion_mnist(NULL, 1);
  assert_non_null(train);
  assert_int_equal(jx_dataset_size(train), 60000);
  int32_t labels[10];
  jx_array *first = jx_slice(jx_dataset_array(train, 1), JX_SHAPE(0), JX_SHAPE(10), JX_SHAPE());
  check_ok(jx_read(first, labels, sizeof labels));
  const int32_t want[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5}; /* NumPy on the same files */
  assert_memory_equal(labels, want, sizeof want);
  jx_dataset *test = jx_dataset_fashion_mnist(NULL, 0);
  jx_array *images = jx_dataset_array(test, 0);
  assert_int_equal(jx_shape_of(images).rank, 3);
  assert_true(jx_item(jx_sum(jx_astype(images, JX_I64), JX_AXES(), 0)) == 573469082.0);
  jx_dataset_release(test);
  jx_dataset_release(train);
  assert_null(jx_dataset_fashion_mnist("/nonexistent", 1));
  assert_error_has("cannot open '/nonexistent/train-images-idx3-ubyte(.gz)'");
}

static void text_windows_predict_the_next_byte(void **state) {
  (void)state;
  char path[] = "/tmp/jx-text-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "abcdefghij", 10), 10);
  close(fd);
  const char *paths[1] = {path};
  jx_dataset *d = jx_dataset_text(1, paths, 3);
  unlink(path);
  assert_int_equal(jx_dataset_size(d), 3); /* (10 - 1) / 3 windows */
  int32_t x[9], y[9];
  check_ok(jx_read(jx_dataset_array(d, 0), x, sizeof x));
  check_ok(jx_read(jx_dataset_array(d, 1), y, sizeof y));
  for (int i = 0; i < 9; i++) {
    assert_int_equal(x[i], 'a' + i);
    assert_int_equal(y[i], 'a' + i + 1);
  }
  jx_dataset_release(d);
  assert_null(jx_dataset_text(1, (const char *[]){"/nonexistent.txt"}, 4));
  assert_error_has("cannot open '/nonexistent.txt'");
}

int main(void) {
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(epochs_follow_the_prng, setup, teardown),
      cmocka_unit_test_setup_teardown(batches_are_laid_out, setup, teardown),
      cmocka_unit_test_setup_teardown(fashion_mnist_as_shipped, setup, teardown),
      cmocka_unit_test_setup_teardown(text_windows_predict_the_next_byte, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
