/* The PRNG: Threefry-2x32-20 known-answer vectors from Random123
 * (kat_vectors, threefry2x32_20) through the primitive and the public
 * function, identities between the public ops, and every rejection of bad
 * input with its message. Bit-exactness against JAX is the conformance
 * suite's job (tests/golden/gen_random.py). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "trace/dispatch.h"
#include "test_util.h"

static jx_array *u32s(int n, const uint32_t *v) { return jx_array_from(JX_U32, JX_SHAPE(n), v); }

static void expect_error(jx_array *a, jx_status code, const char *part1, const char *part2) {
  assert_true(jx_is_poisoned(a));
  assert_int_equal(jx_last_status(), code);
  assert_non_null(strstr(jx_last_error(), part1));
  if (part2) assert_non_null(strstr(jx_last_error(), part2));
  jx_clear_error();
}

/* ---- known answers ---- */

static void threefry_known_answers(void **state) {
  (void)state;
  /* key0, key1, ctr0, ctr1 -> out0, out1, all three Random123 vectors at once */
  const uint32_t k0[3] = {0, 0xffffffffu, 0x13198a2eu}, k1[3] = {0, 0xffffffffu, 0x03707344u};
  const uint32_t x0[3] = {0, 0xffffffffu, 0x243f6a88u}, x1[3] = {0, 0xffffffffu, 0x85a308d3u};
  const uint32_t want0[3] = {0x6b200159u, 0x1cb996fcu, 0xc4923a9cu};
  const uint32_t want1[3] = {0x99ba4efeu, 0xbb002be7u, 0x483df7a0u};
  jx_array *y0, *y1;
  assert_int_equal(jx_threefry2x32(u32s(3, k0), u32s(3, k1), u32s(3, x0), u32s(3, x1), &y0, &y1),
                   JX_OK);
  uint32_t got0[3], got1[3];
  assert_int_equal(jx_read(y0, got0, sizeof got0), JX_OK);
  assert_int_equal(jx_read(y1, got1, sizeof got1), JX_OK);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(got0[i], want0[i]);
    assert_int_equal(got1[i], want1[i]);
  }
}

static void threefry_scalars_and_empty(void **state) {
  (void)state;
  uint32_t z = 0, y[2];
  jx_array *s = jx_array_from(JX_U32, JX_SHAPE(), &z), *y0, *y1;
  assert_int_equal(jx_threefry2x32(s, s, s, s, &y0, &y1), JX_OK);
  assert_int_equal(jx_ndim(y0), 0);
  assert_int_equal(jx_read(y0, &y[0], 4), JX_OK);
  assert_int_equal(jx_read(y1, &y[1], 4), JX_OK);
  assert_int_equal(y[0], 0x6b200159u);
  assert_int_equal(y[1], 0x99ba4efeu);
  jx_array *e = jx_zeros(JX_U32, JX_SHAPE(0, 3));
  assert_int_equal(jx_threefry2x32(e, e, e, e, &y0, &y1), JX_OK);
  assert_int_equal(jx_size(y0), 0);
  assert_int_equal(jx_shape_of(y1).dims[1], 3);
}

/* The key (0, 0) hashes counter 0 to the first vector: bits()[0] is its xor
 * and split's first key is the pair itself. */
static void ops_agree_with_the_hash(void **state) {
  (void)state;
  jx_array *key = jx_random_key(0);
  uint32_t b, k[4], f[2];
  assert_int_equal(jx_read(jx_random_bits(key, JX_SHAPE()), &b, 4), JX_OK);
  assert_int_equal(b, 0x6b200159u ^ 0x99ba4efeu);
  assert_int_equal(jx_read(jx_random_split(key, 2), k, sizeof k), JX_OK);
  assert_int_equal(k[0], 0x6b200159u);
  assert_int_equal(k[1], 0x99ba4efeu);
  /* fold_in(key, d) hashes the counter (0, d): fold_in 1 is split's second key */
  assert_int_equal(jx_read(jx_random_fold_in(key, 1), f, sizeof f), JX_OK);
  assert_int_equal(f[0], k[2]);
  assert_int_equal(f[1], k[3]);
}

