/* Which groups the jit compiles into kernels, and that they give the eager
 * kernels' bits:
 * - integer_pow inside a kernel is written out as the products the eager
 *   kernel forms (so the loop vectorizes) for |n| <= 16, and calls the
 *   helper beyond; every exponent gives the eager bits, f32 and f64;
 * - one computation that reads a broadcast (softmax's divide by the row
 *   sums, a bias add) is a kernel reading the broadcast's operand in place,
 *   not a materialized broadcast followed by the reference kernel;
 * - one large elementwise computation alone is a kernel too;
 * - bf16 chains are kernels that compute in float and round after every
 *   equation as the reference kernels do: the same bits, NaN included;
 * - an elementwise kernel runs over its shape with the dims of 1 dropped and
 *   the dims every load reads contiguously merged ([N, 1] as [N], not a
 *   row per element), with the eager bits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "compile/executable.h"
#include "compile/fusion.h"
#include "compile/render_c.h"
#include "trace/fn.h"
#include "test_util.h"

static double wave(int64_t i, const void *seed) {
  return sin(0.37 * (double)i + *(const int *)seed) * (1 + (double)(i % 5) * 0.25);
}

static jx_array *values(jx_dtype dt, jx_shape s, int seed) {
  return test_array_of(dt, s, wave, &seed);
}

/* jx(f)(in) and f(in) agree bit for bit; returns the jitted program's kernels */
/* A kernel count jit_matches_eager gave (-1: not counted under CUDA). */
static void expect_kernels(int kernels, int want) {
  if (kernels >= 0) assert_int_equal(kernels, want);
}

static int jit_matches_eager(jx_fn *f, int nin, jx_array **in, jx_dtype dt) {
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *want[1], *got[1];
  assert_int_equal(jx_call(f, in, want), JX_OK);
  assert_int_equal(jx_call(jf, in, got), JX_OK);
  jx_shape s = jx_shape_of(want[0]);
  assert_true(jx_shape_equal(s, jx_shape_of(got[0])));
  size_t bytes = (size_t)jx_shape_numel(s) * (dt == JX_F64 ? 8 : 4);
  char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
  assert_int_equal(jx_read(want[0], a, bytes), JX_OK);
  assert_int_equal(jx_read(got[0], b, bytes), JX_OK);
  assert_memory_equal(a, b, bytes);
  free(a);
  free(b);
  jx_aval av[4];
  for (int i = 0; i < nin; i++) av[i] = (jx_aval){jx_dtype_of(in[i]), 0, jx_shape_of(in[i]), 0};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  int kernels = TEST_CPU_ONLY("the CPU executable's kernel count")
                    ? jx_executable_kernels(jx_program_executable(p), NULL)
                    : -1; /* not counted */
  jx_program_release(p);
  jx_fn_release(jf);
  return kernels;
}

/* (x * 1.5)^n: the multiply and the power are one kernel */
static void scaled_pow(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = jx_integer_pow(jx_mul(in[0], jx_scalar(JX_F32, 1.5)), *(const int *)ctx);
}

static void integer_pow_in_kernels(void **state) {
  (void)state;
  const int exps[] = {-17, -5, -2, -1, 0, 1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31};
  for (int d = 0; d < 2; d++)
    for (size_t k = 0; k < sizeof exps / sizeof exps[0]; k++) {
      jx_dtype dt = d ? JX_F64 : JX_F32;
      jx_fn *f = jx_fn_create("scaled_pow", 1, 1, scaled_pow, (void *)&exps[k]);
      jx_array *x = jx_keep(values(dt, JX_SHAPE(3, 70), (int)k));
      expect_kernels(jit_matches_eager(f, 1, &x, dt), 1);
      /* written out up to 16; the helper beyond */
      jx_aval av = {dt, 0, {2, {3, 70}}, 0};
      jx_program *p = jx_fn_program(f, &av);
      jx_fusion_group *g = NULL;
      int ng = jx_fuse(p, &g), seen = 0;
      for (int i = 0; i < ng; i++) {
        if (!jx_fusion_group_is_kernel(&g[i])) continue;
        char *src = jx_render_c(p, &g[i], "k");
        assert_non_null(src);
        int calls = strstr(src, "jx_ipow_") != NULL;
        assert_int_equal(calls, abs(exps[k]) > 16);
        free(src);
        seen = 1;
      }
      assert_true(seen);
      free(g);
      jx_program_release(p);
      jx_release(x);
      jx_fn_release(f);
    }
}

/* x / sum(x, -1, keepdims): the divide reads the sums through a broadcast */
static void normalize_rows(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_div(in[0], jx_sum(in[0], JX_AXES(-1), 1));
}

