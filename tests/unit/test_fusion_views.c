/* Views read through inside fused kernels (docs/compiler.md, "What fuses"):
 * a slice (strided, the last dim, size-1 dims, empty), a transpose, a
 * reshape, squeeze or expand_dims that maps onto strides, chains of them,
 * mixed with elementwise ops and row and column reductions. They move
 * data only, so the jitted program must give the eager bits exactly; and
 * every equation of such a chain, the views included, runs inside one
 * kernel (before, each view was a separate eager step that materialized
 * its result, and it cut the chain into two kernels or more). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"
#include "fusion_check.h"

/* ((x[1::2, 3::3] + y) * 1.5): a strided slice, read in place */
static void strided_slice_chain(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *s = jx_slice(in[0], JX_SHAPE(1, 3), JX_SHAPE(7, 42), JX_SHAPE(2, 3));
  out[0] = jx_mul(jx_add(s, in[1]), jx_scalar(jx_dtype_of(in[0]), 1.5));
}

static void strided_slices(void **state) {
  (void)state;
  for (int d = 0; d < 2; d++) {
    jx_dtype dt = d ? JX_F64 : JX_F32;
    jx_fn *f = jx_fn_create("strided_slice_chain", 2, 1, strided_slice_chain, NULL);
    jx_array *in[2] = {values(dt, JX_SHAPE(7, 42), 1), values(dt, JX_SHAPE(3, 13), 2)};
    expect_one_kernel(jit_matches_eager(f, 2, in, 1));
    jx_release(in[0]);
    jx_release(in[1]);
    jx_fn_release(f);
  }
}

/* q * k + v of a fused qkv projection split along the last dim: three
 * loads of one array at three offsets */
static void qkv_split(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *q = jx_slice(in[0], JX_SHAPE(0, 0), JX_SHAPE(8, 32), JX_SHAPE());
  jx_array *k = jx_slice(in[0], JX_SHAPE(0, 32), JX_SHAPE(8, 64), JX_SHAPE());
  jx_array *v = jx_slice(in[0], JX_SHAPE(0, 64), JX_SHAPE(8, 96), JX_SHAPE());
  out[0] = jx_add(jx_mul(q, k), v);
}

static void slices_of_one_array(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("qkv_split", 1, 1, qkv_split, NULL);
  jx_array *x = values(JX_F32, JX_SHAPE(8, 96), 3);
  expect_one_kernel(jit_matches_eager(f, 1, &x, 1));
  jx_release(x);
  jx_fn_release(f);
}

/* sum(exp(x[:, 5:37]) * y, -1): the last dim sliced, feeding a row reduction */
static void sliced_row_sum(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *s = jx_slice(in[0], JX_SHAPE(0, 5), JX_SHAPE(6, 37), JX_SHAPE());
  out[0] = jx_sum(jx_mul(jx_exp(s), in[1]), JX_AXES(-1), 0);
}

/* sum(transpose(x) * 2 + y, 0): a transpose feeding a column reduction */
static void transposed_col_sum(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *t = jx_transpose(in[0], JX_AXES(1, 0));
  out[0] = jx_sum(jx_add(jx_mul(t, jx_scalar(JX_F32, 2)), in[1]), JX_AXES(0), 0);
}

static void views_feeding_reductions(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("sliced_row_sum", 2, 1, sliced_row_sum, NULL);
  jx_array *in[2] = {values(JX_F32, JX_SHAPE(6, 40), 4), values(JX_F32, JX_SHAPE(6, 32), 5)};
  expect_one_kernel(jit_matches_eager(f, 2, in, 1));
  jx_release(in[0]);
  jx_release(in[1]);
  jx_fn_release(f);

  f = jx_fn_create("transposed_col_sum", 2, 1, transposed_col_sum, NULL);
  in[0] = values(JX_F32, JX_SHAPE(40, 300), 6);
  in[1] = values(JX_F32, JX_SHAPE(300, 40), 7);
  expect_one_kernel(jit_matches_eager(f, 2, in, 1));
  jx_release(in[0]);
  jx_release(in[1]);
  jx_fn_release(f);
}

/* reshapes that split and merge dims, of an array and of a slice of one,
 * squeeze and expand_dims */
static void reshape_chain(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  /* first: a view of another shape in the middle would end the group */
  jx_array *c = jx_squeeze(jx_expand_dims(in[1], 0), JX_AXES(0)); /* [12,10] */
  jx_array *merged = jx_reshape(in[0], JX_SHAPE(24, 10));         /* [4,6,10] */
  jx_array *rows = jx_slice(in[0], JX_SHAPE(1, 0, 0), JX_SHAPE(3, 6, 10), JX_SHAPE());
  jx_array *split = jx_reshape(rows, JX_SHAPE(12, 10)); /* [2,6,10] */
  jx_array *a = jx_add(jx_slice(merged, JX_SHAPE(6, 0), JX_SHAPE(18, 10), JX_SHAPE()), split);
  out[0] = jx_sub(a, c);
}

/* a reshape that merges non-contiguous dims (of a transpose) cannot be a
 * strided read: it runs as it is and the kernel reads its result */
