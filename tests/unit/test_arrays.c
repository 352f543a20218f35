/* Arrays: creation (values checked against NumPy/JAX, noted per case),
 * inspection, host reads and their errors, and scopes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */
#include <jx/jx.h>

#include "array/array.h"
#include "test_util.h"

static uint64_t bits_at(const jx_array *a, int64_t i) {
  uint64_t u = 0;
  memcpy(&u, (const char *)jx_array_data(a) + i * (int64_t)jx_dtype_size(a->dtype),
         jx_dtype_size(a->dtype));
  return u;
}

/* ---- arange: lengths as np.arange/jnp.arange, values as jnp.arange ---- */
static void arange_lengths_match_numpy(void **state) {
  (void)state;
  static const struct {
    double start, stop, step;
    int64_t n;
  } t[] = {
      /* np.arange(start, stop, step).size */
      {0, 1, 0.1, 10},     {1, 0, -0.1, 10}, {0, 10, 3, 4},       {10, 0, -3, 4},
      {0, 1, 0.3, 4},      {0.5, 5, 1.5, 3}, {-3, 3, 0.5, 12},    {5, 5, 1, 0},
      {5, 0, 1, 0},        {0, -5, 1, 0},    {1e-10, 1, 0.25, 4}, {0, 0.9999999999999999, 0.1, 10},
      {-1, 1, 1.0 / 3, 6}, {2, 1, -0.2, 5},
  };
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    jx_array *a = jx_arange(JX_F64, t[i].start, t[i].stop, t[i].step);
    assert_false(jx_is_poisoned(a));
    if (jx_size(a) != t[i].n)
      fail_msg("arange(%g, %g, %g) has %lld elements, NumPy %lld", t[i].start, t[i].stop, t[i].step,
               (long long)jx_size(a), (long long)t[i].n);
    assert_int_equal(jx_ndim(a), 1);
  }
}

static void arange_values_match_jax(void **state) {
  (void)state;
  /* jnp.arange(2, -1, -0.7) (f64) */
  double f64[] = {2.0, 1.3, 0.6000000000000001, -0.09999999999999964, -0.7999999999999998};
  jx_array *a = jx_arange(JX_F64, 2, -1, -0.7);
  assert_int_equal(jx_size(a), 5);
  for (int i = 0; i < 5; i++) assert_true(((double *)jx_array_data(a))[i] == f64[i]);
  /* jnp.arange(2, -1, -0.7, dtype=f32) viewed as u32 */
  uint32_t f32[] = {1073741824, 1067869798, 1058642330, 3184315584u, 3209481420u};
  a = jx_arange(JX_F32, 2, -1, -0.7);
  for (int i = 0; i < 5; i++) assert_int_equal(bits_at(a, i), f32[i]);
  /* jnp.arange(0.1, 3.0, 0.3, dtype=f16 / bf16 / f32) (computed in f32 by JAX) */
  uint16_t f16[] = {11878, 13926, 14746, 15360, 15667, 15974, 16282, 16486, 16640, 16794};
  uint16_t b16[] = {15821, 16077, 16179, 16256, 16294, 16333, 16371, 16397, 16416, 16435};
  uint32_t f32b[] = {1036831949, 1053609165, 1060320052, 1065353216, 1067869799,
                     1070386381, 1072902964, 1074580685, 1075838976, 1077097267};
  jx_array *h = jx_arange(JX_F16, 0.1, 3.0, 0.3), *b = jx_arange(JX_BF16, 0.1, 3.0, 0.3);
  a = jx_arange(JX_F32, 0.1, 3.0, 0.3);
  assert_int_equal(jx_size(h), 10);
  for (int i = 0; i < 10; i++) {
    assert_int_equal(bits_at(h, i), f16[i]);
    assert_int_equal(bits_at(b, i), b16[i]);
    assert_int_equal(bits_at(a, i), f32b[i]);
  }
  /* integer dtypes: trunc(start) + i * trunc(step), wrapping (jnp.arange) */
  int32_t i32[] = {7, 5, 3, 1};
  a = jx_arange(JX_I32, 7, -3, -2.5);
  assert_int_equal(jx_size(a), 4);
  assert_memory_equal(jx_array_data(a), i32, sizeof i32);
  uint8_t u8[] = {250, 253, 0, 3};
  a = jx_arange(JX_U8, 250, 260, 3);
  assert_memory_equal(jx_array_data(a), u8, sizeof u8);
  int8_t i8[] = {-2, -1, 0, 1};
  a = jx_arange(JX_I8, -2.7, 3, 1.9);
  assert_int_equal(jx_size(a), 4);
  assert_memory_equal(jx_array_data(a), i8, sizeof i8);
}

