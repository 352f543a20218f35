/* Rejections of the shape, slicing and indexing ops: each bad call returns a
 * poisoned array and records a message naming the op, the shapes and the bad
 * value. Also checks that a primitive with no operands (iota) binds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */
#include <jx/jx.h>

#include "trace/dispatch.h"
#include "test_util.h"

/* The result is poisoned with status st and the message holds every needle. */
static void expect_error(jx_array *r, jx_status st, const char *n1, const char *n2,
                         const char *n3) {
  assert_true(jx_is_poisoned(r));
  assert_int_equal(jx_last_status(), st);
  const char *m = jx_last_error();
  if (n1 && !strstr(m, n1)) fail_msg("'%s' not in: %s", n1, m);
  if (n2 && !strstr(m, n2)) fail_msg("'%s' not in: %s", n2, m);
  if (n3 && !strstr(m, n3)) fail_msg("'%s' not in: %s", n3, m);
}

static void reshape_wrong_size(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(2, 3));
  expect_error(jx_reshape(a, JX_SHAPE(4, 2)), JX_ERR_SHAPE, "jx_reshape:", "f32[2,3]", "[4,2]");
  assert_non_null(strstr(jx_last_error(), "test_shape_errors.c:"));
  jx_clear_error();
  expect_error(jx_reshape(a, JX_SHAPE(4, -1)), JX_ERR_SHAPE, "jx_reshape:", "[4,-1]", "6 elements");
}

static void reshape_two_inferred_dims(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(2, 3));
  expect_error(jx_reshape(a, JX_SHAPE(-1, -1)), JX_ERR_SHAPE, "jx_reshape:", "only one -1",
               "[-1,-1]");
}

static void transpose_not_a_permutation(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_I32, JX_SHAPE(2, 3, 4));
  expect_error(jx_transpose(a, JX_AXES(0, 0, 1)), JX_ERR_INVALID_ARGUMENT,
               "jx_transpose:", "not a permutation", "i32[2,3,4]");
  jx_clear_error();
  expect_error(jx_transpose(a, JX_AXES(1, 0)), JX_ERR_INVALID_ARGUMENT,
               "jx_transpose:", "permutation", "i32[2,3,4]");
  jx_clear_error();
  expect_error(jx_transpose(a, JX_AXES(0, 1, 3)), JX_ERR_INVALID_ARGUMENT,
               "jx_transpose:", "axis 3", "rank 3");
}

static void squeeze_non_unit_dim(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(1, 3));
  expect_error(jx_squeeze(a, JX_AXES(1)), JX_ERR_SHAPE, "jx_squeeze:", "axis 1 of f32[1,3]",
               "size is 3");
}

static void slice_out_of_range(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(4, 5));
  expect_error(jx_slice(a, JX_SHAPE(0, 2), JX_SHAPE(4, 6), JX_SHAPE()), JX_ERR_INVALID_ARGUMENT,
               "jx_slice: dim 1 of f32[4,5]", "stop 6", NULL);
  jx_clear_error();
  expect_error(jx_slice(a, JX_SHAPE(3, 0), JX_SHAPE(2, 5), JX_SHAPE()), JX_ERR_INVALID_ARGUMENT,
               "jx_slice: dim 0", "start 3", "stop 2");
  jx_clear_error();
  expect_error(jx_slice(a, JX_SHAPE(0), JX_SHAPE(4), JX_SHAPE()), JX_ERR_SHAPE,
               "jx_slice:", "one entry per dim of f32[4,5]", NULL);
}

static void concatenate_mismatch(void **state) {
  (void)state;
  jx_array *xs[2] = {jx_zeros(JX_F32, JX_SHAPE(2, 3)), jx_zeros(JX_F32, JX_SHAPE(3))};
  expect_error(jx_concatenate(2, xs, 0), JX_ERR_SHAPE, "jx_concatenate:", "same rank", "f32[3]");
  jx_clear_error();
  xs[1] = jx_zeros(JX_I32, JX_SHAPE(2, 4));
  expect_error(jx_concatenate(2, xs, 0), JX_ERR_SHAPE, "jx_concatenate:", "i32[2,4]", "f32[2,3]");
  jx_clear_error();
  assert_false(jx_is_poisoned(jx_concatenate(2, xs, 1))); /* fine along axis 1 */
  expect_error(jx_concatenate(0, xs, 0), JX_ERR_INVALID_ARGUMENT, "jx_concatenate:", "at least one",
               NULL);
}

static void broadcast_to_incompatible(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(3, 2));
  expect_error(jx_broadcast_to(a, JX_SHAPE(4, 3, 3)), JX_ERR_SHAPE, "jx_broadcast_to:", "f32[3,2]",
               "[4,3,3]");
  jx_clear_error();
  expect_error(jx_broadcast_to(a, JX_SHAPE(2)), JX_ERR_SHAPE, "jx_broadcast_to:", "f32[3,2]",
               "shape [2]");
}

