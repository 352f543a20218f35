/* Gaussian-process regression (examples/gp.h): draws noisy samples of
 * sin(2x) + x/2 with jx's PRNG, fits the RBF kernel's amplitude, length
 * scale and noise level by maximizing the log marginal likelihood (Cholesky,
 * triangular solves, its gradient by jx_grad inside a jitted Adam step),
 * then prints the posterior mean against the true function.
 *
 *   example_gp_regression                  fit and report
 *   example_gp_regression --save-data DIR  also write x.npy and y.npy to DIR
 *                                          (tests/golden/gen_gp_regression.py
 *                                          fits the same data in JAX) */
#include "gp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what) {
  fprintf(stderr, "gp_regression: %s: %s\n", what, jx_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const char *save_dir = argc == 3 && !strcmp(argv[1], "--save-data") ? argv[2] : NULL;
  if (argc != 1 && !save_dir) {
    fprintf(stderr, "usage: %s [--save-data DIR]\n", argv[0]);
    return 2;
  }
  jx_array *x, *y;
  if (gp_make_data(&x, &y)) return fail("data");
  if (save_dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/x.npy", save_dir);
    if (jx_save_npy(path, x)) return fail(path);
    snprintf(path, sizeof path, "%s/y.npy", save_dir);
    if (jx_save_npy(path, y)) return fail(path);
  }
  /* the gradient of the loss at the start, by jx_grad */
  jx_fn *loss = gp_loss_fn(), *grad = jx_grad(loss, JX_AXES(0, 1, 2));
  double t0[3], g0[3];
  jx_array *theta0 = gp_initial_theta();
  if (jx_read(theta0, t0, sizeof t0)) return fail("theta0");
  jx_array *in[5] = {jx_full(JX_F64, JX_SHAPE(), t0[0]), jx_full(JX_F64, JX_SHAPE(), t0[1]),
                     jx_full(JX_F64, JX_SHAPE(), t0[2]), x, y},
           *out[3], *nll0;
  if (jx_call(grad, in, out) || jx_call(loss, in, &nll0)) return fail("grad");
  for (int i = 0; i < 3; i++) g0[i] = jx_item(out[i]);
  printf("%d points; start: amplitude %.3f, length scale %.3f, noise %.3f, -log p(y)/n %.5f\n",
         GP_POINTS, exp(t0[0]), exp(t0[1]), exp(t0[2]), jx_item(nll0));
  printf("gradient of -log p(y)/n w.r.t. (log a, log l, log s): (%.5f, %.5f, %.5f)\n", g0[0], g0[1],
         g0[2]);
  double nll[GP_STEPS];
  jx_array *theta = gp_fit(x, y, nll);
  if (!theta) return fail("fit");
  for (int s = 0; s < GP_STEPS; s += GP_STEPS / 8)
    printf("step %4d: -log p(y)/n %.6f\n", s + 1, nll[s]);
  double t[3];
  if (jx_read(theta, t, sizeof t)) return fail("theta");
  printf("fitted (%d Adam steps, lr %g): amplitude %.4f, length scale %.4f, noise %.4f "
         "(the data's noise: %.2f)\n",
         GP_STEPS, GP_LR, exp(t[0]), exp(t[1]), exp(t[2]), GP_NOISE);
  /* the posterior mean on a grid against the true function */
  jx_array *grid = jx_arange(JX_F64, -3, 3.0001, 0.5);
  jx_array *mean = gp_posterior_mean(theta, x, y, grid);
  jx_array *truth =
      jx_add(jx_sin(jx_mul(grid, jx_scalar(JX_F64, 2))), jx_mul(grid, jx_scalar(JX_F64, 0.5)));
  double m[13], f[13];
  if (jx_read(mean, m, sizeof m) || jx_read(truth, f, sizeof f)) return fail("posterior");
  printf("   x   posterior mean   sin(2x) + x/2\n");
  for (int i = 0; i < 13; i++) printf("%5.1f   %14.4f   %13.4f\n", -3 + 0.5 * i, m[i], f[i]);
  jx_release(theta);
  jx_release(x);
  jx_release(y);
  jx_fn_release(grad);
  jx_fn_release(loss);
  jx_shutdown();
  return 0;
}