static void arange_errors(void **state) {
  (void)state;
  assert_true(jx_is_poisoned(jx_arange(JX_F32, 0, 1, 0)));
  assert_int_equal(jx_last_status(), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "jx_arange"));
  assert_non_null(strstr(jx_last_error(), "step=0"));
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_arange(JX_F32, 0, INFINITY, 1)));
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_arange(JX_F32, 0, 1, NAN)));
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_arange(JX_F64, 0, 1, 1e-300)));
  assert_int_equal(jx_last_status(), JX_ERR_SHAPE);
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_arange(JX_BOOL, 0, 3, 1)));
  assert_int_equal(jx_last_status(), JX_ERR_DTYPE);
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_arange((jx_dtype)42, 0, 3, 1)));
  assert_int_equal(jx_last_status(), JX_ERR_DTYPE);
}

/* ---- full / zeros / ones / eye / scalar ---- */
static void full_saturates_like_jax(void **state) {
  (void)state;
  /* jnp.full((2, 3), v, dtype) */
  static const struct {
    jx_dtype dt;
    double v;
    double want;
  } t[] = {
      {JX_I8, 1000, 127},   {JX_I8, -1000, -128},     {JX_U8, -1, 0},
      {JX_I32, NAN, 0},     {JX_U16, 70000.7, 65535}, {JX_I64, 1e30, 9223372036854775807.0},
      {JX_BOOL, 0.5, 1},    {JX_BOOL, 0, 0},          {JX_F16, 1e6, INFINITY},
      {JX_F32, -2.5, -2.5}, {JX_U64, -3, 0},          {JX_I16, -3.9, -3},
      {JX_F64, 0.1, 0.1},
  };
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    jx_array *a = jx_full(t[i].dt, JX_SHAPE(2, 3), t[i].v);
    assert_false(jx_is_poisoned(a));
    assert_int_equal(jx_dtype_of(a), t[i].dt);
    assert_false(jx_is_weak(a));
    for (int k = 0; k < 6; k++)
      if (jx_load_f64(jx_array_data(a), t[i].dt, k) != t[i].want)
        fail_msg("full(%s, %g)[%d] = %g, JAX %g", jx_dtype_name(t[i].dt), t[i].v, k,
                 jx_load_f64(jx_array_data(a), t[i].dt, k), t[i].want);
  }
  /* jnp.full((2,), 0.1, bfloat16) is 0x3dcd */
  assert_int_equal(bits_at(jx_full(JX_BF16, JX_SHAPE(2), 0.1), 1), 0x3dcd);
  for (int d = 0; d < JX_NUM_DTYPES; d++) { /* every dtype: zeros and ones */
    jx_array *z = jx_zeros((jx_dtype)d, JX_SHAPE(3)), *o = jx_ones((jx_dtype)d, JX_SHAPE(3));
    for (int k = 0; k < 3; k++) {
      assert_true(jx_load_f64(jx_array_data(z), (jx_dtype)d, k) == 0);
      assert_true(jx_load_f64(jx_array_data(o), (jx_dtype)d, k) == 1);
    }
  }
}

static void eye_and_scalar(void **state) {
  (void)state;
  for (int d = 0; d < JX_NUM_DTYPES; d++) {
    jx_array *e = jx_eye((jx_dtype)d, 3);
    assert_true(jx_shape_equal(jx_shape_of(e), JX_SHAPE(3, 3)));
    for (int k = 0; k < 9; k++)
      assert_true(jx_load_f64(jx_array_data(e), (jx_dtype)d, k) == (k % 4 == 0));
  }
  assert_int_equal(jx_size(jx_eye(JX_F32, 0)), 0);
  assert_true(jx_is_poisoned(jx_eye(JX_F32, -1)));
  assert_int_equal(jx_last_status(), JX_ERR_SHAPE);
  assert_non_null(strstr(jx_last_error(), "jx_eye"));
  jx_clear_error();
  jx_array *s = jx_scalar(JX_F32, 2.5);
  assert_true(jx_is_weak(s));
  assert_int_equal(jx_ndim(s), 0);
  assert_int_equal(jx_size(s), 1);
  assert_true(jx_item(s) == 2.5);
  assert_false(jx_is_weak(jx_full(JX_F32, JX_SHAPE(), 2.5)));
  assert_false(jx_is_weak(jx_array_from(JX_F32, JX_SHAPE(), (float[]){1})));
  assert_true(jx_item(jx_scalar(JX_I8, 300)) == 127); /* saturates like full */
}

