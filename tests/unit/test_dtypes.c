/* dtypes: promotion against JAX's table, 16-bit float conversions (exhaustive
 * for 16 -> 32 bits, sampled ties/subnormals/overflow/NaNs for 32/64 -> 16),
 * and the element store helpers against JAX's astype. Golden data from
 * tests/golden/gen_dtypes.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */
#include <jx/jx.h>

#include "array/array.h"
#include "test_util.h"

#define DIR JX_TEST_DATA "/dtypes/"

static jx_array *load(const char *name, jx_dtype want) {
  char path[512];
  snprintf(path, sizeof path, DIR "%s", name);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fail_msg("cannot load %s: %s", path, jx_last_error());
  assert_int_equal(jx_dtype_of(a), want);
  return a;
}

static jx_dtype dtype_named(const char *s) {
  for (int d = 0; d < JX_NUM_DTYPES; d++)
    if (strcmp(jx_dtype_name((jx_dtype)d), s) == 0) return (jx_dtype)d;
  fail_msg("unknown dtype '%s'", s);
  return JX_F32;
}

/* ---- promotion ---- */

/* Every line of one of gen_dtypes.py's promotion tables against
 * jx_promote_weak in the mode the table is for, and (x64's table, the
 * lattice) against jx_promote_types, which is the same in both modes. */
static void check_promotion_table(const char *name, int x64) {
  char path[512];
  snprintf(path, sizeof path, DIR "%s", name);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  jx_config_enable_x64(x64);
  char line[128], a[16], b[16], r[16], kind[16];
  int n_strong = 0, n_weak = 0, weak;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "S %15s %15s %15s", a, b, r) == 3) {
      jx_dtype da = dtype_named(a), db = dtype_named(b), dr = dtype_named(r);
      if (x64 && jx_promote_types(da, db) != dr)
        fail_msg("promote_types(%s, %s) = %s, JAX says %s", a, b,
                 jx_dtype_name(jx_promote_types(da, db)), r);
      int w = -1;
      jx_dtype got = jx_promote_weak(da, 0, db, 0, &w);
      if (got != dr || w != 0)
        fail_msg("%s: %s with %s gives %s (weak %d), JAX %s", name, a, b, jx_dtype_name(got), w, r);
      n_strong++;
    } else if (sscanf(line, "W %15s %15s %15s %d", kind, b, r, &weak) == 4) {
      /* a Python scalar: a weak value of the widest dtype of its kind */
      jx_dtype dk = strcmp(kind, "bool") == 0    ? JX_BOOL
                    : strcmp(kind, "int") == 0   ? JX_I64
                    : strcmp(kind, "float") == 0 ? JX_F64
                                                 : JX_C128;
      jx_dtype db = dtype_named(b), dr = dtype_named(r);
      for (int order = 0; order < 2; order++) {
        int w = -1;
        jx_dtype got =
            order ? jx_promote_weak(db, 0, dk, 1, &w) : jx_promote_weak(dk, 1, db, 0, &w);
        if (got != dr || w != weak)
          fail_msg("%s: weak %s with %s: jx gives %s (weak %d), JAX %s (weak %d)", name, kind, b,
                   jx_dtype_name(got), w, r, weak);
      }
      n_weak++;
    }
  }
  fclose(f);
  jx_config_enable_x64(0);
  assert_int_equal(n_strong, JX_NUM_DTYPES * JX_NUM_DTYPES);
  assert_int_equal(n_weak, 4 * JX_NUM_DTYPES);
}

static void promotion_matches_jax(void **state) {
  (void)state;
  check_promotion_table("promote_x32.txt", 0);
  check_promotion_table("promote.txt", 1);
}

/* Before any jx_config_enable_x64 the mode is JX_ENABLE_X64's (CTest runs
 * this file again with JX_ENABLE_X64=1). Runs first. */
static void mode_comes_from_the_environment(void **state) {
  (void)state;
  const char *v = getenv("JX_ENABLE_X64");
  int want = v && *v && strcmp(v, "0") != 0;
  assert_int_equal(jx_x64_enabled(), want);
  assert_int_equal(jx_dtype_of(jx_add(jx_ones(JX_I32, JX_SHAPE(2)), jx_ones(JX_U32, JX_SHAPE(2)))),
                   want ? JX_I64 : JX_I32);
}

