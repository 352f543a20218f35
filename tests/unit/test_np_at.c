/* x.at[idx].get/set/add/mul/min/max (jx_at_*) against JAX
 * (tests/golden/gen_np_surface.py): array entries broadcast together,
 * static slices with negative steps, arrays adjacent and apart (NumPy's
 * layout), negative and out-of-range indices (clamped reads, dropped
 * updates), duplicate indices, gradients, under jit and vmap; and the
 * errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"
#include "unit/np_golden.h"

static void f_get_arrays(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_get(in[0], 2, (jx_index[]){JX_IDX(in[1]), JX_IDX(in[2])});
}
static void f_get_slice(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_get(in[0], 2, (jx_index[]){JX_SLICE(1, 4, 2), JX_SLICE(JX_END, JX_END, -2)});
}
static void f_get_mixed(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_get(in[0], 2, (jx_index[]){JX_SLICE(JX_END, JX_END, 2), JX_IDX(in[1])});
}
static void f_get_apart(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_get(in[0], 3, (jx_index[]){JX_IDX(in[1]), JX_SLICE(1, 3, 1), JX_IDX(in[2])});
}
static void f_set(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_set(in[0], 2, (jx_index[]){JX_IDX(in[1]), JX_IDX(in[2])}, in[3]);
}
static void f_add_dup(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_add(in[0], 1, (jx_index[]){JX_IDX(in[1])}, in[2]);
}
static void f_mul(jx_array *const *in, jx_array **out) {
  jx_array *zero = jx_scalar(JX_I32, 0);
  out[0] = jx_at_mul(in[0], 2, (jx_index[]){JX_SLICE(1, JX_END, 1), JX_IDX(zero)}, in[1]);
}
static void f_set1(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_set(in[0], 1, (jx_index[]){JX_IDX(in[1])}, in[2]);
}
static void f_get_empty(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_get(in[0], 1, (jx_index[]){JX_SLICE(2, 2, 1)});
}
static void f_set_empty(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_set(in[0], 1, (jx_index[]){JX_SLICE(3, 1, 1)}, in[1]);
}
static void f_min(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_min(in[0], 1, (jx_index[]){JX_IDX(in[1])}, in[2]);
}
static void f_max(jx_array *const *in, jx_array **out) {
  out[0] = jx_at_max(in[0], 2, (jx_index[]){JX_SLICE(2, 0, -1), JX_IDX(in[1])}, in[2]);
}
static void f_set_row(jx_array *const *in, jx_array **out) {
  jx_array *one = jx_scalar(JX_I32, 1);
  out[0] = jx_at_set(in[0], 2, (jx_index[]){JX_IDX(one), JX_ALL}, jx_scalar(JX_I32, 7));
}

static const np_case cases[] = {
    NP("at_get_arrays", 3, 1, f_get_arrays),
    NP("at_get_slice", 1, 1, f_get_slice),
    NP("at_get_mixed", 2, 1, f_get_mixed),
    NP("at_get_apart", 3, 1, f_get_apart),
    NP("at_set", 4, 1, f_set),
    NP("at_add_dup", 3, 1, f_add_dup),
    NP("at_mul", 2, 1, f_mul),
    NP("at_min", 3, 1, f_min),
    NP("at_max", 3, 1, f_max),
    NP("at_set_slice_scalar", 1, 1, f_set_row),
    NP("at_get_empty", 1, 1, f_get_empty),
    NP("at_set_empty", 2, 1, f_set_empty),
    NP("at_set_vmap", 3, 1, f_set1, .vmap = 1, .in_axes = {0, JX_NONE, 0}),
};
NP_GOLDEN_TESTS(cases)

static void test_errors(void **state) {
  (void)state;
  jx_array *m = jx_zeros(JX_F32, JX_SHAPE(3, 4)), *fidx = jx_zeros(JX_F32, JX_SHAPE(2));
  jx_array *i2 = jx_zeros(JX_I32, JX_SHAPE(2)), *i3 = jx_zeros(JX_I32, JX_SHAPE(3));
  NP_EXPECT_ERROR(jx_at_get(m, 0, NULL), "jx_at_get: 0 index entries for f32[3,4]");
  NP_EXPECT_ERROR(jx_at_get(m, 3, (jx_index[]){JX_ALL, JX_ALL, JX_ALL}), "3 index entries");
  NP_EXPECT_ERROR(jx_at_get(m, 1, (jx_index[]){JX_SLICE(0, 2, 0)}), "slice with step 0");
  NP_EXPECT_ERROR(jx_at_get(m, 1, (jx_index[]){JX_IDX(fidx)}), "boolean mask");
  NP_EXPECT_ERROR(jx_at_get(m, 2, (jx_index[]){JX_IDX(i2), JX_IDX(i3)}), "do not broadcast");
  NP_EXPECT_ERROR(jx_at_set(m, 1, (jx_index[]){JX_IDX(i2)}, jx_zeros(JX_F32, JX_SHAPE(3))),
                  "values f32[3] do not broadcast to the indexed shape f32[2,4]");
  NP_EXPECT_ERROR(jx_at_add(m, 1, (jx_index[]){JX_IDX(i2)}, NULL), "jx_at_add: argument 1 is NULL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_golden_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(test_golden_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
