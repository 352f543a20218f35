"""The pseudo-spectral Burgers solver and its inverse problem of
examples/spectral.h in JAX, read by tests/unit/test_spectral_solver.c: the
same grid, wavenumbers, 2/3-rule mask, semi-implicit step (jnp.fft.rfft2 /
irfft2, lax.scan over the steps), the same observation of the same hidden
u0, and the same gradient descent (jax.value_and_grad through every step).
Writes grad0.npy (the gradient at u0 = 0), loss.npy (the loss before each
step) and u0.npy (the recovered initial condition), all f64.

Run from the repository root:  python3 tests/golden/gen_spectral_solver.py
"""
import os

import numpy as np

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "spectral_solver")
N, STEPS, ITERS = 32, 20, 60
NU, DT, LR = 0.05, 0.01, 1.0

kx = np.fft.fftfreq(N, 1.0 / N)[:, None]  # along axis 0
ky = np.fft.rfftfreq(N, 1.0 / N)[None, :]  # along axis 1, halved
kept = (3 * np.abs(kx) < N) & (3 * ky < N)  # the 2/3 rule
derivative = jnp.asarray(np.where(kept, 1j * (kx + ky), 0))
implicit = jnp.asarray(1 / (1 + NU * DT * (kx * kx + ky * ky)))


def true_u0():
    x = 2 * np.pi * np.arange(N)[:, None] / N
    y = 2 * np.pi * np.arange(N)[None, :] / N
    return jnp.asarray(np.sin(x) * np.cos(y) + 0.5 * np.cos(2 * x + y) + 0.3 * np.sin(3 * y))


def step(uh, _):
    u = jnp.fft.irfft2(uh, s=(N, N))
    flux = jnp.fft.rfft2(u * u * 0.5)
    return (uh - flux * derivative * DT) * implicit, None


def rollout(u0):
    uh, _ = jax.lax.scan(step, jnp.fft.rfft2(u0), None, length=STEPS)
    return jnp.fft.irfft2(uh, s=(N, N))


def loss(u0, observed):
    d = rollout(u0) - observed
    return jnp.sum(d * d) * 0.5


def main():
    os.makedirs(DIR, exist_ok=True)
    observed = rollout(true_u0())
    vg = jax.jit(jax.value_and_grad(loss))
    u0 = jnp.zeros((N, N))
    losses = []
    for it in range(ITERS):
        value, g = vg(u0, observed)
        if it == 0:
            np.save(os.path.join(DIR, "grad0.npy"), np.asarray(g))
        losses.append(float(value))
        u0 = u0 - g * LR
    np.save(os.path.join(DIR, "loss.npy"), np.asarray(losses))
    np.save(os.path.join(DIR, "u0.npy"), np.asarray(u0))


if __name__ == "__main__":
    main()