/* uniform's scaling primitive: a * b + c rounded once (f32 here: 1 + 2^-23
 * squared is 1 + 2^-22 + 2^-46, which two roundings lose), and its
 * derivative in each operand against finite differences. */
static void fma_fn(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_bind1(&jx_prim_fma, 3, in, NULL);
}
static void fma_primitive(void **state) {
  (void)state;
  float a = 1 + 0x1p-23f, c = -(1 + 0x1p-22f), got;
  jx_array *fa = jx_scalar(JX_F32, a), *fc = jx_scalar(JX_F32, c);
  assert_int_equal(
      jx_read(jx_bind1(&jx_prim_fma, 3, (jx_array *[]){fa, fa, fc}, NULL), &got, sizeof got),
      JX_OK);
  assert_true(got == 0x1p-46f);
  double x[3][4] = {{0.5, -1.25, 2, 3}, {1.5, 0.75, -2, 0.1}, {-0.3, 4, 1, -1}};
  jx_array *in[3];
  for (int i = 0; i < 3; i++) in[i] = jx_array_from(JX_F64, JX_SHAPE(4), x[i]);
  jx_fn *f = jx_fn_create("fma", 3, 1, fma_fn, NULL);
  assert_int_equal(jx_check_grads(f, in, 2, 0, 0), JX_OK);
  jx_fn_release(f);
}

/* ---- the eager fused draw against the traced recipe ---- */

typedef struct {
  int kind; /* 0 uniform, 1 normal, 2 truncated normal */
  jx_dtype dt;
  jx_shape s;
} draw_spec;

static jx_array *draw(const draw_spec *d, jx_array *key) {
  switch (d->kind) {
  case 0: return jx_random_uniform(key, d->dt, d->s, -0.75, 2.5);
  case 1: return jx_random_normal(key, d->dt, d->s);
  default: return jx_random_truncated_normal(key, d->dt, d->s, -1.5, 2);
  }
}
static void draw_fn(void *ctx, jx_array *const *in, jx_array **out) { out[0] = draw(ctx, in[0]); }

/* Eager draws run fused, a block at a time into the result; jitted ones
 * trace the recipe's primitives. Sizes straddle the blocks (1, odd, one
 * past a block of 512 and of 64 hash lanes); the bits must agree. */
static void eager_draws_match_the_traced_recipe(void **state) {
  (void)state;
  static const int64_t sizes[] = {1, 63, 65, 513, 1027};
  jx_config_enable_x64(1);
  jx_array *key = jx_random_key(0x123456789ull);
  for (int dti = 0; dti < 2; dti++)
    for (int kind = 0; kind < 3; kind++)
      for (int i = 0; i < 6; i++) {
        draw_spec d = {kind, dti ? JX_F64 : JX_F32, i < 5 ? JX_SHAPE(sizes[i]) : JX_SHAPE(7, 9)};
        jx_fn *f = jx_fn_create("draw", 1, 1, draw_fn, &d), *jf = jx_jit(f, NULL);
        jx_array *traced;
        assert_int_equal(jx_call(jf, &key, &traced), JX_OK);
        jx_array *eager = draw(&d, key);
        size_t bytes = (size_t)jx_size(eager) * (dti ? 8 : 4);
        unsigned char *a = malloc(bytes), *b = malloc(bytes);
        check_ok(jx_read(eager, a, bytes));
        check_ok(jx_read(traced, b, bytes));
        if (memcmp(a, b, bytes) != 0)
          fail_msg("kind %d, %s, %lld elements: eager and jitted bits differ", kind,
                   jx_dtype_name(d.dt), (long long)jx_size(eager));
        free(a);
        free(b);
        jx_fn_release(jf);
        jx_fn_release(f);
      }
  jx_config_enable_x64(0);
}

/* x64 JAX's key holds both words of a 64-bit seed; the default mode's seed
 * is 32-bit, so its high word is 0 (JAX's shift by 32 of an i32). */
