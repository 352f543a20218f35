/* heat.h: a differentiable 2-D heat-equation simulator, on one device or
 * split over a mesh of devices, shared by examples/heat_inverse.c and
 * tests/unit/test_heat.c (public API only).
 *
 * The PDE is u_t = div(kappa grad u) on the unit square, u = 0 on the
 * boundary, discretized on an n x n grid of cells (h = 1/n) with explicit
 * conservative finite differences:
 *
 *   u' = u + r * (fx[i+1/2] - fx[i-1/2] + fy[j+1/2] - fy[j-1/2]),  r = dt / h^2,
 *   fx[i+1/2] = kx[i+1/2] * (u[i+1] - u[i]),  kx[i+1/2] = (kappa[i] + kappa[i+1]) / 2
 *
 * (computed per cell as kx[i+1/2] * (u[i+1] - u[i]) - kx[i-1/2] * (u[i] - u[i-1])),
 *
 * with ghost cells u = 0 and kappa = the edge value outside the grid (the
 * NumPy reference, tests/golden/gen_heat.py, is this formula line by line).
 * Stable while r * max(kappa) <= 1/4.
 *
 * The diffusivity is k0 + sum_b a[b] * phi[b], Gaussian bumps phi on a
 * bumps x bumps grid of centres: the parameters a are what the inverse
 * problem recovers. A batch of initial conditions is simulated together and
 * observed (the whole field) every `steps` steps, nobs times.
 *
 * Sharded (devices > 0), the grid is split over a mesh ("x", "y") of
 * px x py devices, rows over x and columns over y; jx_shard_map runs the
 * rollout on each block and jx_ppermute brings each step's halo (the
 * neighbours' edge rows and columns). Every function works in the dtype of
 * its inputs (f32 or f64). */
#ifndef HEAT_H
#define HEAT_H

#include <jx/jx.h>

typedef struct {
  int n;        /* grid n x n */
  int batch;    /* initial conditions simulated together */
  int steps;    /* time steps between observations */
  int nobs;     /* observations (the rollout is steps * nobs steps) */
  int bumps;    /* kappa basis: bumps x bumps Gaussians */
  double r;     /* dt / h^2 */
  double k0;    /* background diffusivity */
  double width; /* bump standard deviation, in units of the domain */
} heat_config;

typedef struct heat_sim heat_sim;

/* devices 0: plain functions (no shard_map); otherwise a px x py mesh of
 * that many devices (px >= py, both dividing n). NULL and an error recorded
 * on failure. */
heat_sim *heat_sim_create(const heat_config *c, int devices);
void heat_sim_release(heat_sim *s);
int heat_sim_mesh_shape(const heat_sim *s, int *px, int *py); /* 0 when not sharded */

/* Borrowed functions:
 *   rollout: (u0 [B,n,n], kappa [n,n]) -> snapshots [nobs,B,n,n], u after
 *            steps, 2*steps, ... steps*nobs steps;
 *   loss:    (a [nb], phi [nb,n,n], u0 [B,n,n], obs [nobs,B,n,n]) -> mean
 *            squared mismatch of the simulated snapshots (a scalar);
 *   value_and_grad: jit(value_and_grad(loss) with respect to a). */
jx_fn *heat_rollout_fn(heat_sim *s);
jx_fn *heat_loss_fn(heat_sim *s);
jx_fn *heat_value_and_grad_fn(heat_sim *s);

/* Host-side helpers (eager; results in the innermost scope). */
jx_array *heat_basis(const heat_config *c, jx_dtype dt);                /* phi [nb,n,n] */
jx_array *heat_kappa(const heat_config *c, jx_array *a, jx_array *phi); /* k0 + a . phi */
/* batch smooth initial conditions, zero on the boundary: random sine modes */
jx_array *heat_initial(const heat_config *c, jx_dtype dt, uint32_t seed);

/* Gradient descent on a with Adam(lr) from a0 for iters steps. After each
 * step (and once before, iter 0) calls progress, if any, with the loss at
 * the current a (before the step) and the relative L2 errors of a and of
 * kappa against a_true (NaN if a_true is NULL). The fitted a in *a_out
 * (kept: the caller releases it). */
typedef struct {
  int iter;
  double loss, param_error, kappa_error;
} heat_progress;
typedef void (*heat_progress_fn)(void *ctx, const heat_progress *p);
jx_status heat_fit(heat_sim *s, jx_array *phi, jx_array *u0, jx_array *obs, jx_array *a0,
                   jx_array *a_true, int iters, double lr, heat_progress_fn progress, void *ctx,
                   jx_array **a_out);

#endif
