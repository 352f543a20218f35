/* A training step that stays on the device (src/cuda/cuda_exec.h), under
 * tests/cuda_fake's driver (kernels in tests/cuda_emu's emulator) and its
 * fake cuBLASLt (GEMMs computed on the emulated device memory):
 *  - integer elementwise equations (index arithmetic, comparisons, shifts,
 *    converts, selects on masks) are kernels, with the reference kernels'
 *    semantics: the bits of the CPU jit, edge cases included (x / 0,
 *    INT_MIN / -1, shifts past the width, float -> int saturation and NaN);
 *  - a small GPT's train step copies nothing between host and device
 *    after its first call, and its loss is the CPU jit's within a bound
 *    derived below.
 * Oracles: the CPU jit of the same functions; the fake driver's copy
 * counters; the executor's host-equation count. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/cuda.h>
#include <jx/jx.h>

#include "cuda/cuda_copy.h"
#include "cuda/cuda_exec.h"
#include "ir/program.h"
#include "cuda_test_driver.h"
#include "test_util.h"
#include "trace/fn.h"

/* The CUDA executable of f's program for these inputs: kernels, host
 * equations and GEMMs. */
static int executable_counts(jx_fn *gpu, int nin, jx_array *const *in, int *host, int *gemms) {
  jx_aval av[80];
  assert_true(nin <= 80);
  for (int i = 0; i < nin; i++) av[i] = (jx_aval){jx_dtype_of(in[i]), 0, jx_shape_of(in[i]), 0};
  jx_program *p = jx_fn_program(gpu, av);
  assert_non_null(p);
  assert_non_null(jx_program_executable(p));
  int k = jx_cuda_executable_kernels(jx_program_executable(p), host, gemms);
  jx_program_release(p);
  return k;
}

static void expect_same_bits(jx_array *want, jx_array *got, int o) {
  assert_true(jx_shape_equal(jx_shape_of(want), jx_shape_of(got)));
  assert_int_equal(jx_dtype_of(want), jx_dtype_of(got));
  size_t bytes = (size_t)jx_shape_numel(jx_shape_of(want)) * jx_dtype_size(jx_dtype_of(want));
  char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
  assert_non_null(a);
  assert_non_null(b);
  check_ok(jx_read(want, a, bytes));
  check_ok(jx_read(got, b, bytes));
  if (memcmp(a, b, bytes) != 0) {
    for (size_t i = 0; i < bytes; i++)
      if (a[i] != b[i])
        fail_msg("integer output %d (%s): byte %zu differs from the CPU jit", o,
                 jx_dtype_name(jx_dtype_of(want)), i);
  }
  free(a);
  free(b);
}

/* ---- integer equations as kernels ---- */

enum { NI = 24, INT_OUTS = 16 };

/* in: i32 a, i32 b, u32 c, i64 d, i64 e, u8 f, f32 x, f32 table[8, 3] */
static void int_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *a = in[0], *b = in[1], *c = in[2], *d = in[3], *e = in[4], *f = in[5], *x = in[6];
  out[0] = jx_floor_divide(a, b); /* lax.div and rem, sign fix-ups: x / 0, INT_MIN / -1 */
  out[1] = jx_rem(a, b);
  out[2] = jx_sub(jx_add(jx_mul(a, b), a), b); /* wraps */
  out[3] = jx_shift_left(a, b);                /* counts < 0 and >= 32 give 0 */
  out[4] = jx_shift_right_arithmetic(a, b);
  out[5] = jx_shift_right_logical(c, jx_astype(b, JX_U32));
  out[6] = jx_bitwise_xor(jx_bitwise_and(a, b), jx_bitwise_not(jx_bitwise_or(a, b)));
  out[7] = jx_astype(x, JX_I32); /* truncates, saturates, NaN -> 0 */
  out[8] = jx_astype(x, JX_U8);
  out[9] = jx_astype(x, JX_I64);
  out[10] = jx_add(jx_astype(d, JX_F32), jx_astype(a, JX_F32)); /* i64 -> f32 rounds once */
  out[11] = jx_astype(d, JX_I8);                                /* wraps */
  out[12] = jx_where(jx_lt(a, b), jx_maximum(a, b), jx_minimum(jx_neg(a), b));
  out[13] = jx_add(jx_floor_divide(d, e), jx_mul(d, e));
  out[14] = jx_add(jx_mul(f, f), f); /* u8 wraps */
  /* jx_take's wrapping of negative indices (lt, add, select_n on the
   * indices) feeds the gather kernel */
  out[15] = jx_take(in[7], jx_rem(a, jx_scalar(JX_I32, 8)), 0);
}