/* x + b with b: f[n] added along the rows */
static void add_bias(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(in[0], in[1]);
}

static void one_computation_reading_a_broadcast_is_a_kernel(void **state) {
  (void)state;
  for (int d = 0; d < 2; d++) {
    jx_dtype dt = d ? JX_F64 : JX_F32;
    jx_fn *f = jx_fn_create("normalize_rows", 1, 1, normalize_rows, NULL);
    jx_array *x = jx_keep(jx_exp(values(dt, JX_SHAPE(4, 3, 50), 1)));
    /* the row sums (a reduction run as it is) and one kernel for the divide */
    expect_kernels(jit_matches_eager(f, 1, &x, dt), 1);
    jx_release(x);
    jx_fn_release(f);

    f = jx_fn_create("add_bias", 2, 1, add_bias, NULL);
    jx_array *in[2] = {jx_keep(values(dt, JX_SHAPE(6, 40), 2)),
                       jx_keep(values(dt, JX_SHAPE(40), 3))};
    expect_kernels(jit_matches_eager(f, 2, in, dt), 1);
    jx_release(in[0]);
    jx_release(in[1]);
    jx_fn_release(f);
  }
}

/* bf16 through every kind of member: arithmetic, transcendental, a power,
 * a comparison and select, converts both ways, a broadcast bias */
static void bf16_chain(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0], *b = in[1];
  jx_array *h = jx_add(jx_mul(x, jx_scalar(JX_F32, 1.7)), b);
  jx_array *t = jx_tanh(jx_mul(h, jx_exp(jx_neg(jx_abs(x)))));
  jx_array *p = jx_integer_pow(jx_sub(t, h), 3);
  jx_array *wide = jx_astype(jx_div(p, jx_add(jx_abs(h), jx_scalar(JX_F32, 0.5))), JX_F32);
  jx_array *back = jx_astype(jx_mul(wide, jx_scalar(JX_F32, 3.0)), JX_BF16);
  out[0] = jx_where(jx_gt(x, b), back, jx_sqrt(jx_abs(p)));
}