static void key_from_seed(void **state) {
  (void)state;
  uint32_t k[2];
  for (int x64 = 0; x64 < 2; x64++) {
    jx_config_enable_x64(x64);
    assert_int_equal(jx_read(jx_random_key(0x0123456789abcdefull), k, sizeof k), JX_OK);
    assert_int_equal(k[0], x64 ? 0x01234567u : 0);
    assert_int_equal(k[1], 0x89abcdefu);
    assert_int_equal(jx_read(jx_random_key((uint64_t)-1), k, sizeof k), JX_OK);
    assert_int_equal(k[0], x64 ? 0xffffffffu : 0);
    assert_int_equal(k[1], 0xffffffffu);
  }
  jx_config_enable_x64(0);
}

/* bernoulli draws uniforms of p's dtype, f32 by default and f64 under x64:
 * the two modes give different masks from one key (JAX's do too), each
 * equal to uniform(key) < p in that dtype. */
static void bernoulli_draws_in_the_mode_float(void **state) {
  (void)state;
  jx_array *key = jx_random_key(11);
  uint8_t m[2][4096];
  for (int x64 = 0; x64 < 2; x64++) {
    jx_config_enable_x64(x64);
    jx_dtype dt = x64 ? JX_F64 : JX_F32;
    jx_array *want = jx_lt(jx_random_uniform(key, dt, JX_SHAPE(4096), 0, 1), jx_scalar(dt, 0.3));
    uint8_t w[4096];
    assert_int_equal(jx_read(jx_random_bernoulli(key, 0.3, JX_SHAPE(4096)), m[x64], 4096), JX_OK);
    assert_int_equal(jx_read(want, w, sizeof w), JX_OK);
    assert_memory_equal(m[x64], w, sizeof w);
  }
  jx_config_enable_x64(0);
  assert_memory_not_equal(m[0], m[1], 4096);
}

static void uniform_is_in_range(void **state) {
  (void)state;
  jx_array *u = jx_random_uniform(jx_random_key(3), JX_F64, JX_SHAPE(1000), -2, 5);
  double v[1000];
  assert_int_equal(jx_read(u, v, sizeof v), JX_OK);
  double lo = 1e9, hi = -1e9;
  for (int i = 0; i < 1000; i++) {
    lo = v[i] < lo ? v[i] : lo;
    hi = v[i] > hi ? v[i] : hi;
  }
  assert_true(lo >= -2 && lo < -1.9);
  assert_true(hi < 5 && hi > 4.9);
}

/* random_bits of width w: the 64-bit draw is (b1 << 32) | b2 where the 32-bit
 * one is b1 ^ b2, and the 8- and 16-bit draws truncate the 32-bit one. */
static jx_array *raw_bits(jx_array *key, int width, int64_t n) {
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = width;
  p.l[0].n = 1;
  p.l[0].v[0] = n;
  return jx_bind1(&jx_prim_random_bits, 1, &key, &p);
}

static void bit_widths_agree(void **state) {
  (void)state;
  jx_array *key = jx_random_key(1234);
  uint8_t b8[33];
  uint16_t b16[33];
  uint32_t b32[33];
  uint64_t b64[33];
  assert_int_equal(jx_read(raw_bits(key, 8, 33), b8, sizeof b8), JX_OK);
  assert_int_equal(jx_read(raw_bits(key, 16, 33), b16, sizeof b16), JX_OK);
  assert_int_equal(jx_read(raw_bits(key, 32, 33), b32, sizeof b32), JX_OK);
  assert_int_equal(jx_read(raw_bits(key, 64, 33), b64, sizeof b64), JX_OK);
  assert_int_equal(jx_dtype_of(raw_bits(key, 8, 1)), JX_U8);
  assert_int_equal(jx_dtype_of(raw_bits(key, 64, 1)), JX_U64);
  for (int i = 0; i < 33; i++) {
    assert_int_equal(b8[i], (uint8_t)b32[i]);
    assert_int_equal(b16[i], (uint16_t)b32[i]);
    assert_int_equal((uint32_t)(b64[i] >> 32) ^ (uint32_t)b64[i], b32[i]);
  }
  /* the 64-bit draw at index i is the key split(key, n)[i] */
  uint32_t k[66];
  assert_int_equal(jx_read(jx_random_split(key, 33), k, sizeof k), JX_OK);
  for (int i = 0; i < 33; i++) {
    assert_int_equal(k[2 * i], (uint32_t)(b64[i] >> 32));
    assert_int_equal(k[2 * i + 1], (uint32_t)b64[i]);
  }
}