static void test_integer_kernels(void **state) {
  (void)state;
  jx_scope_begin();
  int32_t a[NI] = {7,  -7, 7,       -7, INT_MIN, INT_MAX, 0, 5, -1, 123456789, 1 << 30, -3,
                   12, 40, -100000, 1,  2,       3,       9, 6, -9, 77,        -77,     31};
  int32_t b[NI] = {2,  2, -2, -2, -1, -1, 0, 0,  0, 31, 32, 33,
                   -1, 1, 5,  31, 30, -5, 4, 64, 3, -3, 7,  1};
  uint32_t c[NI];
  int64_t d[NI], e[NI];
  uint8_t f[NI];
  float x[NI] = {1.5f,  -1.5f, 2.9f,  -2.9f,  NAN,   INFINITY, -INFINITY,  3e9f,
                 -3e9f, 255.f, 256.f, 300.7f, -0.5f, 1e20f,    -1e20f,     0.f,
                 -0.f,  65.5f, 7.f,   -8.f,   2e9f,  -2.2e9f,  16777217.f, 9e18f};
  for (int i = 0; i < NI; i++) {
    c[i] = (uint32_t)a[i] * 2654435761u;
    d[i] = (int64_t)a[i] * 3000000000ll + i;
    e[i] = i % 5 == 0 ? 0 : i % 7 == 0 ? -1 : (int64_t)b[i] * 1000003 + 1;
    f[i] = (uint8_t)(a[i] * 37 + 11);
  }
  d[3] = INT64_MIN;
  e[3] = -1; /* INT64_MIN / -1 wraps */
  d[5] = (1ll << 53) + 1;
  float table[8 * 3];
  for (int i = 0; i < 24; i++) table[i] = (float)i * 0.5f;
  jx_array *in[8] = {jx_array_from(JX_I32, (jx_shape){1, {NI}}, a),
                     jx_array_from(JX_I32, (jx_shape){1, {NI}}, b),
                     jx_array_from(JX_U32, (jx_shape){1, {NI}}, c),
                     jx_array_from(JX_I64, (jx_shape){1, {NI}}, d),
                     jx_array_from(JX_I64, (jx_shape){1, {NI}}, e),
                     jx_array_from(JX_U8, (jx_shape){1, {NI}}, f),
                     jx_array_from(JX_F32, (jx_shape){1, {NI}}, x),
                     jx_array_from(JX_F32, (jx_shape){2, {8, 3}}, table)};
  jx_fn *fn = jx_fn_create("integers", 8, INT_OUTS, int_body, NULL);
  jx_array *want[INT_OUTS], *got[INT_OUTS];
  setenv("JX_PLATFORM", "cpu", 1);
  jx_fn *cpu = jx_jit(fn, NULL);
  check_ok(jx_call(cpu, in, want));
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *gpu = jx_jit(fn, NULL);
  check_ok(jx_call(gpu, in, got));
  setenv("JX_PLATFORM", "cpu", 1);
  for (int o = 0; o < INT_OUTS; o++) expect_same_bits(want[o], got[o], o);
  int host = 0, gemms = 0, kernels = executable_counts(gpu, 8, in, &host, &gemms);
  fprintf(stderr, "integers: %d kernels, %d equations on the host\n", kernels, host);
  assert_true(kernels >= 1);
  assert_int_equal(host, 0);
  jx_fn_release(gpu);
  jx_fn_release(cpu);
  jx_fn_release(fn);
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

int main(void) {
  int rc = cuda_test_driver("test_cuda_step", 0);
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_integer_kernels, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
