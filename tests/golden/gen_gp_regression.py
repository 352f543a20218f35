"""The Gaussian-process regression of examples/gp.h in JAX, read by
tests/unit/test_gp_regression.c: the same data (tests/golden/data/gp_regression/
x.npy and y.npy, written by `example_gp_regression --save-data`, so both fit
identical inputs), the same negative log marginal likelihood per point, its
gradient at the start, and the same Adam fit (optax.adam, 400 steps, lr 0.05,
from theta = (0, 0, log 0.5)). Writes nll0.npy, grad0.npy, theta.npy (the
fitted log amplitude, log length scale, log noise) and nll.npy (the loss
after each step) next to the data.

Run from the repository root:  python3 tests/golden/gen_gp_regression.py
"""
import os

import numpy as np

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gp_regression")
STEPS, LR = 400, 0.05


def nll(theta, x, y):
    log_amp, log_len, log_noise = theta
    n = x.shape[0]
    d = x[:, None] - x[None, :]
    k = jnp.exp(2 * log_amp) * jnp.exp(-0.5 * d * d / jnp.exp(log_len) ** 2)
    k = k + jnp.exp(2 * log_noise) * jnp.eye(n)
    l = jnp.linalg.cholesky(k)
    z = jax.scipy.linalg.solve_triangular(l, y[:, None], lower=True)
    return (0.5 * jnp.sum(z * z) + jnp.sum(jnp.log(jnp.diag(l)))
            + 0.5 * n * np.log(2 * np.pi)) / n


def main():
    x = jnp.asarray(np.load(os.path.join(DIR, "x.npy")))
    y = jnp.asarray(np.load(os.path.join(DIR, "y.npy")))
    theta = jnp.array([0.0, 0.0, np.log(0.5)])
    np.save(os.path.join(DIR, "nll0.npy"), np.asarray(nll(theta, x, y)))
    np.save(os.path.join(DIR, "grad0.npy"), np.asarray(jax.grad(nll)(theta, x, y)))
    opt = optax.adam(LR)
    state = opt.init(theta)

    @jax.jit
    def step(theta, state):
        loss, g = jax.value_and_grad(nll)(theta, x, y)
        updates, state = opt.update(g, state, theta)
        return optax.apply_updates(theta, updates), state, loss

    losses = []
    for _ in range(STEPS):
        theta, state, loss = step(theta, state)
        losses.append(float(loss))
    np.save(os.path.join(DIR, "theta.npy"), np.asarray(theta))
    np.save(os.path.join(DIR, "nll.npy"), np.asarray(losses))


if __name__ == "__main__":
    main()