static void gather_bad_index_vector_dim(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(5, 3));
  jx_array *idx = jx_zeros(JX_I32, JX_SHAPE(4, 1));
  jx_gather_dims d = {JX_AXES(1), JX_AXES(0), JX_AXES(0), 3};
  expect_error(jx_gather(a, idx, &d, JX_SHAPE(1, 3), JX_GATHER_CLIP), JX_ERR_INVALID_ARGUMENT,
               "gather: index_vector_dim 3", "[0, 2]", "i32[4,1]");
  jx_clear_error();
  d.index_vector_dim = 0; /* vectors of length 4, but one start_index_map entry */
  expect_error(jx_gather(a, idx, &d, JX_SHAPE(1, 3), JX_GATHER_CLIP), JX_ERR_SHAPE,
               "gather: start_index_map [0]", "length 4", "index_vector_dim 0");
  jx_clear_error();
  d.index_vector_dim = 1;
  assert_false(jx_is_poisoned(jx_gather(a, idx, &d, JX_SHAPE(1, 3), JX_GATHER_CLIP)));
  jx_array *fidx = jx_zeros(JX_F32, JX_SHAPE(4, 1));
  expect_error(jx_gather(a, fidx, &d, JX_SHAPE(1, 3), JX_GATHER_CLIP), JX_ERR_DTYPE,
               "gather: indices f32[4,1]", "integer", NULL);
}

static void dynamic_slice_wrong_start_count(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(4, 5, 6));
  jx_array *st[3] = {jx_scalar(JX_I32, 0), jx_scalar(JX_I32, 1), jx_scalar(JX_I32, 2)};
  expect_error(jx_dynamic_slice(a, st, JX_SHAPE(2, 2)), JX_ERR_SHAPE,
               "jx_dynamic_slice:", "f32[4,5,6] has 3 dims but 2", NULL);
  jx_clear_error();
  /* the primitive itself counts its start operands */
  jx_params p = {0};
  p.l[0].n = 3;
  p.l[0].v[0] = p.l[0].v[1] = p.l[0].v[2] = 1;
  jx_array *in[3] = {a, st[0], st[1]};
  expect_error(jx_bind1(&jx_prim_dynamic_slice, 3, in, &p), JX_ERR_INVALID_ARGUMENT,
               "dynamic_slice: 2 start indices", "f32[4,5,6] of rank 3", NULL);
  jx_clear_error();
  jx_array *fst[3] = {st[0], jx_scalar(JX_F32, 1), st[2]};
  expect_error(jx_dynamic_slice(a, fst, JX_SHAPE(1, 1, 1)), JX_ERR_DTYPE,
               "jx_dynamic_slice:", "start 1 is f32[]", NULL);
}

static void scatter_and_pad_errors(void **state) {
  (void)state;
  jx_array *a = jx_zeros(JX_F32, JX_SHAPE(5, 3));
  jx_array *idx = jx_zeros(JX_I32, JX_SHAPE(2, 1));
  jx_scatter_dims d = {JX_AXES(1), JX_AXES(0), JX_AXES(0), 1};
  expect_error(
      jx_scatter(a, idx, jx_zeros(JX_F32, JX_SHAPE(3, 3)), &d, JX_SCATTER_ADD, JX_SCATTER_DROP),
      JX_ERR_SHAPE, "scatter_add: updates f32[3,3]", "dim 0: 3 vs 2", NULL);
  jx_clear_error();
  jx_array *b = jx_zeros(JX_BOOL, JX_SHAPE(5, 3));
  expect_error(
      jx_scatter(b, idx, jx_zeros(JX_BOOL, JX_SHAPE(2, 3)), &d, JX_SCATTER_ADD, JX_SCATTER_DROP),
      JX_ERR_DTYPE, "scatter_add: operand bool[5,3]", "numeric", NULL);
  jx_clear_error();
  expect_error(
      jx_pad_general(a, jx_scalar(JX_F32, 0), JX_SHAPE(-3, 0), JX_SHAPE(-3, 0), JX_SHAPE(0, 0)),
      JX_ERR_SHAPE, "pad: dim 0 of f32[5,3]", "size -1", NULL);
  jx_clear_error();
  expect_error(jx_expand_dims(a, 3), JX_ERR_INVALID_ARGUMENT, "jx_expand_dims:", "axis 3",
               "rank 3");
}

static void iota_binds_with_no_operands(void **state) {
  (void)state;
  jx_params p = {0};
  p.dtype = JX_I32;
  p.l[0].n = 2;
  p.l[0].v[0] = 2;
  p.l[0].v[1] = 3;
  p.i[0] = 1;
  jx_array *r = jx_bind1(&jx_prim_iota, 0, NULL, &p);
  assert_false(jx_is_poisoned(r));
  int32_t got[6], want[6] = {0, 1, 2, 0, 1, 2};
  assert_int_equal(jx_read(r, got, sizeof got), JX_OK);
  assert_memory_equal(got, want, sizeof want);
  p.i[0] = 2;
  expect_error(jx_bind1(&jx_prim_iota, 0, NULL, &p), JX_ERR_INVALID_ARGUMENT, "iota: dimension 2",
               "i32[2,3]", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(reshape_wrong_size, setup, teardown),
      cmocka_unit_test_setup_teardown(reshape_two_inferred_dims, setup, teardown),
      cmocka_unit_test_setup_teardown(transpose_not_a_permutation, setup, teardown),
      cmocka_unit_test_setup_teardown(squeeze_non_unit_dim, setup, teardown),
      cmocka_unit_test_setup_teardown(slice_out_of_range, setup, teardown),
      cmocka_unit_test_setup_teardown(concatenate_mismatch, setup, teardown),
      cmocka_unit_test_setup_teardown(broadcast_to_incompatible, setup, teardown),
      cmocka_unit_test_setup_teardown(gather_bad_index_vector_dim, setup, teardown),
      cmocka_unit_test_setup_teardown(dynamic_slice_wrong_start_count, setup, teardown),
      cmocka_unit_test_setup_teardown(scatter_and_pad_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(iota_binds_with_no_operands, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
