/* Shapes and dtypes without values: jx_shape_dtype_struct (jax.ShapeDtypeStruct)
 * and jx_eval_shape (jax.eval_shape). The oracle is the same function run on
 * real arrays: eval_shape gives its outputs' shapes and dtypes, jx_fn_cost
 * gives the same figures for a struct as for a real input, and every use that
 * needs a value fails with a message naming where the struct was made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */
#include <jx/jx.h>

#include "array/array.h"
#include "test_util.h"

/* (x [m, k] f32, y [k, n] f64) -> (x @ y + 1 [m, n] f64, sum(x) f32 []) */
static void body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_matmul(in[0], in[1]), jx_scalar(JX_F32, 1));
  out[1] = jx_sum(in[0], JX_AXES(), 0);
}

static void outputs_are_the_functions(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("body", 2, 2, body, NULL);
  jx_array *x = jx_shape_dtype_struct(JX_F32, JX_SHAPE(3, 5));
  jx_array *y = jx_zeros(JX_F64, JX_SHAPE(5, 7));
  jx_array *want[2], *got[2];
  check_ok(jx_eval_shape(f, (jx_array *[]){x, y}, got));
  check_ok(jx_call(f, (jx_array *[]){jx_zeros(JX_F32, JX_SHAPE(3, 5)), y}, want));
  for (int o = 0; o < 2; o++) {
    assert_int_equal(jx_dtype_of(got[o]), jx_dtype_of(want[o]));
    assert_true(jx_shape_equal(jx_shape_of(got[o]), jx_shape_of(want[o])));
  }
  /* its outputs are structs too: they trace on, and hold no value */
  jx_array *again[2];
  check_ok(
      jx_eval_shape(f, (jx_array *[]){x, jx_shape_dtype_struct(JX_F64, JX_SHAPE(5, 2))}, again));
  assert_true(jx_shape_equal(jx_shape_of(again[0]), JX_SHAPE(3, 2)));
  double v[6];
  assert_int_not_equal(jx_read(again[0], v, sizeof v), JX_OK);
  jx_clear_error();
  jx_fn_release(f);
}

/* 2^20 x 2^20 f32 is 4 TiB: planning and costing it must not allocate it */
static void larger_than_memory(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("body", 2, 2, body, NULL);
  jx_array *x = jx_shape_dtype_struct(JX_F32, JX_SHAPE(1 << 20, 1 << 20));
  jx_array *y = jx_shape_dtype_struct(JX_F64, JX_SHAPE(1 << 20, 4));
  jx_array *out[2];
  check_ok(jx_eval_shape(f, (jx_array *[]){x, y}, out));
  assert_true(jx_shape_equal(jx_shape_of(out[0]), JX_SHAPE(1 << 20, 4)));
  jx_cost c;
  check_ok(jx_fn_cost(f, (jx_array *[]){x, y}, &c));
  assert_true(c.flops >= 2.0 * (1 << 20) * (double)(1 << 20) * 4);
  jx_fn_release(f);
}

static void cost_equals_a_real_inputs(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("body", 2, 2, body, NULL);
  jx_cost real, shaped;
  check_ok(jx_fn_cost(
      f, (jx_array *[]){jx_zeros(JX_F32, JX_SHAPE(16, 32)), jx_zeros(JX_F64, JX_SHAPE(32, 8))},
      &real));
  check_ok(jx_fn_cost(f,
                      (jx_array *[]){jx_shape_dtype_struct(JX_F32, JX_SHAPE(16, 32)),
                                     jx_shape_dtype_struct(JX_F64, JX_SHAPE(32, 8))},
                      &shaped));
  assert_true(real.flops == shaped.flops && real.bytes_accessed == shaped.bytes_accessed &&
              real.peak_bytes_per_device == shaped.peak_bytes_per_device);
  jx_fn_release(f);
}

/* an op, a call and a read each fail, naming the struct and where it was made */
static void a_value_is_an_error(void **state) {
  (void)state;
  jx_array *x = jx_shape_dtype_struct(JX_F32, JX_SHAPE(2, 3));
  int line = __LINE__ - 1;
  char where[64];
  snprintf(where, sizeof where, "test_eval_shape.c:%d", line);
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_exp(x)));
  assert_non_null(strstr(jx_last_error(), "shape and dtype only"));
  if (!strstr(jx_last_error(), where)) fail_msg("%s (want %s)", jx_last_error(), where);
  jx_clear_error();
  jx_fn *f = jx_fn_create("body", 2, 2, body, NULL);
  jx_array *out[2];
  assert_int_not_equal(jx_call(f, (jx_array *[]){x, jx_zeros(JX_F64, JX_SHAPE(3, 1))}, out), JX_OK);
  assert_non_null(strstr(jx_last_error(), "f32[2,3]"));
  jx_clear_error();
  float v[6];
  assert_int_not_equal(jx_read(x, v, sizeof v), JX_OK);
  if (!strstr(jx_last_error(), where)) fail_msg("%s (want %s)", jx_last_error(), where);
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_shape_dtype_struct(JX_F32, JX_SHAPE(-1))));
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(outputs_are_the_functions),
      cmocka_unit_test(larger_than_memory),
      cmocka_unit_test(cost_equals_a_real_inputs),
      cmocka_unit_test(a_value_is_an_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
