"""Goldens for the linear algebra functions (jx/linalg.h), read by
tests/unit/test_linalg.c.

Each case writes <case>_<name>.npy into tests/golden/data/linalg/: the inputs,
JAX's outputs, a cotangent ct and JAX's VJPs of the outputs against it
(ct_a, ct_b). JAX runs in 64-bit mode; f32 cases run JAX in f32.

Run from the repository root:  python3 tests/golden/gen_linalg.py
"""
import os
import shutil

import numpy as np

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "linalg")
R = np.random.default_rng(19)


def save(case, **arrays):
    for name, v in arrays.items():
        np.save(os.path.join(DIR, f"{case}_{name}.npy"), np.asarray(v))


def spd(shape, dt):
    """Symmetric positive definite matrices (a stack when shape has batch dims)."""
    n = shape[-1]
    m = R.standard_normal(shape)
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dt)


def cholesky_case(case, shape, dt):
    # a general (non-symmetric) input: jnp.linalg.cholesky symmetrizes it
    a = spd(shape, dt) + 0.1 * R.standard_normal(shape).astype(dt)
    out, vjp = jax.vjp(jnp.linalg.cholesky, jnp.asarray(a))
    ct = R.standard_normal(shape).astype(dt)
    (ct_a,) = vjp(jnp.asarray(ct))
    save(case, a=a, out=out, ct=ct, ct_a=ct_a)


def triangular(m, dt, lower):
    """A well-conditioned triangular matrix with garbage in the other (unread) triangle."""
    a = R.standard_normal((m, m)) * 0.3 + np.diag(2 + R.random(m))
    unread = np.triu(np.ones((m, m)), 1) if lower else np.tril(np.ones((m, m)), -1)
    return np.where(unread, 9.0, a).astype(dt)


def solve_case(case, dt, left, lower, trans, unit, batch=()):
    m, n = 4, 3
    a = np.stack([triangular(m, dt, lower) for _ in range(int(np.prod(batch)))]).reshape(
        batch + (m, m))
    b = R.standard_normal(batch + ((m, n) if left else (n, m))).astype(dt)

    def f(a, b):
        return lax.linalg.triangular_solve(a, b, left_side=bool(left), lower=bool(lower),
                                           transpose_a=bool(trans), unit_diagonal=bool(unit))

    out, vjp = jax.vjp(f, jnp.asarray(a), jnp.asarray(b))
    ct = R.standard_normal(out.shape).astype(dt)
    ct_a, ct_b = vjp(jnp.asarray(ct))
    save(case, a=a, b=b, out=out, ct=ct, ct_a=ct_a, ct_b=ct_b)


def main():
    shutil.rmtree(DIR, ignore_errors=True)
    os.makedirs(DIR)
    cholesky_case("chol_f64", (4, 4), np.float64)
    cholesky_case("chol_f32", (3, 3), np.float32)
    cholesky_case("chol_batch_f64", (2, 3, 3), np.float64)
    # (left, lower, transpose_a, unit_diagonal): every flag on and off
    for dt, tag in ((np.float64, "f64"), (np.float32, "f32")):
        for left in (0, 1):
            for lower in (0, 1):
                for trans in (0, 1):
                    solve_case(f"tri_{tag}_l{left}_lo{lower}_t{trans}_u0", dt, left, lower, trans,
                               0)
        solve_case(f"tri_{tag}_l1_lo1_t0_u1", dt, 1, 1, 0, 1)
        solve_case(f"tri_{tag}_l0_lo0_t1_u1", dt, 0, 0, 1, 1)
    solve_case("tri_batch_f64", np.float64, 1, 1, 1, 0, batch=(2,))
    # the second matrix is not positive definite: JAX gives NaNs in its lower triangle
    bad = np.array([[[4.0, 2.0], [2.0, 3.0]], [[1.0, 2.0], [2.0, 1.0]]])
    save("chol_not_pd", a=bad, out=jnp.linalg.cholesky(bad))


if __name__ == "__main__":
    main()
