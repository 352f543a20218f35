/* Recovering the initial condition of a 2-D viscous Burgers flow from one
 * observation of it later, by gradient descent through a differentiable
 * pseudo-spectral solver (examples/spectral.h: rfft2/irfft2 every step,
 * jx_scan over the steps, jx_value_and_grad through all of them, jitted).
 *
 *   example_spectral_solver
 *
 * Prints the loss as the descent goes, then how far u(T) and u0 are from
 * the truth; exits 0 when the loss fell by 10^4 and u0 is within 5 %
 * (relative L2 error). docs/fft.md, "A differentiable spectral solver",
 * explains it. */
#include "spectral.h"

#include <math.h>
#include <stdio.h>

/* ||a - b|| / ||b|| */
static double rel_error(jx_array *a, jx_array *b) {
  return sqrt(jx_item(jx_sum(jx_square(jx_sub(a, b)), JX_AXES(), 0)) /
              jx_item(jx_sum(jx_square(b), JX_AXES(), 0)));
}

static int fail(const char *what) {
  fprintf(stderr, "spectral_solver: %s: %s\n", what, jx_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 1) {
    fprintf(stderr, "usage: %s\n", argv[0]);
    return 2;
  }
  spectral_solver *s = spectral_create();
  if (!s) return fail("create");
  jx_array *truth = spectral_true_u0();
  double loss[SPEC_ITERS];
  printf("viscous Burgers on a %d x %d periodic grid, nu %g, %d steps of %g; recovering u0 from "
         "u(T) by %d gradient steps\n",
         SPEC_N, SPEC_N, SPEC_NU, SPEC_STEPS, SPEC_DT, SPEC_ITERS);
  jx_array *u0 = spectral_recover(s, truth, loss, NULL);
  if (!u0) return fail("recover");
  for (int i = 0; i < SPEC_ITERS; i += SPEC_ITERS / 6) printf("step %3d: loss %.6e\n", i, loss[i]);
  printf("step %3d: loss %.6e\n", SPEC_ITERS - 1, loss[SPEC_ITERS - 1]);
  jx_array *observed, *fitted;
  if (jx_call(spectral_rollout(s), &truth, &observed) || jx_call(spectral_rollout(s), &u0, &fitted))
    return fail("rollout");
  double err_t = rel_error(fitted, observed), err_0 = rel_error(u0, truth);
  double drop = loss[0] / loss[SPEC_ITERS - 1];
  printf("loss fell by %.3g; u(T) within %.2e of the observation, u0 within %.2e of the truth "
         "(relative L2)\n",
         drop, err_t, err_0);
  jx_release(u0);
  spectral_release(s);
  jx_shutdown();
  return drop > 1e4 && err_0 < 0.05 ? 0 : 1;
}