static void array_from_copies_and_checks(void **state) {
  (void)state;
  float v[4] = {1, 2, 3, 4};
  jx_array *a = jx_array_from(JX_F32, JX_SHAPE(2, 2), v);
  v[0] = 99; /* the array holds a copy */
  float out[4];
  assert_int_equal(jx_read(a, out, sizeof out), JX_OK);
  assert_true(out[0] == 1 && out[3] == 4);
  assert_true(jx_is_poisoned(jx_array_from(JX_F32, JX_SHAPE(2), NULL)));
  assert_non_null(strstr(jx_last_error(), "host_data is NULL"));
  jx_clear_error();
  assert_false(jx_is_poisoned(jx_array_from(JX_F32, JX_SHAPE(0), NULL))); /* nothing to copy */
  assert_true(jx_is_poisoned(jx_array_from(JX_F32, JX_SHAPE(2, -3), v)));
  assert_int_equal(jx_last_status(), JX_ERR_SHAPE);
  assert_non_null(strstr(jx_last_error(), "negative dimension -3"));
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_array_from((jx_dtype)JX_NUM_DTYPES, JX_SHAPE(2), v)));
  assert_int_equal(jx_last_status(), JX_ERR_DTYPE);
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_zeros(JX_F64, JX_SHAPE(1 << 30, 1 << 30, 1 << 30))));
  assert_non_null(strstr(jx_last_error(), "too many elements"));
}

/* ---- reads and items ---- */
static void read_and_item_errors(void **state) {
  (void)state;
  jx_array *a = jx_ones(JX_F32, JX_SHAPE(2, 3));
  float buf[6];
  int line = __LINE__ + 1;
  assert_int_equal(jx_read(a, buf, 5 * sizeof(float)), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "f32[2,3] holds 24 bytes but the destination has 20"));
  char where[64];
  snprintf(where, sizeof where, "test_arrays.c:%d: jx_read", line);
  assert_non_null(strstr(jx_last_error(), where));
  jx_clear_error();
  assert_int_equal(jx_read(a, NULL, sizeof buf), JX_ERR_INVALID_ARGUMENT);
  jx_clear_error();
  assert_int_equal(jx_read(NULL, buf, sizeof buf), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "NULL"));
  jx_clear_error();
  assert_int_equal(jx_read(jx_zeros(JX_F32, JX_SHAPE(0)), NULL, 0), JX_OK);
  assert_true(isnan(jx_item(a)));
  assert_int_equal(jx_last_status(), JX_ERR_SHAPE);
  assert_non_null(strstr(jx_last_error(), "jx_item: f32[2,3] has 6 elements, not one"));
  jx_clear_error();
  assert_true(jx_item(jx_ones(JX_I64, JX_SHAPE(1, 1))) == 1); /* any one-element shape */
  assert_true(isnan(jx_item(NULL)));
  jx_clear_error();
  assert_true(isnan(jx_item(jx_poison())));
  assert_int_equal(jx_last_status(), JX_ERR_POISONED);
  jx_clear_error();
  assert_int_equal(jx_block_until_ready(a), JX_OK);
  assert_int_equal(jx_block_until_ready(jx_poison()), JX_ERR_POISONED);
  jx_clear_error();
  /* a complex scalar: never its real part alone; jx_item_complex gives both */
  jx_array *z = jx_complex_scalar(JX_C64, 1.5, -2);
  line = __LINE__ + 1;
  assert_true(isnan(jx_item(z)));
  assert_int_equal(jx_last_status(), JX_ERR_DTYPE);
  assert_non_null(strstr(jx_last_error(), "jx_item: c64[] is complex; read both parts with "
                                          "jx_item_complex, or one with jx_real / jx_imag"));
  snprintf(where, sizeof where, "test_arrays.c:%d: jx_item", line);
  assert_non_null(strstr(jx_last_error(), where));
  jx_clear_error();
  double re = 0, im = 0;
  assert_int_equal(jx_item_complex(z, &re, &im), JX_OK);
  assert_true(re == 1.5 && im == -2);
  assert_int_equal(jx_item_complex(jx_scalar(JX_F64, 3.25), &re, &im), JX_OK);
  assert_true(re == 3.25 && im == 0);
  assert_int_equal(jx_item_complex(jx_ones(JX_C128, JX_SHAPE(2)), &re, &im), JX_ERR_SHAPE);
  assert_true(isnan(re) && isnan(im));
  assert_non_null(strstr(jx_last_error(), "jx_item_complex: c128[2] has 2 elements, not one"));
  jx_clear_error();
  assert_int_equal(jx_item_complex(z, NULL, &im), JX_ERR_INVALID_ARGUMENT);
  jx_clear_error();
  /* inspection of NULL and poison does not crash */
  assert_int_equal(jx_ndim(NULL), 0);
  assert_int_equal(jx_size(jx_poison()), 1);
  assert_true(jx_is_poisoned(NULL));
  assert_false(jx_is_weak(NULL));
}

