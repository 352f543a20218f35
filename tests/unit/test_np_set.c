/* jnp.unique, nonzero, argwhere and one-argument where with a static size,
 * and jax.ops.segment_max / segment_min / segment_prod against JAX
 * (tests/golden/gen_np_surface.py): sorted output with NaNs, fill values,
 * padding and truncation, empty segments, gradients, under jit and vmap;
 * and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"
#include "unit/np_golden.h"

static void f_unique(jx_array *const *in, jx_array **out) {
  out[0] = jx_unique(in[0], 6, jx_scalar(JX_F32, -1));
}
static void f_unique_default_fill(jx_array *const *in, jx_array **out) {
  out[0] = jx_unique(in[0], 7, NULL);
}
static void f_unique_short(jx_array *const *in, jx_array **out) {
  out[0] = jx_unique(in[0], 2, NULL);
}
static void f_nonzero(jx_array *const *in, jx_array **out) {
  check_ok(jx_nonzero(in[0], 4, -1, out));
}
static void f_nonzero_pad(jx_array *const *in, jx_array **out) {
  check_ok(jx_nonzero(in[0], 5, 0, out));
}
static void f_nonzero_cut(jx_array *const *in, jx_array **out) {
  check_ok(jx_nonzero(in[0], 2, 0, out));
}
static void f_argwhere(jx_array *const *in, jx_array **out) { out[0] = jx_argwhere(in[0], 4, 0); }
static void f_where_one(jx_array *const *in, jx_array **out) {
  check_ok(jx_where_indices(in[0], 3, 7, out));
}
static void f_segment_max(jx_array *const *in, jx_array **out) {
  out[0] = jx_segment_max(in[0], in[1], 4);
}
static void f_segment_min(jx_array *const *in, jx_array **out) {
  out[0] = jx_segment_min(in[0], in[1], 4);
}
static void f_segment_prod(jx_array *const *in, jx_array **out) {
  out[0] = jx_segment_prod(in[0], in[1], 4);
}
static void f_segment_max3(jx_array *const *in, jx_array **out) {
  out[0] = jx_segment_max(in[0], in[1], 3);
}

static const np_case cases[] = {
    NP("unique", 1, 1, f_unique),
    NP("unique_default_fill", 1, 1, f_unique_default_fill),
    NP("unique_short", 1, 1, f_unique_short),
    NP("nonzero", 1, 2, f_nonzero),
    NP("nonzero_pad", 1, 2, f_nonzero_pad),
    NP("nonzero_cut", 1, 2, f_nonzero_cut),
    NP("argwhere", 1, 1, f_argwhere),
    NP("where_one", 1, 1, f_where_one),
    NP("segment_max", 2, 1, f_segment_max),
    NP("segment_min", 2, 1, f_segment_min),
    NP("segment_prod", 2, 1, f_segment_prod),
    NP("segment_max_int", 2, 1, f_segment_max),
    NP("segment_max_vmap", 2, 1, f_segment_max3, .vmap = 1, .in_axes = {0, JX_NONE}),
};
NP_GOLDEN_TESTS(cases)

/* the static size is what makes these work under jit: the traced shapes never depend on data */
static void test_jit_shapes(void **state) {
  (void)state;
  jx_array *a = jx_array_from(JX_F32, JX_SHAPE(4), (float[]){0, 2, 0, 2});
  jx_array *u = jx_unique(a, 3, jx_scalar(JX_F32, 9));
  float got[3];
  check_ok(jx_read(u, got, sizeof got));
  assert_float_equal(got[0], 0, 0);
  assert_float_equal(got[1], 2, 0);
  assert_float_equal(got[2], 9, 0);
}

static void test_errors(void **state) {
  (void)state;
  jx_array *v = jx_zeros(JX_F32, JX_SHAPE(4)), *out[2];
  jx_clear_error();
  assert_int_not_equal(jx_nonzero(jx_scalar(JX_F32, 1), 2, 0, out), JX_OK);
  assert_error_has("0-d array");
  assert_int_not_equal(jx_nonzero(v, -1, 0, out), JX_OK);
  assert_error_has("size -1");
  assert_int_not_equal(jx_where_indices(v, -3, 0, out), JX_OK);
  assert_error_has("jx_where_indices: size -3");
  NP_EXPECT_ERROR(jx_argwhere(v, -2, 0), "size -2");
  NP_EXPECT_ERROR(jx_unique(v, 2, v), "fill must be a scalar");
  jx_array *ids = jx_zeros(JX_I32, JX_SHAPE(3));
  NP_EXPECT_ERROR(jx_segment_max(v, ids, 2), "one id per row of data f32[4]");
  NP_EXPECT_ERROR(jx_segment_min(v, v, 2), "segment_ids f32[4] must have an integer dtype");
  NP_EXPECT_ERROR(jx_segment_prod(v, jx_zeros(JX_I32, JX_SHAPE(4)), -1), "num_segments -1");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_golden_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(test_golden_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_jit_shapes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
