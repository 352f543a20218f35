/* jnp.split, array_split, tile, repeat, roll, moveaxis, swapaxes, diff and
 * jnp.pad's modes against JAX (tests/golden/gen_np_surface.py): values,
 * gradients, under jit and vmap; and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"
#include "unit/np_golden.h"

static void f_split(jx_array *const *in, jx_array **out) {
  check_ok(jx_split_sections(in[0], 3, 1, out));
}
static void f_split_at(jx_array *const *in, jx_array **out) {
  check_ok(jx_split_at(in[0], 3, (const int64_t[]){1, 3, 3}, 0, out));
}
static void f_array_split(jx_array *const *in, jx_array **out) {
  check_ok(jx_array_split(in[0], 3, -1, out));
}
static void f_array_split_many(jx_array *const *in, jx_array **out) {
  check_ok(jx_array_split(in[0], 5, 0, out));
}
NP_FN1(f_tile_zero, jx_tile(a, JX_SHAPE(0, 2)))
NP_FN1(f_repeat_zero, jx_repeat(a, 0, 0))
NP_FN1(f_tile, jx_tile(a, JX_SHAPE(2, 1, 3)))
NP_FN1(f_tile_short, jx_tile(a, JX_SHAPE(2)))
NP_FN1(f_repeat, jx_repeat(a, 3, 1))
NP_FN1(f_repeat_flat, jx_repeat(a, 2, JX_NONE))
NP_FN1(f_repeat_counts, jx_repeat_counts(a, 3, (const int64_t[]){2, 0, 3}, 0))
NP_FN1(f_roll, jx_roll(a, 2, 1))
NP_FN1(f_roll_neg, jx_roll(a, -7, 0))
NP_FN1(f_roll_flat, jx_roll(a, 4, JX_NONE))
NP_FN1(f_roll_vmap, jx_roll(a, 1, 0))
NP_FN1(f_moveaxis, jx_moveaxis(a, JX_AXES(0, 1), JX_AXES(2, 0)))
NP_FN1(f_swapaxes, jx_swapaxes(a, 0, -1))
NP_FN1(f_diff, jx_diff(a, 2, 0))
NP_FN1(f_diff_bool, jx_diff(a, 1, -1))
NP_FN1(f_pad_edge, jx_pad_mode(a, JX_SHAPE(5, 1), JX_SHAPE(2, 3), "edge", 0))
NP_FN1(f_pad_reflect, jx_pad_mode(a, JX_SHAPE(5, 1), JX_SHAPE(2, 3), "reflect", 0))
NP_FN1(f_pad_symmetric, jx_pad_mode(a, JX_SHAPE(5, 1), JX_SHAPE(2, 3), "symmetric", 0))
NP_FN1(f_pad_wrap, jx_pad_mode(a, JX_SHAPE(5, 1), JX_SHAPE(2, 3), "wrap", 0))
NP_FN1(f_pad_reflect_1, jx_pad_mode(a, JX_SHAPE(2), JX_SHAPE(3), "reflect", 0))
NP_FN1(f_pad_constant, jx_pad_mode(a, JX_SHAPE(1, 0), JX_SHAPE(2, 1), "constant", 1.5))
NP_FN1(f_pad_ramp, jx_pad_mode(a, JX_SHAPE(2, 1), JX_SHAPE(3, 0), "linear_ramp", 0.5))
NP_FN1(f_pad_ramp_int, jx_pad_mode(a, JX_SHAPE(3), JX_SHAPE(2), "linear_ramp", -4))

static const np_case cases[] = {
    NP("split", 1, 3, f_split),
    NP("split_at", 1, 4, f_split_at),
    NP("array_split", 1, 3, f_array_split),
    NP("tile", 1, 1, f_tile),
    NP("tile_short", 1, 1, f_tile_short),
    NP("repeat", 1, 1, f_repeat),
    NP("repeat_flat", 1, 1, f_repeat_flat),
    NP("repeat_counts", 1, 1, f_repeat_counts),
    NP("roll", 1, 1, f_roll),
    NP("roll_neg", 1, 1, f_roll_neg),
    NP("roll_flat", 1, 1, f_roll_flat),
    NP("moveaxis", 1, 1, f_moveaxis),
    NP("swapaxes", 1, 1, f_swapaxes),
    NP("diff", 1, 1, f_diff),
    NP("diff_bool", 1, 1, f_diff_bool),
    NP("pad_edge", 1, 1, f_pad_edge),
    NP("pad_reflect", 1, 1, f_pad_reflect),
    NP("pad_symmetric", 1, 1, f_pad_symmetric),
    NP("pad_wrap", 1, 1, f_pad_wrap),
    NP("pad_reflect_1", 1, 1, f_pad_reflect_1),
    NP("pad_constant", 1, 1, f_pad_constant),
    NP("pad_ramp", 1, 1, f_pad_ramp),
    NP("pad_ramp_int", 1, 1, f_pad_ramp_int),
    NP("array_split_many", 1, 5, f_array_split_many),
    NP("tile_zero", 1, 1, f_tile_zero),
    NP("repeat_zero", 1, 1, f_repeat_zero),
    NP("roll_vmap", 1, 1, f_roll_vmap, .vmap = 1),
};
NP_GOLDEN_TESTS(cases)

static void test_errors(void **state) {
  (void)state;
  jx_array *m = jx_zeros(JX_F32, JX_SHAPE(4, 6)), *out[8];
  jx_clear_error();
  assert_int_not_equal(jx_split_sections(m, 4, 1, out), JX_OK);
  assert_error_has("axis 1 of f32[4,6] (size 6) does not split into 4 equal sections");
  assert_true(jx_is_poisoned(out[0]));
  assert_int_not_equal(jx_split_sections(m, 2, 2, out), JX_OK);
  assert_error_has("axis 2");
  assert_int_not_equal(jx_split_at(m, 2, (const int64_t[]){3, 1}, 0, out), JX_OK);
  assert_error_has("split index 1 (1) of axis 0 of f32[4,6] is out of order");
  assert_int_not_equal(jx_array_split(m, 0, 0, out), JX_OK);
  assert_error_has("0 sections");
  NP_EXPECT_ERROR(jx_tile(m, JX_SHAPE(2, -1)), "repetition -1");
  NP_EXPECT_ERROR(jx_repeat(m, -2, 0), "repeats -2 is negative");
  NP_EXPECT_ERROR(jx_repeat_counts(m, 2, (const int64_t[]){1, 2}, 0), "2 repeat counts for axis 0");
  NP_EXPECT_ERROR(jx_roll(m, 1, 3), "axis 3");
  NP_EXPECT_ERROR(jx_moveaxis(m, JX_AXES(0, 1), JX_AXES(0)), "one length, got 2 and 1");
  NP_EXPECT_ERROR(jx_moveaxis(m, JX_AXES(0, 0), JX_AXES(0, 1)), "repeated axis in source");
  NP_EXPECT_ERROR(jx_diff(jx_scalar(JX_F32, 1), 1, 0), "at least a 1-D array");
  NP_EXPECT_ERROR(jx_pad_mode(m, JX_SHAPE(1, 1), JX_SHAPE(1, 1), "mirror", 0),
                  "mode \"mirror\" is not one of");
  NP_EXPECT_ERROR(jx_pad_mode(m, JX_SHAPE(1), JX_SHAPE(1), "edge", 0), "needs 2 widths");
  NP_EXPECT_ERROR(jx_pad_mode(m, JX_SHAPE(1, -1), JX_SHAPE(1, 1), "wrap", 0), "negative padding");
  NP_EXPECT_ERROR(
      jx_pad_mode(jx_zeros(JX_F32, JX_SHAPE(0, 2)), JX_SHAPE(1, 0), JX_SHAPE(0, 0), "reflect", 0),
      "cannot pad the empty axis 0");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_golden_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(test_golden_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