/* ---- scopes ---- */
static void scopes_nest_and_keep(void **state) {
  (void)state;
  jx_array *kept;
  jx_scope_begin();
  jx_array *outer = jx_ones(JX_F32, JX_SHAPE(4));
  jx_scope_begin();
  jx_array *inner = jx_full(JX_F32, JX_SHAPE(4), 3);
  kept = jx_keep(inner);
  assert_int_equal(atomic_load(&inner->refs), 2);
  jx_scope_end();
  assert_int_equal(atomic_load(&kept->refs), 1); /* survives its scope */
  assert_true(jx_item(jx_sum(kept, JX_AXES(), 0)) == 12);
  assert_int_equal(atomic_load(&outer->refs), 1);
  jx_scope_end();
  float v[4];
  assert_int_equal(jx_read(kept, v, sizeof v), JX_OK);
  assert_true(v[3] == 3);
  jx_release(kept);
  jx_release(NULL);        /* no-op */
  jx_release(jx_poison()); /* no-op */
  assert_true(jx_keep(jx_poison()) == jx_poison());
  assert_null(jx_keep(NULL));
}

static void alias_shares_buffer(void **state) {
  (void)state;
  jx_scope_begin();
  jx_array *a = jx_arange(JX_F32, 0, 6, 1);
  jx_array *b = jx_array_alias(a, JX_SHAPE(2, 3));
  assert_ptr_equal(jx_array_data(a), jx_array_data(b));
  assert_int_equal(atomic_load(&a->buf->refs), 2);
  jx_array *kept = jx_keep(b);
  jx_scope_end(); /* frees a; the buffer lives on in b */
  assert_int_equal(atomic_load(&kept->buf->refs), 1);
  assert_true(jx_load_f64(jx_array_data(kept), JX_F32, 5) == 5);
  assert_true(jx_shape_equal(jx_shape_of(kept), JX_SHAPE(2, 3)));
  jx_release(kept);
}

static void scope_end_without_scope_is_an_error(void **state) {
  (void)state;
  jx_scope_end(); /* the test's own scope */
  jx_clear_error();
  jx_scope_end();
  assert_int_equal(jx_last_status(), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "jx_scope_end: no scope is open"));
  jx_clear_error();
  jx_scope_begin(); /* for teardown */
}

static void shutdown_then_reuse(void **state) {
  (void)state;
  jx_array *a = jx_ones(JX_F32, JX_SHAPE(8)); /* in the test's scope */
  (void)a;
  jx_scope_begin();
  jx_ones(JX_F32, JX_SHAPE(8));
  jx_shutdown(); /* closes every scope and frees the root */
  jx_array *b = jx_arange(JX_F32, 0, 3, 1);
  assert_false(jx_is_poisoned(b));
  assert_true(jx_item(jx_sum(b, JX_AXES(), 0)) == 3);
  jx_shutdown();
  jx_shutdown();    /* twice is fine */
  jx_scope_begin(); /* for teardown */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(arange_lengths_match_numpy, setup, teardown),
      cmocka_unit_test_setup_teardown(arange_values_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(arange_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(full_saturates_like_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(eye_and_scalar, setup, teardown),
      cmocka_unit_test_setup_teardown(array_from_copies_and_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(read_and_item_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(scopes_nest_and_keep, setup, teardown),
      cmocka_unit_test_setup_teardown(alias_shares_buffer, setup, teardown),
      cmocka_unit_test_setup_teardown(scope_end_without_scope_is_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(shutdown_then_reuse, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
