/* Recomputation (src/compile/recompute.c): under jit, a reverse-mode program
 * recomputes cheap forward values next to their backward reads instead of
 * keeping them. Oracles: the same program with recomputation off
 * (JX_RECOMPUTE=0) gives the same bits; the plan's peak memory drops; the
 * gradient matches finite differences. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

enum { B = 512, D = 128, H = 512, LAYERS = 6 };

/* inputs: x [B, D], then per layer w1 [D, H], w2 [H, D]: a residual stack of
 * GELU MLP blocks, as in a transformer; out: the mean of the last h^2 */
static void stack_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *(*act)(jx_array *) = ctx ? (jx_array * (*)(jx_array *)) ctx : jx_gelu;
  jx_array *h = in[0];
  for (int l = 0; l < LAYERS; l++)
    h = jx_add(h, jx_matmul(act(jx_matmul(h, in[1 + 2 * l])), in[2 + 2 * l]));
  out[0] = jx_mean(jx_mul(h, h), JX_AXES(), 0);
}

/* jax.nn.gelu's formula without jx_gelu's custom derivative: reverse mode
 * goes through its multiplies and tanh */
static jx_array *gelu_formula(jx_array *x) {
  jx_array *x3 = jx_mul(jx_scalar(JX_F32, 0.044715), jx_integer_pow(x, 3));
  jx_array *in = jx_mul(jx_scalar(JX_F32, 0.7978845608028654), jx_add(x, x3));
  return jx_mul(x, jx_mul(jx_scalar(JX_F32, 0.5), jx_add(jx_scalar(JX_F32, 1), jx_tanh(in))));
}

static jx_array *normal(uint32_t seed, jx_shape s, double scale) {
  return jx_mul(jx_random_normal(jx_random_key(seed), JX_F32, s), jx_scalar(JX_F32, scale));
}

static void inputs(jx_array **in) {
  in[0] = normal(1, JX_SHAPE(B, D), 1);
  for (int l = 0; l < LAYERS; l++) {
    in[1 + 2 * l] = normal(10 + (uint32_t)l, JX_SHAPE(D, H), 1 / sqrt((double)D));
    in[2 + 2 * l] = normal(20 + (uint32_t)l, JX_SHAPE(H, D), 0.5 / sqrt((double)H));
  }
}

/* A fresh jit of the stack's gradient (a new function: programs are cached
 * per function, so the environment is read when this one compiles). */
static jx_fn *jitted_grad(jx_fn **f, jx_fn **g) {
  *f = jx_fn_create("stack", 1 + 2 * LAYERS, 1, stack_body, NULL);
  *g = jx_value_and_grad_first(*f, 1 + 2 * LAYERS, 0); /* (loss, gradients...) */
  return jx_jit(*g, NULL);
}

static void recompute_keeps_bits_and_lowers_peak(void **state) {
  (void)state;
  enum { N = 1 + 2 * LAYERS };
  jx_array *in[N], *on[N + 1], *off[N + 1];
  inputs(in);
  jx_fn *f1, *g1, *f2, *g2;
  jx_fn *with = jitted_grad(&f1, &g1);
  jx_cost c_with, c_without;
  check_ok(jx_fn_cost(with, in, &c_with));
  check_ok(jx_call(with, in, on));
  setenv("JX_RECOMPUTE", "0", 1);
  jx_fn *without = jitted_grad(&f2, &g2);
  check_ok(jx_fn_cost(without, in, &c_without));
  check_ok(jx_call(without, in, off));
  unsetenv("JX_RECOMPUTE");
  for (int i = 0; i <= N; i++) {
    size_t n = (size_t)jx_size(on[i]) * sizeof(float);
    float *a = malloc(n), *b = malloc(n);
    check_ok(jx_read(on[i], a, n));
    check_ok(jx_read(off[i], b, n));
    assert_memory_equal(a, b, n); /* the clones compute what the originals did */
    free(a);
    free(b);
  }
  /* without: every GELU keeps its input and several [B, H] intermediates for
   * the backward pass; with: the intermediates die in the forward pass */
  double act = (double)B * H * sizeof(float);
  printf("peak per device: %.2f MiB with recomputation, %.2f MiB without; flops %.3g vs %.3g\n",
         c_with.peak_bytes_per_device / 1048576, c_without.peak_bytes_per_device / 1048576,
         c_with.flops, c_without.flops);
  assert_true(c_with.peak_bytes_per_device <= c_without.peak_bytes_per_device - 2 * act);
  assert_true(c_with.flops > c_without.flops); /* recomputing costs a little work */
  jx_fn *fns[] = {with, g1, f1, without, g2, f2};
  for (int i = 0; i < 6; i++) jx_fn_release(fns[i]);
}