/* The modes through the public ops: what JAX's default mode can compute
 * comes out 32-bit, an explicit 64-bit operand keeps x64 JAX's rule, and
 * jx_config_enable_x64 switches to x64 JAX's results. */
static void default_mode_is_jax_default_mode(void **state) {
  (void)state;
  jx_array *i = jx_ones(JX_I32, JX_SHAPE(3)), *u = jx_ones(JX_U32, JX_SHAPE(3));
  jx_array *b = jx_ones(JX_BOOL, JX_SHAPE(3)), *l = jx_ones(JX_I64, JX_SHAPE(3));
  for (int x64 = 0; x64 < 2; x64++) {
    jx_config_enable_x64(x64);
    assert_int_equal(jx_x64_enabled(), x64);
    jx_dtype wide_i = x64 ? JX_I64 : JX_I32;
    assert_int_equal(jx_dtype_of(jx_add(i, u)), wide_i);
    assert_int_equal(jx_dtype_of(jx_sum(i, JX_AXES(), 0)), wide_i);
    assert_int_equal(jx_dtype_of(jx_sum(b, JX_AXES(), 0)), wide_i);
    assert_int_equal(jx_dtype_of(jx_prod(jx_ones(JX_I8, JX_SHAPE(2)), JX_AXES(), 0)), wide_i);
    assert_int_equal(jx_dtype_of(jx_sum(u, JX_AXES(), 0)), x64 ? JX_U64 : JX_U32);
    assert_int_equal(jx_dtype_of(jx_cumsum(b, 0)), wide_i);
    assert_int_equal(jx_dtype_of(jx_argmax(i, 0)), wide_i);
    assert_int_equal(jx_dtype_of(jx_argsort(i, 0)), wide_i);
    /* 64-bit weak scalars alone keep the dtype they were given */
    assert_int_equal(jx_dtype_of(jx_add(jx_scalar(JX_I64, 1), jx_scalar(JX_F64, 2))), JX_F64);
    assert_int_equal(jx_dtype_of(jx_add(jx_scalar(JX_F32, 1), jx_scalar(JX_F64, 2))),
                     x64 ? JX_F64 : JX_F32);
    assert_int_equal(jx_dtype_of(jx_mul(i, jx_scalar(JX_F64, 2.5))), x64 ? JX_F64 : JX_F32);
    /* explicit 64-bit operands stay 64-bit in both modes */
    assert_int_equal(jx_dtype_of(jx_add(l, i)), JX_I64);
    assert_int_equal(jx_dtype_of(jx_sum(l, JX_AXES(), 0)), JX_I64);
    assert_int_equal(jx_dtype_of(jx_mul(jx_ones(JX_F64, JX_SHAPE(2)), jx_scalar(JX_F64, 0.1))),
                     JX_F64);
    assert_int_equal(jx_dtype_of(jx_add(jx_ones(JX_U64, JX_SHAPE(3)), l)), JX_F64);
  }
  jx_config_enable_x64(0);
  /* the sum of i32 wraps in i32, as default-mode JAX's does */
  int32_t big[2] = {2147483647, 1}, got = 0;
  assert_int_equal(
      jx_read(jx_sum(jx_array_from(JX_I32, JX_SHAPE(2), big), JX_AXES(), 0), &got, sizeof got),
      JX_OK);
  assert_int_equal(got, INT32_MIN);
}

static void sum_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(in[0], JX_AXES(), 0);
}

/* A jitted function traced in one mode is traced again in the other: its
 * cached program's result dtypes belong to the mode it was traced in. */
static void jit_retraces_when_the_mode_changes(void **state) {
  (void)state;
  jx_fn *body = jx_fn_create("sum", 1, 1, sum_body, NULL), *f = jx_jit(body, NULL);
  jx_array *i = jx_ones(JX_I32, JX_SHAPE(3)), *out = NULL;
  for (int round = 0; round < 2; round++)
    for (int x64 = 0; x64 < 2; x64++) {
      jx_config_enable_x64(x64);
      assert_int_equal(jx_call(f, &i, &out), JX_OK);
      assert_int_equal(jx_dtype_of(out), x64 ? JX_I64 : JX_I32);
    }
  assert_int_equal(jx_fn_trace_count(f), 2); /* one trace per mode, then cached */
  jx_config_enable_x64(0);
  jx_fn_release(f);
  jx_fn_release(body);
}