static void reshape_of_transpose(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *t = jx_reshape(jx_transpose(in[0], JX_AXES(1, 0)), JX_SHAPE(24));
  out[0] = jx_add(jx_mul(t, t), jx_scalar(JX_F32, 1));
}

/* the transpose [4,6] of x [6,4] reshaped to [2,2,6]: splitting one of its
 * dims (stride 1 in x) is a strided view, read through */
static void split_of_transpose(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *t = jx_reshape(jx_transpose(in[0], JX_AXES(1, 0)), JX_SHAPE(2, 2, 6));
  out[0] = jx_exp(jx_add(t, jx_scalar(JX_F32, 1)));
}

static void reshapes(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("reshape_chain", 2, 1, reshape_chain, NULL);
  jx_array *in[2] = {values(JX_F32, JX_SHAPE(4, 6, 10), 8), values(JX_F32, JX_SHAPE(12, 10), 9)};
  expect_one_kernel(jit_matches_eager(f, 2, in, 1));
  jx_release(in[0]);
  jx_release(in[1]);
  jx_fn_release(f);

  f = jx_fn_create("reshape_of_transpose", 1, 1, reshape_of_transpose, NULL);
  jx_array *x = values(JX_F32, JX_SHAPE(6, 4), 10);
  plan r = jit_matches_eager(f, 1, &x, 1);
  if (r.kernels >= 0) assert_int_equal(r.eager, 2); /* the transpose and reshape ran */
  jx_fn_release(f);

  f = jx_fn_create("split_of_transpose", 1, 1, split_of_transpose, NULL);
  expect_one_kernel(jit_matches_eager(f, 1, &x, 1));
  jx_release(x);
  jx_fn_release(f);
}

/* empty slices, size-1 dims and an element read as a scalar */
static void empty_slice(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *s = jx_slice(in[0], JX_SHAPE(2, 0), JX_SHAPE(2, 40), JX_SHAPE());
  out[0] = jx_mul(jx_add(s, s), s);
}

static void size_one_dims(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *row = jx_slice(in[0], JX_SHAPE(3, 0), JX_SHAPE(4, 40), JX_SHAPE());  /* [1,40] */
  jx_array *col = jx_slice(in[0], JX_SHAPE(0, 39), JX_SHAPE(1, 40), JX_SHAPE()); /* [1,1] */
  jx_array *one = jx_reshape(col, JX_SHAPE());                                   /* x[0,39] */
  out[0] = jx_add(jx_mul(row, in[1]), one);
}

static void edge_cases(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("empty_slice", 1, 1, empty_slice, NULL);
  jx_array *x = values(JX_F32, JX_SHAPE(5, 40), 11);
  jit_matches_eager(f, 1, &x, 1);
  jx_fn_release(f);

  f = jx_fn_create("size_one_dims", 2, 1, size_one_dims, NULL);
  jx_array *in[2] = {x, values(JX_F32, JX_SHAPE(1, 40), 12)};
  expect_one_kernel(jit_matches_eager(f, 2, in, 1));
  jx_release(in[1]);
  jx_release(x);
  jx_fn_release(f);
}

/* a view that is also an output: it is stored (materialized) once, by the
 * kernel that reads it, and still read through by the rest */
static void view_as_output(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] =
      jx_transpose(jx_slice(in[0], JX_SHAPE(0, 2), JX_SHAPE(9, 30), JX_SHAPE(1, 2)), JX_AXES(1, 0));
  out[1] = jx_tanh(jx_add(out[0], in[1]));
}

static void views_that_are_outputs(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("view_as_output", 2, 2, view_as_output, NULL);
  jx_array *in[2] = {values(JX_F32, JX_SHAPE(9, 30), 13), values(JX_F32, JX_SHAPE(14, 9), 14)};
  plan r = jit_matches_eager(f, 2, in, 2);
  if (r.kernels >= 0) assert_int_equal(r.kernels, 1);
  jx_release(in[0]);
  jx_release(in[1]);
  jx_fn_release(f);
}

/* bf16 and bool views: the loads keep their element sizes */
static void bf16_and_bool(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_astype(in[0], JX_BF16);
  jx_array *s = jx_slice(h, JX_SHAPE(1, 1), JX_SHAPE(5, 33), JX_SHAPE(1, 2));  /* [4,16] */
  jx_array *m = jx_transpose(jx_gt(h, jx_scalar(JX_BF16, 0)), JX_AXES(1, 0));  /* [33,5] */
  jx_array *mm = jx_slice(m, JX_SHAPE(1, 1), JX_SHAPE(33, 5), JX_SHAPE(2, 1)); /* [16,4] */
  out[0] = jx_where(jx_transpose(mm, JX_AXES(1, 0)), jx_exp(s), jx_neg(s));
}

static void other_dtypes(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("bf16_and_bool", 1, 1, bf16_and_bool, NULL);
  jx_array *x = values(JX_F32, JX_SHAPE(5, 33), 15);
  jit_matches_eager(f, 1, &x, 1);
  jx_release(x);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(strided_slices),
      cmocka_unit_test(slices_of_one_array),
      cmocka_unit_test(views_feeding_reductions),
      cmocka_unit_test(reshapes),
      cmocka_unit_test(edge_cases),
      cmocka_unit_test(views_that_are_outputs),
      cmocka_unit_test(other_dtypes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
