/* jx_strided_copy (src/prims/strided_copy.c), the kernel of broadcast_in_dim,
 * transpose and rev, against the definition out[i] = src[sum_d i_d st_d]
 * evaluated element by element: every element size, merged and unmerged
 * dimensions, broadcasts, negative strides, tiled transposes with ragged
 * edges, and copies large enough to be split over the thread pool. */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "prims/strided_copy.h"

/* out[i] by the definition, into want */
static void reference(char *want, jx_shape s, const char *src, const int64_t *st, size_t es) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; d++) n *= s.dims[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t rem = i, off = 0;
    for (int d = s.rank - 1; d >= 0; d--) {
      off += (rem % s.dims[d]) * st[d];
      rem /= s.dims[d];
    }
    memcpy(want + (size_t)i * es, src + off * (int64_t)es, es);
  }
}

/* The copy of a source of src_elems elements (the base at element `base`)
 * equals the reference. */
static void check(jx_shape s, const int64_t *st, int64_t src_elems, int64_t base, size_t es) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; d++) n *= s.dims[d];
  char *src = malloc((size_t)src_elems * es + 1);
  char *got = malloc((size_t)n * es + 1), *want = malloc((size_t)n * es + 1);
  assert_non_null(src);
  assert_non_null(got);
  assert_non_null(want);
  for (size_t k = 0; k < (size_t)src_elems * es; k++) src[k] = (char)(k * 131 + k / 7);
  memset(got, 0x5a, (size_t)n * es);
  reference(want, s, src + base * (int64_t)es, st, es);
  jx_strided_copy(got, s, src + base * (int64_t)es, st, es);
  assert_memory_equal(got, want, (size_t)n * es);
  free(src);
  free(got);
  free(want);
}

static void row_major(jx_shape s, int64_t *st) {
  int64_t acc = 1;
  for (int d = s.rank - 1; d >= 0; d--) {
    st[d] = acc;
    acc *= s.dims[d];
  }
}

static void test_transposes(void **state) {
  (void)state;
  const size_t sizes[] = {1, 2, 4, 8, 3};
  for (int k = 0; k < 5; k++) {
    /* a 2-D transpose with ragged tiles, small and split over threads */
    jx_shape in = {2, {37, 45}};
    int64_t own[JX_MAX_RANK];
    row_major(in, own);
    check((jx_shape){2, {45, 37}}, (int64_t[]){own[1], own[0]}, 37 * 45, 0, sizes[k]);
    jx_shape big = {2, {700, 531}};
    row_major(big, own);
    check((jx_shape){2, {531, 700}}, (int64_t[]){own[1], own[0]}, 700 * 531, 0, sizes[k]);
    /* the heads' transpose: [b, t, h, d] -> [b, h, t, d] (runs of d) */
    jx_shape heads = {4, {3, 50, 8, 32}};
    row_major(heads, own);
    check((jx_shape){4, {3, 8, 50, 32}}, (int64_t[]){own[0], own[2], own[1], own[3]},
          3 * 50 * 8 * 32, 0, sizes[k]);
    /* a 3-D rotation whose last dimension is strided */
    jx_shape cube = {3, {5, 40, 33}};
    row_major(cube, own);
    check((jx_shape){3, {33, 5, 40}}, (int64_t[]){own[2], own[0], own[1]}, 5 * 40 * 33, 0,
          sizes[k]);
  }
}

static void test_broadcasts_and_reversals(void **state) {
  (void)state;
  const size_t sizes[] = {1, 2, 4, 8, 6};
  for (int k = 0; k < 5; k++) {
    /* a bias along the last dimension, a column along the first, a scalar */
    check((jx_shape){3, {4, 60, 256}}, (int64_t[]){0, 0, 1}, 256, 0, sizes[k]);
    check((jx_shape){3, {16, 8, 128}}, (int64_t[]){8, 1, 0}, 128, 0, sizes[k]);
    check((jx_shape){2, {1024, 1100}}, (int64_t[]){1, 0}, 1024, 0, sizes[k]);
    check((jx_shape){2, {7, 9}}, (int64_t[]){0, 0}, 1, 0, sizes[k]);
    /* reversed dimensions start at their last element */
    check((jx_shape){2, {6, 10}}, (int64_t[]){10, -1}, 60, 9, sizes[k]);
    check((jx_shape){3, {4, 5, 6}}, (int64_t[]){-30, 6, -1}, 120, 3 * 30 + 5, sizes[k]);
    /* size-1 dimensions, rank 0, and an empty copy */
    check((jx_shape){4, {1, 3, 1, 4}}, (int64_t[]){99, 4, 77, 1}, 12, 0, sizes[k]);
    check((jx_shape){0, {0}}, (int64_t[]){0}, 1, 0, sizes[k]);
    check((jx_shape){2, {0, 5}}, (int64_t[]){5, 1}, 1, 0, sizes[k]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transposes),
      cmocka_unit_test(test_broadcasts_and_reversals),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