/* jx's own rule (include/jx/array.h): a weak value keeps its dtype when its
 * kind wins; JAX-x64 would give the canonical i64/f64 there. */
static void weak_scalar_keeps_its_dtype_when_its_kind_wins(void **state) {
  (void)state;
  int w;
  assert_int_equal(jx_promote_weak(JX_I32, 0, JX_F32, 1, &w), JX_F32); /* JAX: f64 */
  assert_int_equal(w, 1);
  assert_int_equal(jx_promote_weak(JX_F32, 1, JX_U8, 0, &w), JX_F32);
  assert_int_equal(jx_promote_weak(JX_BOOL, 0, JX_I32, 1, &w), JX_I32); /* JAX: i64 */
  assert_int_equal(w, 1);
  assert_int_equal(jx_promote_weak(JX_I64, 0, JX_F16, 1, &w), JX_F16);
  /* the strong operand's dtype when its kind is the same or higher */
  assert_int_equal(jx_promote_weak(JX_BF16, 0, JX_F32, 1, &w), JX_BF16);
  assert_int_equal(w, 0);
  assert_int_equal(jx_promote_weak(JX_U8, 0, JX_I64, 1, &w), JX_U8);
  assert_int_equal(jx_promote_weak(JX_F16, 0, JX_F64, 1, &w), JX_F16);
  /* two weak values: the joined kind, the wider dtype, still weak */
  assert_int_equal(jx_promote_weak(JX_I32, 1, JX_F32, 1, &w), JX_F32);
  assert_int_equal(w, 1);
  assert_int_equal(jx_promote_weak(JX_F16, 1, JX_F32, 1, &w), JX_F32);
  assert_int_equal(jx_promote_weak(JX_I8, 1, JX_I32, 1, &w), JX_I32);
  /* and through the public ops */
  jx_array *i = jx_ones(JX_I32, JX_SHAPE(3));
  jx_array *c = jx_mul(i, jx_scalar(JX_F32, 2));
  assert_false(jx_is_poisoned(c));
  assert_int_equal(jx_dtype_of(c), JX_F32);
  jx_array *h = jx_mul(jx_ones(JX_BF16, JX_SHAPE(2)), jx_scalar(JX_F32, 2));
  assert_int_equal(jx_dtype_of(h), JX_BF16);
  assert_int_equal(jx_dtype_of(jx_add(jx_scalar(JX_I32, 1), jx_scalar(JX_F32, 1))), JX_F32);
  assert_true(jx_is_weak(jx_add(jx_scalar(JX_I32, 1), jx_scalar(JX_F32, 1))));
}

static void dtype_names_and_sizes(void **state) {
  (void)state;
  static const char *names[] = {"bool", "i8",  "i16",  "i32", "i64", "u8",  "u16", "u32",
                                "u64",  "f16", "bf16", "f32", "f64", "c64", "c128"};
  static const size_t sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};
  for (int d = 0; d < JX_NUM_DTYPES; d++) {
    assert_string_equal(jx_dtype_name((jx_dtype)d), names[d]);
    assert_int_equal(jx_dtype_size((jx_dtype)d), sizes[d]);
  }
  assert_string_equal(jx_dtype_name((jx_dtype)JX_NUM_DTYPES), "?");
  assert_string_equal(jx_dtype_name((jx_dtype)-1), "?");
  assert_int_equal(jx_dtype_size((jx_dtype)99), 0);
}

/* ---- 16-bit floats ---- */
static uint32_t f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}

static void widening_is_exact_for_every_bit_pattern(void **state) {
  (void)state;
  const uint32_t *bf = jx_array_data(load("bf16_to_f32.npy", JX_U32));
  const uint32_t *hf = jx_array_data(load("f16_to_f32.npy", JX_U32));
  for (uint32_t h = 0; h < 65536; h++) {
    if (f32_bits(jx_bf16_to_f32((uint16_t)h)) != bf[h])
      fail_msg("bf16 0x%04x -> f32 0x%08x, expected 0x%08x", h,
               f32_bits(jx_bf16_to_f32((uint16_t)h)), bf[h]);
    if (f32_bits(jx_f16_to_f32((uint16_t)h)) != hf[h])
      fail_msg("f16 0x%04x -> f32 0x%08x, expected 0x%08x", h, f32_bits(jx_f16_to_f32((uint16_t)h)),
               hf[h]);
  }
}