static void bf16_chains_are_kernels_with_the_eager_bits(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("bf16_chain", 2, 1, bf16_chain, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *x = jx_keep(jx_astype(values(JX_F32, JX_SHAPE(5, 300), 4), JX_BF16));
  /* a bias with a NaN, an infinity and a huge value that overflows */
  float bias[300];
  for (int i = 0; i < 300; i++) bias[i] = (float)(0.01 * i - 1.5);
  bias[7] = NAN;
  bias[8] = INFINITY;
  bias[9] = 3e38f;
  jx_array *b = jx_keep(jx_astype(jx_array_from(JX_F32, JX_SHAPE(300), bias), JX_BF16));
  jx_array *want[1], *got[1];
  assert_int_equal(jx_call(f, (jx_array *[]){x, b}, want), JX_OK);
  assert_int_equal(jx_call(jf, (jx_array *[]){x, b}, got), JX_OK);
  uint16_t a[1500], c[1500];
  assert_int_equal(jx_read(want[0], a, sizeof a), JX_OK);
  assert_int_equal(jx_read(got[0], c, sizeof c), JX_OK);
  assert_memory_equal(a, c, sizeof a);
  jx_aval av[2] = {{JX_BF16, 0, {2, {5, 300}}, 0}, {JX_BF16, 0, {1, {300}}, 0}};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  int fused = 0;
  if (TEST_CPU_ONLY("the CPU executable's kernel count")) {
    assert_true(jx_executable_kernels(jx_program_executable(p), &fused) >= 1);
    assert_true(fused >= 15); /* the chain, not one equation at a time */
  }
  jx_program_release(p);
  jx_release(x);
  jx_release(b);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* one elementwise op, picked by ctx, on positive inputs (log, sqrt, pow) */
static void single_op(void *ctx, jx_array *const *in, jx_array **out) {
  int k = *(const int *)ctx;
  jx_array *x = in[0], *y = in[1];
  jx_array *(*unary[])(jx_array *) = {jx_neg, jx_abs,  jx_exp,   jx_log,   jx_tanh,  jx_sin,
                                      jx_cos, jx_sqrt, jx_rsqrt, jx_expm1, jx_log1p, jx_erf};
  jx_array *(*binary[])(jx_array *, jx_array *) = {jx_add,     jx_sub,     jx_mul, jx_div,
                                                   jx_maximum, jx_minimum, jx_pow};
  enum { NU = sizeof unary / sizeof unary[0], NB = sizeof binary / sizeof binary[0] };
  out[0] = k < NU ? unary[k](x) : k < NU + NB ? binary[k - NU](x, y) : jx_lt(x, y);
}

static void one_large_computation_is_a_kernel(void **state) {
  (void)state;
  for (int d = 0; d < 2; d++)
    for (int k = 0; k < 20; k++) {
      jx_dtype dt = d ? JX_F64 : JX_F32;
      jx_fn *f = jx_fn_create("single_op", 2, 1, single_op, &k);
      jx_array *in[2] = {
          jx_keep(jx_add(jx_abs(values(dt, JX_SHAPE(80, 100), 5)), jx_scalar(JX_F32, 0.1))),
          jx_keep(jx_abs(values(dt, JX_SHAPE(80, 100), 6)))};
      /* the comparison's result is bool: compared as bytes below */
      jx_fn *jf = jx_jit(f, NULL);
      jx_array *want[1], *got[1];
      assert_int_equal(jx_call(f, in, want), JX_OK);
      assert_int_equal(jx_call(jf, in, got), JX_OK);
      size_t bytes = (size_t)8000 * (jx_dtype_of(want[0]) == JX_BOOL ? 1 : d ? 8 : 4);
      char *a = malloc(bytes), *b = malloc(bytes);
      assert_int_equal(jx_read(want[0], a, bytes), JX_OK);
      assert_int_equal(jx_read(got[0], b, bytes), JX_OK);
      if (memcmp(a, b, bytes) != 0)
        fail_msg("op %d (%s): jit differs from eager", k, d ? "f64" : "f32");
      free(a);
      free(b);
      jx_aval av[2] = {{dt, 0, {2, {80, 100}}, 0}, {dt, 0, {2, {80, 100}}, 0}};
      jx_program *p = jx_fn_program(jf, av);
      assert_non_null(p);
      if (TEST_CPU_ONLY("the CPU executable's kernel count"))
        assert_int_equal(jx_executable_kernels(jx_program_executable(p), NULL), 1);
      jx_program_release(p);
      jx_release(in[0]);
      jx_release(in[1]);
      jx_fn_release(jf);
      jx_fn_release(f);
    }
}

/* tanh(x * 1.5) + y, y broadcast to x's shape */
static void tanh_plus(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_tanh(jx_mul(in[0], jx_scalar(jx_dtype_of(in[0]), 1.5))), in[1]);
}

static void kernels_collapse_their_shape(void **state) {
  (void)state;
  const struct {
    jx_shape x, y, want;
  } cases[] = {
      {JX_SHAPE(300, 1), JX_SHAPE(300, 1), JX_SHAPE(300)},  /* a row per element, before */
      {JX_SHAPE(2, 3, 5), JX_SHAPE(2, 3, 5), JX_SHAPE(30)}, /* contiguous: one dim */
      {JX_SHAPE(3, 1, 50, 1), JX_SHAPE(3, 1, 1, 1), JX_SHAPE(3, 50)}, /* y along the 50 */
      {JX_SHAPE(4, 6, 1), JX_SHAPE(1, 6, 1), JX_SHAPE(4, 6)},         /* y along the 4 */
      {JX_SHAPE(1, 1), JX_SHAPE(1, 1), JX_SHAPE(1, 1)},               /* one element: kept */
  };
  for (int d = 0; d < 2; d++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      jx_dtype dt = d ? JX_F64 : JX_F32;
      jx_fn *f = jx_fn_create("tanh_plus", 2, 1, tanh_plus, NULL);
      jx_array *in[2] = {jx_keep(values(dt, cases[c].x, 1)), jx_keep(values(dt, cases[c].y, 2))};
      expect_kernels(jit_matches_eager(f, 2, in, dt), 1);
      jx_aval av[2] = {{dt, 0, cases[c].x, 0}, {dt, 0, cases[c].y, 0}};
      jx_program *p = jx_fn_program(f, av);
      jx_fusion_group *g = NULL;
      int ng = jx_fuse(p, &g), kernels = 0;
      for (int i = 0; i < ng; i++) {
        if (!jx_fusion_group_is_kernel(&g[i])) continue;
        kernels++;
        assert_true(jx_shape_equal(g[i].shape, cases[c].want));
        assert_int_equal(g[i].collapsed, cases[c].want.rank < cases[c].x.rank);
      }
      assert_int_equal(kernels, 1);
      free(g);
      jx_program_release(p);
      jx_release(in[0]);
      jx_release(in[1]);
      jx_fn_release(f);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(integer_pow_in_kernels),
      cmocka_unit_test(one_computation_reading_a_broadcast_is_a_kernel),
      cmocka_unit_test(one_large_computation_is_a_kernel),
      cmocka_unit_test(bf16_chains_are_kernels_with_the_eager_bits),
      cmocka_unit_test(kernels_collapse_their_shape),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
