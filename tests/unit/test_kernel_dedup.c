/* Kernels keyed by their content (src/compile/kernel_batch.h): the renderer
 * names a kernel's values by their place in the group, not by program
 * variable, so identical fused groups share one compiled kernel.
 * - A stack of N identical layers (each with weights of its own) compiles
 *   the same distinct kernels at every depth, one layer's and the tail's,
 *   while every layer still runs its own kernel steps; the results are the
 *   eager bits.
 * - The key is not too coarse: groups that differ in dtype, an integer
 *   power, a broadcast pattern, rank, a pad's window or the reduction get
 *   kernels of their own, and each gives its own eager bits; groups that
 *   differ only in their dims (arguments of a kernel, which is generic in
 *   the shape) share one, and so do contiguous groups of any rank (their
 *   dims merge into one: fusion.h's collapsed).
 * - A program of many distinct kernels compiles them as one unit per core
 *   (at most one per 8 kernels), with the eager bits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"
#include "fusion_check.h"
#include "compile/kernel_batch.h"
#include "compile/toolchain.h"

enum { ROWS = 8, WIDTH = 32, MAX_LAYERS = 6 };

/* N layers of a = h @ w[l]; t = tanh(a + b[l]) * a; h = t - max(t, -1)
 * (two kernels: the row reduction that also stores t, and the subtraction),
 * then sum((h @ w_out)^2, -1) (one more). Every layer has weights of its
 * own, as a model's do: the layers differ only in their variables. */
static void layers(void *ctx, jx_array *const *in, jx_array **out) {
  int n = *(const int *)ctx;
  jx_array *h = in[0];
  for (int l = 0; l < n; l++) {
    jx_array *a = jx_matmul(h, in[2 + 2 * l]);
    jx_array *t = jx_mul(jx_tanh(jx_add(a, in[3 + 2 * l])), a);
    h = jx_sub(t, jx_max(t, JX_AXES(-1), 1));
  }
  out[0] = jx_sum(jx_integer_pow(jx_matmul(h, in[1]), 2), JX_AXES(-1), 0);
}

/* The kernel steps and distinct kernels of the jitted n-layer stack (-1:
 * not counted under CUDA), after checking its bits against eager. */
static void stack_kernels(int n, jx_array **in, int *steps, int *distinct) {
  jx_fn *f = jx_fn_create("layers", 2 + 2 * n, 1, layers, &n);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *want[1], *got[1];
  assert_int_equal(jx_call(f, in, want), JX_OK);
  assert_int_equal(jx_call(jf, in, got), JX_OK);
  float a[ROWS], b[ROWS];
  assert_int_equal(jx_read(want[0], a, sizeof a), JX_OK);
  assert_int_equal(jx_read(got[0], b, sizeof b), JX_OK);
  assert_memory_equal(a, b, sizeof a);
  *steps = *distinct = -1;
  if (TEST_CPU_ONLY("the CPU executable's kernel counts")) {
    jx_aval av[2 + 2 * MAX_LAYERS];
    for (int i = 0; i < 2 + 2 * n; i++)
      av[i] = (jx_aval){jx_dtype_of(in[i]), 0, jx_shape_of(in[i]), 0};
    jx_program *p = jx_fn_program(jf, av);
    assert_non_null(p);
    *steps = jx_executable_kernels(jx_program_executable(p), NULL);
    *distinct = jx_executable_distinct_kernels(jx_program_executable(p));
    jx_program_release(p);
  }
  jx_fn_release(jf);
  jx_fn_release(f);
}

static void identical_layers_share_kernels(void **state) {
  (void)state;
  jx_array *in[2 + 2 * MAX_LAYERS] = {values(JX_F32, JX_SHAPE(ROWS, WIDTH), 1),
                                      values(JX_F32, JX_SHAPE(WIDTH, WIDTH), 2)};
  for (int l = 0; l < MAX_LAYERS; l++) {
    in[2 + 2 * l] = values(JX_F32, JX_SHAPE(WIDTH, WIDTH), 3 + l);
    in[3 + 2 * l] = values(JX_F32, JX_SHAPE(WIDTH), 20 + l);
  }
  const int depths[] = {1, 2, 6};
  for (int k = 0; k < 3; k++) {
    int steps, distinct;
    stack_kernels(depths[k], in, &steps, &distinct);
    if (steps < 0) continue;
    printf("%d layers: %d kernel steps, %d distinct kernels\n", depths[k], steps, distinct);
    assert_int_equal(steps, 2 * depths[k] + 1); /* every layer runs its kernels */
    assert_int_equal(distinct, 3);              /* the layer's two and the tail's */
  }
  for (int i = 0; i < 2 + 2 * MAX_LAYERS; i++) jx_release(in[i]);
}