typedef uint16_t (*narrow32)(float);
typedef uint16_t (*narrow64)(double);

static void check_narrowing(const char *stem, narrow32 f32fn, narrow64 f64fn) {
  char in[64], out[64];
  snprintf(in, sizeof in, "%s.in.npy", stem);
  snprintf(out, sizeof out, "%s.out.npy", stem);
  jx_array *x = load(in, f32fn ? JX_U32 : JX_U64), *y = load(out, JX_U16);
  int64_t n = jx_size(x);
  assert_int_equal(n, jx_size(y));
  assert_true(n > 10000);
  const uint16_t *want = jx_array_data(y);
  for (int64_t i = 0; i < n; i++) {
    uint16_t got;
    if (f32fn) {
      float v;
      memcpy(&v, (const uint32_t *)jx_array_data(x) + i, 4);
      got = f32fn(v);
    } else {
      double v;
      memcpy(&v, (const uint64_t *)jx_array_data(x) + i, 8);
      got = f64fn(v);
    }
    if (got != want[i])
      fail_msg("%s[%lld]: input bits 0x%llx -> 0x%04x, expected 0x%04x", stem, (long long)i,
               f32fn ? (unsigned long long)((const uint32_t *)jx_array_data(x))[i]
                     : (unsigned long long)((const uint64_t *)jx_array_data(x))[i],
               got, want[i]);
  }
}

static void f32_to_bf16_samples(void **s) {
  (void)s;
  check_narrowing("f32_to_bf16", jx_f32_to_bf16, NULL);
}
static void f32_to_f16_samples(void **s) {
  (void)s;
  check_narrowing("f32_to_f16", jx_f32_to_f16, NULL);
}
static void f64_to_bf16_samples(void **s) {
  (void)s;
  check_narrowing("f64_to_bf16", NULL, jx_f64_to_bf16);
}
static void f64_to_f16_samples(void **s) {
  (void)s;
  check_narrowing("f64_to_f16", NULL, jx_f64_to_f16);
}