/* jx_gelu's custom derivative is a function of the pre-activation, which a
 * GEMM makes: the backward keeps that alone for it (as it does for the
 * formula's own derivative) and makes the GELU and its derivative again, so
 * the peak is no higher than the formula's; keeping the derivative and the
 * output would add two [B, H] values per layer. */
static void custom_gelu_backward_keeps_only_the_pre_activation(void **state) {
  (void)state;
  enum { N = 1 + 2 * LAYERS };
  jx_array *in[N], *on[N + 1], *ref[N + 1];
  inputs(in);
  jx_fn *f1 = jx_fn_create("stack", N, 1, stack_body, NULL);
  jx_fn *f2 = jx_fn_create("stack_formula", N, 1, stack_body, (void *)gelu_formula);
  jx_fn *g1 = jx_value_and_grad_first(f1, N, 0), *g2 = jx_value_and_grad_first(f2, N, 0);
  jx_fn *custom = jx_jit(g1, NULL), *formula = jx_jit(g2, NULL);
  jx_cost c_custom, c_formula;
  check_ok(jx_fn_cost(custom, in, &c_custom));
  check_ok(jx_fn_cost(formula, in, &c_formula));
  printf("peak per device: %.2f MiB with the custom derivative, %.2f MiB through the formula\n",
         c_custom.peak_bytes_per_device / 1048576, c_formula.peak_bytes_per_device / 1048576);
  assert_true(c_custom.peak_bytes_per_device <= c_formula.peak_bytes_per_device);
  check_ok(jx_call(custom, in, on));
  check_ok(jx_call(formula, in, ref));
  for (int i = 0; i <= N; i++) { /* the same gradient, to rounding */
    size_t n = (size_t)jx_size(on[i]);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    check_ok(jx_read(on[i], a, n * sizeof(float)));
    check_ok(jx_read(ref[i], b, n * sizeof(float)));
    double worst = 0, scale = 0;
    for (size_t k = 0; k < n; k++) {
      worst = fmax(worst, fabs((double)a[k] - b[k]));
      scale = fmax(scale, fabs((double)b[k]));
    }
    assert_true(worst <= 1e-5 * scale + 1e-30);
    free(a);
    free(b);
  }
  jx_fn *fns[] = {custom, g1, f1, formula, g2, f2};
  for (int i = 0; i < 6; i++) jx_fn_release(fns[i]);
}

/* The recomputed gradient is the gradient: central differences in f64 along
 * one random direction of the first weight matrix. */
static void recomputed_gradient_matches_finite_differences(void **state) {
  (void)state;
  enum { N = 1 + 2 * LAYERS };
  jx_array *in[N], *grads[N + 1];
  inputs(in);
  jx_fn *f, *g;
  jx_fn *jg = jitted_grad(&f, &g);
  check_ok(jx_call(jg, in, grads));
  jx_array *dir = normal(99, JX_SHAPE(D, H), 1);
  double analytic = 0;
  check_ok(jx_read(jx_astype(jx_sum(jx_mul(grads[2], dir), JX_AXES(), 0), JX_F64), &analytic,
                   sizeof analytic));
  jx_array *in64[N], *lp, *lm;
  for (int i = 0; i < N; i++) in64[i] = jx_astype(in[i], JX_F64);
  double eps = 1e-4, vp, vm;
  jx_array *save = in64[1];
  in64[1] = jx_add(save, jx_mul(jx_astype(dir, JX_F64), jx_scalar(JX_F64, eps)));
  check_ok(jx_call(f, in64, &lp));
  in64[1] = jx_sub(save, jx_mul(jx_astype(dir, JX_F64), jx_scalar(JX_F64, eps)));
  check_ok(jx_call(f, in64, &lm));
  check_ok(jx_read(lp, &vp, sizeof vp));
  check_ok(jx_read(lm, &vm, sizeof vm));
  double numeric = (vp - vm) / (2 * eps);
  assert_true(fabs(analytic - numeric) <= 1e-3 * fabs(numeric) + 1e-5);
  jx_fn_release(jg);
  jx_fn_release(g);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(recompute_keeps_bits_and_lowers_peak, setup, teardown),
      cmocka_unit_test_setup_teardown(recomputed_gradient_matches_finite_differences, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(custom_gelu_backward_keeps_only_the_pre_activation, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