static void random_bits_rule_rejects(void **state) {
  (void)state;
  expect_error(raw_bits(jx_random_key(0), 12, 3), JX_ERR_INVALID_ARGUMENT, "random_bits:", "12");
  expect_error(raw_bits(jx_zeros(JX_I32, JX_SHAPE(2)), 32, 3), JX_ERR_DTYPE,
               "random_bits:", "i32[2]");
  expect_error(raw_bits(jx_random_key(0), 32, -3), JX_ERR_SHAPE, "random_bits:", "negative");
}

/* ---- errors ---- */

static void bad_keys_are_rejected(void **state) {
  (void)state;
  jx_array *f = jx_zeros(JX_F32, JX_SHAPE(2)), *three = jx_zeros(JX_U32, JX_SHAPE(3));
  expect_error(jx_random_split(f, 2), JX_ERR_DTYPE, "jx_random_split:", "f32[2]");
  expect_error(jx_random_bits(three, JX_SHAPE(4)), JX_ERR_SHAPE, "jx_random_bits:", "u32[3]");
  expect_error(jx_random_fold_in(three, 1), JX_ERR_SHAPE, "jx_random_fold_in:", "u32[2]");
  expect_error(jx_random_uniform(jx_zeros(JX_U32, JX_SHAPE(2, 2)), JX_F32, JX_SHAPE(1), 0, 1),
               JX_ERR_SHAPE, "jx_random_uniform:", "u32[2,2]");
  expect_error(jx_random_normal(f, JX_F32, JX_SHAPE(1)), JX_ERR_DTYPE, "jx_random_normal:", NULL);
  expect_error(jx_random_permutation(three, 3), JX_ERR_SHAPE, "jx_random_permutation:", NULL);
  expect_error(jx_random_categorical(f, jx_zeros(JX_F32, JX_SHAPE(3)), 0), JX_ERR_DTYPE,
               "jx_random_categorical:", "f32[2]");
  expect_error(jx_random_split(NULL, 2), JX_ERR_INVALID_ARGUMENT, "argument 0 is NULL", NULL);
}