/* The variants of the second test: one fused group each. */
typedef enum {
  TANH_F32,     /* tanh(x * 1.5) + x on f32[4, 33] */
  TANH_F64,     /* the same on f64 */
  TANH_RANK3,   /* the same on f32[2, 2, 33]: collapsed to one dim, TANH_F32's kernel */
  TANH_OTHER,   /* the same on f32[5, 17]: other dims, the same kernel */
  POW3,         /* x^3 + x */
  POW5,         /* x^5 + x */
  BIAS_COLUMNS, /* x * 2 + b with b: f32[33] along the rows */
  BIAS_ROWS,    /* x * 2 + b with b: f32[4, 1] along the columns */
  BIAS_MIDDLE,  /* x * 2 + b on f32[2, 2, 33], b: f32[2, 1, 33]: no dims merge, rank 3 */
  PAD1,         /* pad(x * 2) by 1 before the columns */
  PAD2,         /* pad(x * 2) by 2 before the columns */
  SUM_SQUARES,  /* sum(x * x + x, -1) */
  MAX_SQUARES,  /* max(x * x + x, -1) */
} variant;

static void one_group(void *ctx, jx_array *const *in, jx_array **out) {
  variant v = *(const variant *)ctx;
  jx_array *x = in[0];
  jx_dtype dt = jx_dtype_of(x);
  switch (v) {
  case TANH_F32:
  case TANH_F64:
  case TANH_RANK3:
  case TANH_OTHER: out[0] = jx_add(jx_tanh(jx_mul(x, jx_scalar(dt, 1.5))), x); break;
  case POW3:
  case POW5: out[0] = jx_add(jx_integer_pow(x, v == POW3 ? 3 : 5), x); break;
  case BIAS_COLUMNS:
  case BIAS_ROWS:
  case BIAS_MIDDLE: out[0] = jx_add(jx_mul(x, jx_scalar(dt, 2)), in[1]); break;
  case PAD1:
  case PAD2:
    out[0] = jx_mul(jx_exp(jx_pad(x, JX_SHAPE(0, v == PAD1 ? 1 : 2), JX_SHAPE(0, 0), -1.0)),
                    jx_scalar(dt, 2));
    break;
  case SUM_SQUARES: out[0] = jx_sum(jx_add(jx_mul(x, x), x), JX_AXES(-1), 0); break;
  case MAX_SQUARES: out[0] = jx_max(jx_add(jx_mul(x, x), x), JX_AXES(-1), 0); break;
  }
}

/* Checks variant v's bits against eager and adds its program's kernels to
 * t; returns how many kernel groups it had. */
static int add_variant(jx_kernel_tu *t, const variant *v) {
  jx_array *in[2] = {NULL, NULL};
  switch (*v) {
  case TANH_F64: in[0] = values(JX_F64, JX_SHAPE(4, 33), 1); break;
  case TANH_RANK3: in[0] = values(JX_F32, JX_SHAPE(2, 2, 33), 1); break;
  case TANH_OTHER: in[0] = values(JX_F32, JX_SHAPE(5, 17), 1); break;
  case BIAS_COLUMNS: in[1] = values(JX_F32, JX_SHAPE(33), 2); break;
  case BIAS_ROWS: in[1] = values(JX_F32, JX_SHAPE(4, 1), 2); break;
  case BIAS_MIDDLE:
    in[0] = values(JX_F32, JX_SHAPE(2, 2, 33), 1);
    in[1] = values(JX_F32, JX_SHAPE(2, 1, 33), 2);
    break;
  default: break;
  }
  if (!in[0]) in[0] = values(JX_F32, JX_SHAPE(4, 33), 1);
  const int nin = in[1] ? 2 : 1;
  jx_fn *f = jx_fn_create("one_group", nin, 1, one_group, (void *)v);
  plan r = jit_matches_eager(f, nin, in, 1);
  jx_aval av[2];
  for (int i = 0; i < nin; i++) av[i] = (jx_aval){jx_dtype_of(in[i]), 0, jx_shape_of(in[i]), 0};
  jx_fn *jf = jx_jit(f, NULL);
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  jx_fusion_group *g = NULL;
  int ng = jx_fuse(p, &g);
  assert_true(ng >= 0);
  int kernels = jx_kernel_tu_add(t, p, g, ng, NULL, NULL);
  assert_true(kernels >= 0);
  if (r.kernels >= 0) assert_int_equal(kernels, r.kernels);
  free(g);
  jx_program_release(p);
  jx_fn_release(jf);
  jx_fn_release(f);
  for (int i = 0; i < nin; i++) jx_release(in[i]);
  return kernels;
}

