/* gp.h: Gaussian-process regression with an RBF kernel, its hyperparameters
 * fitted by maximizing the log marginal likelihood with Adam; shared by
 * examples/gp_regression.c and tests/unit/test_gp_regression.c (public API
 * only). tests/golden/gen_gp_regression.py is the same program in JAX.
 *
 * The data: GP_POINTS inputs x uniform in [-3, 3] and targets
 * y = sin(2 x) + x / 2 + GP_NOISE * normal, drawn with jx's PRNG (key 0 for x,
 * key 1 for the noise), f64.
 *
 * The model: k(x, x') = a^2 exp(-(x - x')^2 / (2 l^2)) and observation noise
 * s^2, with theta = (log a, log l, log s). K = k(x, x) + s^2 I = L L^T
 * (Cholesky), and the negative log marginal likelihood per point is
 *   nll(theta) = (|L^-1 y|^2 / 2 + sum_i log L_ii + n log(2 pi) / 2) / n,
 * its gradient by jx_grad. Adam (lr GP_LR, Optax's defaults otherwise) from
 * theta = (0, 0, log 0.5) for GP_STEPS steps. */
#ifndef GP_H
#define GP_H

#include <jx/jx.h>

enum { GP_POINTS = 40, GP_STEPS = 400 };
#define GP_NOISE 0.2
#define GP_LR    0.05

/* The data (f64 [GP_POINTS] each); *x and *y are kept (jx_keep): release
 * them. */
jx_status gp_make_data(jx_array **x, jx_array **y);

/* The loss, (log_amplitude, log_lengthscale, log_noise, x, y) -> nll (f64
 * scalar): a function the caller releases. */
jx_fn *gp_loss_fn(void);

/* theta0 (f64 [3]: log a, log l, log s) where the fit starts. */
jx_array *gp_initial_theta(void);

/* Fits theta by GP_STEPS Adam steps from gp_initial_theta on (x, y): the
 * fitted theta (f64 [3], kept: release it) and, when nll is not NULL, the
 * loss after each step (nll[GP_STEPS]). NULL with an error recorded on
 * failure. */
jx_array *gp_fit(jx_array *x, jx_array *y, double *nll);

/* The posterior mean at xs given the data and theta (f64 [3]). */
jx_array *gp_posterior_mean(jx_array *theta, jx_array *x, jx_array *y, jx_array *xs);

#endif
