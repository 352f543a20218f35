/* The Gaussian-process regression of examples/gp_regression.c (gp.h)
 * against the same program in JAX (tests/golden/gen_gp_regression.py): the
 * data jx's PRNG draws is the data JAX fitted, the negative log marginal
 * likelihood and its jx_grad at the start match JAX's, and the
 * hyperparameters Adam fits match JAX's within 1e-4. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

#include "gp.h"

static jx_array *golden(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/gp_regression/%s.npy", JX_TEST_DATA, name);
  jx_array *a = jx_load_npy(path);
  check_ok(jx_last_status());
  return a;
}

/* |got - want| <= tol elementwise, n f64 values */
static void assert_within(jx_array *got, jx_array *want, int n, double tol) {
  double g[GP_STEPS], w[GP_STEPS];
  assert_true(n <= GP_STEPS && jx_size(got) == n && jx_size(want) == n);
  check_ok(jx_read(got, g, sizeof(double) * (size_t)n));
  check_ok(jx_read(want, w, sizeof(double) * (size_t)n));
  for (int i = 0; i < n; i++) {
    if (!(fabs(g[i] - w[i]) <= tol)) fprintf(stderr, "[%d]: %.12g vs %.12g\n", i, g[i], w[i]);
    assert_true(fabs(g[i] - w[i]) <= tol);
  }
}

static void data_is_the_data_jax_fitted(void **state) {
  (void)state;
  jx_array *x, *y;
  check_ok(gp_make_data(&x, &y));
  assert_within(x, golden("x"), GP_POINTS, 0);
  assert_within(y, golden("y"), GP_POINTS, 0);
  jx_release(x);
  jx_release(y);
}

static void likelihood_and_gradient_match_jax(void **state) {
  (void)state;
  jx_array *x = golden("x"), *y = golden("y"), *t = gp_initial_theta();
  jx_array *in[5], *out[3], *nll;
  for (int i = 0; i < 3; i++)
    in[i] = jx_reshape(jx_slice(t, JX_SHAPE(i), JX_SHAPE(i + 1), JX_SHAPE(1)), JX_SHAPE());
  in[3] = x;
  in[4] = y;
  jx_fn *loss = gp_loss_fn(), *grad = jx_grad(loss, JX_AXES(0, 1, 2));
  check_ok(jx_call(loss, in, &nll));
  check_ok(jx_call(grad, in, out));
  assert_within(nll, golden("nll0"), 1, 1e-12);
  assert_within(jx_stack(3, out, 0), golden("grad0"), 3, 1e-12);
  jx_fn_release(grad);
  jx_fn_release(loss);
}

static void fitted_hyperparameters_match_jax(void **state) {
  (void)state;
  double nll[GP_STEPS];
  jx_array *theta = gp_fit(golden("x"), golden("y"), nll);
  assert_non_null(theta);
  assert_within(theta, golden("theta"), 3, 1e-4);
  /* the loss along the way: jx's Adam keeps its moments in f32 (optax's
   * are f64 here), which moves the early steps by about 1e-6 */
  assert_within(jx_array_from(JX_F64, JX_SHAPE(GP_STEPS), nll), golden("nll"), GP_STEPS, 1e-5);
  jx_release(theta);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(data_is_the_data_jax_fitted, setup, teardown),
      cmocka_unit_test_setup_teardown(likelihood_and_gradient_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(fitted_hyperparameters_match_jax, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