/* The distinct kernels of variants a and b together (each one kernel). */
static int distinct_pair(variant a, variant b) {
  jx_kernel_tu t;
  assert_int_equal(jx_kernel_tu_init(&t), JX_OK);
  assert_int_equal(add_variant(&t, &a), 1);
  assert_int_equal(add_variant(&t, &b), 1);
  int n = t.n;
  jx_kernel_tu_free(&t);
  return n;
}

static void different_kernels_stay_apart(void **state) {
  (void)state;
  const variant apart[][2] = {{TANH_F32, TANH_F64},
                              {BIAS_COLUMNS, BIAS_MIDDLE},
                              {POW3, POW5},
                              {BIAS_COLUMNS, BIAS_ROWS},
                              {PAD1, PAD2},
                              {SUM_SQUARES, MAX_SQUARES},
                              {TANH_F32, SUM_SQUARES},
                              {POW3, TANH_F32}};
  for (size_t k = 0; k < sizeof apart / sizeof apart[0]; k++) {
    int n = distinct_pair(apart[k][0], apart[k][1]);
    if (n != 2) fail_msg("variants %d and %d share a kernel", apart[k][0], apart[k][1]);
  }
  /* dims are the kernel's arguments: one kernel serves both shapes */
  assert_int_equal(distinct_pair(TANH_F32, TANH_OTHER), 1);
  assert_int_equal(distinct_pair(TANH_F32, TANH_RANK3), 1); /* both one contiguous dim */
  assert_int_equal(distinct_pair(TANH_F32, TANH_F32), 1);
}

enum { POWERS = 20 };

/* POWERS groups of distinct kernels: x[:, :33 + k]^(k + 2) + x[:, :33 + k] */
static void powers(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  for (int k = 0; k < POWERS; k++) {
    jx_array *x = jx_slice(in[0], JX_SHAPE(0, 0), JX_SHAPE(4, 33 + k), JX_SHAPE());
    out[k] = jx_add(jx_integer_pow(x, k + 2), x);
  }
}

/* A program of many distinct kernels compiles them as one unit per core
 * (at most one per 8 kernels), at once, with the eager bits. */
static void many_kernels_compile_in_units(void **state) {
  (void)state;
  if (!TEST_CPU_ONLY("the CPU toolchain's units")) return;
  jx_array *x = values(JX_F32, JX_SHAPE(4, 64), 5);
  jx_fn *f = jx_fn_create("powers", 1, POWERS, powers, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *want[POWERS], *got[POWERS];
  assert_int_equal(jx_call(f, &x, want), JX_OK);
  jx_kernel_stats before = jx_kernel_cache_stats();
  if (jx_call(jf, &x, got)) fail_msg("%s", jx_last_error());
  jx_kernel_stats after = jx_kernel_cache_stats();
  for (int k = 0; k < POWERS; k++) {
    float a[4 * 64], b[4 * 64];
    size_t bytes = sizeof(float) * 4 * (size_t)(33 + k);
    assert_int_equal(jx_read(want[k], a, bytes), JX_OK);
    assert_int_equal(jx_read(got[k], b, bytes), JX_OK);
    assert_memory_equal(a, b, bytes);
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t units = POWERS / 8 < cores ? POWERS / 8 : cores;
  if (units < 1) units = 1;
  /* each unit compiled, or found on disk from an earlier run */
  assert_int_equal((after.compiles - before.compiles) + (after.disk_hits - before.disk_hits),
                   units);
  jx_aval av = {JX_F32, 0, {2, {4, 64}}, 0};
  jx_program *p = jx_fn_program(jf, &av);
  assert_non_null(p);
  assert_int_equal(jx_executable_distinct_kernels(jx_program_executable(p)), POWERS);
  jx_program_release(p);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_release(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(identical_layers_share_kernels),
      cmocka_unit_test(different_kernels_stay_apart),
      cmocka_unit_test(many_kernels_compile_in_units),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
