/* The pseudo-spectral Burgers solver of examples/spectral_solver.c
 * (spectral.h) against the same program in JAX
 * (tests/golden/gen_spectral_solver.py): the gradient of the loss at the
 * start through all 20 steps, the loss along the 60 steps of gradient
 * descent, and the recovered initial condition match JAX's within 1e-12 of
 * their largest value (f64; FFTW and JAX's FFT round differently, by about
 * 1e-15 here); and the descent does its job: the loss falls by more than
 * 10^6 and u0 comes back within 1 % of the truth (relative L2). */
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

#include "spectral.h"

enum { CELLS = SPEC_N * SPEC_N };

static jx_array *golden(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/spectral_solver/%s.npy", JX_TEST_DATA, name);
  jx_array *a = jx_load_npy(path);
  check_ok(jx_last_status());
  return a;
}

/* max |got - want| <= tol * max(max |want|, 1), n f64 values */
static void assert_within(const char *what, jx_array *got, jx_array *want, int n, double tol) {
  static double g[CELLS], w[CELLS];
  assert_true(n <= CELLS && jx_size(got) == n && jx_size(want) == n);
  check_ok(jx_read(got, g, sizeof(double) * (size_t)n));
  check_ok(jx_read(want, w, sizeof(double) * (size_t)n));
  double scale = 1, worst = 0;
  for (int i = 0; i < n; i++) scale = fmax(scale, fabs(w[i]));
  for (int i = 0; i < n; i++) worst = fmax(worst, fabs(g[i] - w[i]));
  if (!(worst <= tol * scale))
    fail_msg("%s: differs from JAX by %.3g (scale %.3g, tolerance %.1g)", what, worst, scale, tol);
}

static void descent_matches_jax_and_recovers_u0(void **state) {
  (void)state;
  spectral_solver *s = spectral_create();
  jx_array *truth = spectral_true_u0(), *grad0 = NULL;
  double loss[SPEC_ITERS];
  jx_array *u0 = spectral_recover(s, truth, loss, &grad0);
  assert_non_null(u0);
  assert_within("gradient at u0 = 0", grad0, golden("grad0"), CELLS, 1e-12);
  assert_within("loss", jx_array_from(JX_F64, JX_SHAPE(SPEC_ITERS), loss), golden("loss"),
                SPEC_ITERS, 1e-12);
  assert_within("recovered u0", u0, golden("u0"), CELLS, 1e-12);
  assert_true(loss[0] / loss[SPEC_ITERS - 1] > 1e6);
  double err = sqrt(jx_item(jx_sum(jx_square(jx_sub(u0, truth)), JX_AXES(), 0)) /
                    jx_item(jx_sum(jx_square(truth), JX_AXES(), 0)));
  assert_true(err < 0.01);
  jx_release(grad0);
  jx_release(u0);
  spectral_release(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(descent_matches_jax_and_recovers_u0),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