static void bad_arguments_are_rejected(void **state) {
  (void)state;
  jx_array *key = jx_random_key(0);
  expect_error(jx_random_split(key, -1), JX_ERR_INVALID_ARGUMENT, "jx_random_split:", "-1");
  expect_error(jx_random_permutation(key, -5), JX_ERR_INVALID_ARGUMENT,
               "jx_random_permutation:", "-5");
  expect_error(jx_random_bernoulli(key, 1.5, JX_SHAPE(2)), JX_ERR_INVALID_ARGUMENT,
               "jx_random_bernoulli:", "1.5");
  expect_error(jx_random_bernoulli(key, -0.25, JX_SHAPE(2)), JX_ERR_INVALID_ARGUMENT,
               "jx_random_bernoulli:", "-0.25");
  expect_error(jx_random_bernoulli(key, NAN, JX_SHAPE(2)), JX_ERR_INVALID_ARGUMENT,
               "jx_random_bernoulli:", "nan");
  expect_error(jx_random_uniform(key, JX_I32, JX_SHAPE(2), 0, 1), JX_ERR_DTYPE,
               "jx_random_uniform:", "i32");
  expect_error(jx_random_truncated_normal(key, JX_U8, JX_SHAPE(2), -1, 1), JX_ERR_DTYPE,
               "jx_random_truncated_normal:", "u8");
  expect_error(jx_random_split(key, 1ll << 32), JX_ERR_INVALID_ARGUMENT,
               "jx_random_split:", "4294967296");
  expect_error(jx_random_truncated_normal(key, JX_F32, JX_SHAPE(2), NAN, 1),
               JX_ERR_INVALID_ARGUMENT, "jx_random_truncated_normal:", "NaN");
  expect_error(jx_random_bits(key, JX_SHAPE(2, -3)), JX_ERR_SHAPE, "jx_random_bits:", "negative");
  expect_error(jx_random_normal(key, JX_F32, JX_SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1)), JX_ERR_SHAPE,
               "jx_random_normal:", NULL);
  expect_error(jx_random_categorical(key, jx_zeros(JX_I32, JX_SHAPE(3)), 0), JX_ERR_DTYPE,
               "jx_random_categorical:", "i32[3]");
  expect_error(jx_random_categorical(key, jx_zeros(JX_F32, JX_SHAPE()), 0), JX_ERR_SHAPE,
               "jx_random_categorical:", "f32[]");
  expect_error(jx_random_categorical(key, jx_zeros(JX_F32, JX_SHAPE(2, 3)), 2),
               JX_ERR_INVALID_ARGUMENT, "jx_random_categorical:", "axis 2");
  expect_error(jx_random_categorical(key, jx_zeros(JX_F32, JX_SHAPE(2, 0)), -1), JX_ERR_SHAPE,
               "jx_random_categorical:", "f32[2,0]");
}

static void bad_hash_operands_are_rejected(void **state) {
  (void)state;
  jx_array *u = jx_zeros(JX_U32, JX_SHAPE(3)), *i = jx_zeros(JX_I32, JX_SHAPE(3));
  jx_array *v = jx_zeros(JX_U32, JX_SHAPE(4)), *y0, *y1;
  assert_int_equal(jx_threefry2x32(u, u, i, u, &y0, &y1), JX_ERR_DTYPE);
  assert_non_null(strstr(jx_last_error(), "threefry2x32:"));
  assert_non_null(strstr(jx_last_error(), "i32[3]"));
  assert_true(jx_is_poisoned(y0) && jx_is_poisoned(y1));
  jx_clear_error();
  assert_int_equal(jx_threefry2x32(u, u, u, v, &y0, &y1), JX_ERR_SHAPE);
  assert_non_null(strstr(jx_last_error(), "u32[4]"));
  jx_clear_error();
  assert_int_equal(jx_threefry2x32(u, NULL, u, u, &y0, &y1), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "jx_threefry2x32: argument 1 is NULL"));
  jx_clear_error();
  assert_int_equal(jx_threefry2x32(u, u, u, u, &y0, NULL), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "output pointer is NULL"));
}

static void poison_propagates(void **state) {
  (void)state;
  jx_array *bad = jx_random_split(jx_zeros(JX_F32, JX_SHAPE(2)), 2);
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_random_uniform(bad, JX_F32, JX_SHAPE(2), 0, 1)));
  assert_int_equal(jx_last_status(), JX_OK); /* no new error for a poisoned input */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(threefry_known_answers, setup, teardown),
      cmocka_unit_test_setup_teardown(threefry_scalars_and_empty, setup, teardown),
      cmocka_unit_test_setup_teardown(ops_agree_with_the_hash, setup, teardown),
      cmocka_unit_test_setup_teardown(fma_primitive, setup, teardown),
      cmocka_unit_test_setup_teardown(key_from_seed, setup, teardown),
      cmocka_unit_test_setup_teardown(bernoulli_draws_in_the_mode_float, setup, teardown),
      cmocka_unit_test_setup_teardown(uniform_is_in_range, setup, teardown),
      cmocka_unit_test_setup_teardown(bit_widths_agree, setup, teardown),
      cmocka_unit_test_setup_teardown(random_bits_rule_rejects, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_keys_are_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_arguments_are_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_hash_operands_are_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(poison_propagates, setup, teardown),
      cmocka_unit_test_setup_teardown(eager_draws_match_the_traced_recipe, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
