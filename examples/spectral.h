/* spectral.h: a differentiable pseudo-spectral solver of the 2-D viscous
 * Burgers equation, and the inverse problem of recovering its initial
 * condition; shared by examples/spectral_solver.c and
 * tests/unit/test_spectral_solver.c (public API only).
 * tests/golden/gen_spectral_solver.py is the same program in JAX.
 *
 * The PDE, for a scalar field u on the periodic square [0, 2 pi)^2:
 *
 *   u_t + u u_x + u u_y = nu (u_xx + u_yy),
 *
 * with the advection in conservative form, (d/dx + d/dy)(u^2 / 2). On an
 * SPEC_N x SPEC_N grid the state is u's real transform uh = rfft2(u) (c128
 * [N, N/2 + 1], x along axis 0, y along axis 1), and one step of dt is
 * semi-implicit Euler: the advection explicit, computed pseudo-spectrally
 * (u back on the grid by irfft2, squared there, transformed by rfft2,
 * differentiated by i (kx + ky), its top third of wavenumbers zeroed, the
 * 2/3 rule against aliasing), the diffusion implicit:
 *
 *   uh' = (uh - dt * mask * i (kx + ky) * rfft2(irfft2(uh)^2 / 2)) / (1 + nu dt |k|^2).
 *
 * SPEC_STEPS steps (a jx_scan) take u0 to u(T). The inverse problem: u(T)
 * of a hidden u0 is observed on the whole grid; starting from u0 = 0,
 * SPEC_ITERS steps of gradient descent (step SPEC_LR) on
 *   loss(u0) = sum((u(T; u0) - observed)^2) / 2,
 * its gradient by jx_value_and_grad through every step, recover u0. Every
 * array is f64. */
#ifndef SPECTRAL_H
#define SPECTRAL_H

#include <jx/jx.h>

enum { SPEC_N = 32, SPEC_STEPS = 20, SPEC_ITERS = 60 };
#define SPEC_NU 0.05
#define SPEC_DT 0.01
#define SPEC_LR 1.0

/* The hidden initial condition, sin(x) cos(y) + cos(2x + y) / 2 + 3 sin(3y) / 10
 * on the grid (x_i = 2 pi i / N, y_j = 2 pi j / N): f64 [N, N]. */
jx_array *spectral_true_u0(void);

/* The solver: its step's constants and the functions below. */
typedef struct spectral_solver spectral_solver;
spectral_solver *spectral_create(void);
void spectral_release(spectral_solver *s);

/* u(T) from u0 (f64 [N, N]): the whole rollout, SPEC_STEPS steps. */
jx_fn *spectral_rollout(spectral_solver *s);

/* (u0, observed) -> loss; the function jx_value_and_grad differentiates. */
jx_fn *spectral_loss(spectral_solver *s);

/* Gradient descent from u0 = 0 on the observations of true_u0: the
 * recovered u0 (kept: release it), and when not NULL the loss before each
 * step (loss[SPEC_ITERS]) and the gradient at u0 = 0 (grad0, kept). NULL
 * with an error recorded on failure. */
jx_array *spectral_recover(spectral_solver *s, jx_array *true_u0, double *loss, jx_array **grad0);

#endif