/* A few cases by hand, so a regenerated golden file cannot hide them. */
static void narrowing_edge_cases(void **state) {
  (void)state;
  assert_int_equal(jx_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);           /* tie to even: down */
  assert_int_equal(jx_f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82); /* tie to even: up */
  assert_int_equal(jx_f32_to_bf16(-0.0f), 0x8000);
  assert_int_equal(jx_f32_to_bf16(3.4028235e38f), 0x7f80);          /* rounds past max finite */
  assert_int_equal(jx_f64_to_bf16(1.0 + 0x1p-8 + 0x1p-40), 0x3f81); /* once, not via f32 */
  assert_int_equal(jx_f64_to_f16(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
  assert_int_equal(jx_f64_to_f16(65520.0), 0x7c00);
  assert_int_equal(jx_f64_to_f16(65519.99), 0x7bff);
  assert_int_equal(jx_f64_to_f16(0x1p-25), 0x0000); /* tie to even zero */
  assert_int_equal(jx_f64_to_f16(0x1p-25 * 1.0000001), 0x0001);
  assert_int_equal(jx_f64_to_f16(-0.0), 0x8000);
  assert_int_equal(jx_f64_to_f16(-NAN) & 0xfe00, 0xfe00);
  assert_int_equal(jx_f16_to_f32(0x0001), 0x1p-24f);
  assert_true(isinf(jx_f16_to_f32(0xfc00)) && jx_f16_to_f32(0xfc00) < 0);
}

/* ---- element store helpers vs JAX astype ---- */
static void check_store(const char *stem, int from_i64) {
  char in[64];
  snprintf(in, sizeof in, "%s.in.npy", stem);
  jx_array *x = load(in, from_i64 ? JX_I64 : JX_F64);
  int64_t n = jx_size(x);
  for (int d = 0; d < JX_NUM_DTYPES; d++) {
    jx_dtype dt = (jx_dtype)d;
    char out[64];
    snprintf(out, sizeof out, "%s.%s.npy", stem, jx_dtype_name(dt));
    jx_array *y = load(out, dt);
    size_t es = jx_dtype_size(dt);
    unsigned char got[16];
    for (int64_t i = 0; i < n; i++) {
      if (from_i64)
        jx_store_i64(got, dt, 0, ((const int64_t *)jx_array_data(x))[i]);
      else
        jx_store_f64(got, dt, 0, ((const double *)jx_array_data(x))[i]);
      const unsigned char *want = (const unsigned char *)jx_array_data(y) + i * (int64_t)es;
      int same = memcmp(got, want, es) == 0;
      if (!same && jx_is_inexact(dt)) /* NaN bit patterns may differ; NaN-ness may not */
        same = isnan(jx_load_f64(got, dt, 0)) && isnan(jx_load_f64(want, dt, 0));
      if (!same) {
        if (from_i64)
          fail_msg("jx_store_i64(%s, %lld) = %g, JAX gives %g", jx_dtype_name(dt),
                   (long long)((const int64_t *)jx_array_data(x))[i], jx_load_f64(got, dt, 0),
                   jx_load_f64(want, dt, 0));
        else
          fail_msg("jx_store_f64(%s, %.17g) = %g, expected %g", jx_dtype_name(dt),
                   ((const double *)jx_array_data(x))[i], jx_load_f64(got, dt, 0),
                   jx_load_f64(want, dt, 0));
      }
    }
  }
}

static void store_f64_saturates_like_jax(void **s) {
  (void)s;
  check_store("store_f64", 0);
}
static void store_i64_wraps_like_jax(void **s) {
  (void)s;
  check_store("store_i64", 1);
}

static void loads_round_trip(void **state) {
  (void)state;
  unsigned char b[8];
  jx_store_i64(b, JX_U64, 0, -1);
  assert_true(jx_load_u64(b, JX_U64, 0) == UINT64_MAX);
  assert_int_equal(jx_load_i64(b, JX_U64, 0), -1); /* wraps */
  jx_store_i64(b, JX_I8, 0, 200);
  assert_int_equal(jx_load_i64(b, JX_I8, 0), -56);
  jx_store_f64(b, JX_F32, 0, -2.5);
  assert_int_equal(jx_load_i64(b, JX_F32, 0), -2); /* floats truncate */
  jx_store_f64(b, JX_F64, 0, 1e30);
  assert_true(jx_load_i64(b, JX_F64, 0) == INT64_MAX);
  assert_true(jx_load_u64(b, JX_F64, 0) == UINT64_MAX);
  jx_store_f64(b, JX_F64, 0, NAN);
  assert_int_equal(jx_load_i64(b, JX_F64, 0), 0);
  b[0] = 7; /* a bool byte that is not 0/1 still reads as true */
  assert_int_equal(jx_load_i64(b, JX_BOOL, 0), 1);
  assert_true(jx_load_f64(b, JX_BOOL, 0) == 1.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(mode_comes_from_the_environment, setup, teardown),
      cmocka_unit_test_setup_teardown(promotion_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(default_mode_is_jax_default_mode, setup, teardown),
      cmocka_unit_test_setup_teardown(jit_retraces_when_the_mode_changes, setup, teardown),
      cmocka_unit_test_setup_teardown(weak_scalar_keeps_its_dtype_when_its_kind_wins, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(dtype_names_and_sizes, setup, teardown),
      cmocka_unit_test_setup_teardown(widening_is_exact_for_every_bit_pattern, setup, teardown),
      cmocka_unit_test_setup_teardown(f32_to_bf16_samples, setup, teardown),
      cmocka_unit_test_setup_teardown(f32_to_f16_samples, setup, teardown),
      cmocka_unit_test_setup_teardown(f64_to_bf16_samples, setup, teardown),
      cmocka_unit_test_setup_teardown(f64_to_f16_samples, setup, teardown),
      cmocka_unit_test_setup_teardown(narrowing_edge_cases, setup, teardown),
      cmocka_unit_test_setup_teardown(store_f64_saturates_like_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(store_i64_wraps_like_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(loads_round_trip, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
