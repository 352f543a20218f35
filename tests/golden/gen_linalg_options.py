"""Goldens for the options of jnp.linalg and jax.scipy.linalg functions
(jx_linalg_svd_ex's and jx_linalg_pinv_ex's hermitian, jx_linalg_expm_ex's
upper_triangular and max_squarings, jx_linalg_cholesky_ex's upper and
symmetrize_input) and for jx_linalg_matrix_rank, read by
tests/unit/test_linalg_options.c.

Each case writes <case>_<name>.npy into tests/golden/data/linalg_options/:
the input a, JAX's outputs, random cotangents ct_* and JAX's VJP ct_a. f64
cases run with jax_enable_x64, f32 ones in JAX's default mode.

Run from the repository root:  python3 tests/golden/gen_linalg_options.py
"""
import os
import shutil

import numpy as np

import jax
import jax.numpy as jnp

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "linalg_options")
R = np.random.default_rng(1902)


def save(case, **arrays):
    for name, v in arrays.items():
        np.save(os.path.join(DIR, f"{case}_{name}.npy"), np.asarray(v))


def vjp_case(case, f, a, **extra):
    """f's outputs (a tuple) at a and the VJP against random cotangents."""
    outs, vjp = jax.vjp(f, jnp.asarray(a))
    cts = tuple(R.standard_normal(np.shape(o)).astype(a.dtype) for o in outs)
    (ct_a,) = vjp(tuple(map(jnp.asarray, cts)))
    save(case, a=a, ct_a=ct_a, **{f"out{i}": o for i, o in enumerate(outs)},
         **{f"ct{i}": c for i, c in enumerate(cts)}, **extra)


def x64(dt):
    return jax.enable_x64(dt == np.float64)


def hermitian_cases():
    def svd_parts(a):  # sign-invariant: s, and the vectors' squares
        u, s, vh = jnp.linalg.svd(a, hermitian=True)
        return s, u * u, vh * vh

    def svd_values(a):
        return (jnp.linalg.svd(a, compute_uv=False, hermitian=True),)

    def pinv(a, rtol=None):
        return (jnp.linalg.pinv(a, rtol=rtol, hermitian=True),)

    for dt, tag in ((np.float64, "f64"), (np.float32, "f32")):
        with x64(dt):
            # not symmetric: the hermitian paths read its symmetric part;
            # eigenvalues of both signs
            a = R.standard_normal((4, 4)).astype(dt)
            vjp_case(f"svd_herm_{tag}", svd_parts, a)
            vjp_case(f"svdvals_herm_{tag}", svd_values, a)
            vjp_case(f"pinv_herm_{tag}", pinv, a)
            stack = R.standard_normal((2, 3, 3)).astype(dt)
            vjp_case(f"svd_herm_batch_{tag}", svd_parts, stack)
            vjp_case(f"pinv_herm_batch_{tag}", pinv, stack)
    with x64(np.float64):
        # rank 2 of 3, symmetric: the default cutoff drops the zero eigenvalue
        b = R.standard_normal((3, 2))
        low = b @ np.diag([2.0, -1.0]) @ b.T
        vjp_case("pinv_herm_rank2_f64", pinv, low)
        # an explicit rtol dropping the smallest |eigenvalue|
        q = np.linalg.qr(R.standard_normal((3, 3)))[0]
        spread = q @ np.diag([3.0, -1.0, 0.2]) @ q.T
        vjp_case("pinv_herm_rtol_f64", lambda a: pinv(a, 0.1), spread)


def upper(n, l1, dt):
    """An upper triangular n x n matrix with 1-norm l1 (which picks expm's
    Pade degree and squarings)."""
    m = np.triu(R.standard_normal((n, n)))
    return (m * (l1 / np.abs(m).sum(0).max())).astype(dt)


EXPM_NORMS = {np.float64: (0.01, 0.8, 3.0, 40.0), np.float32: (0.3, 3.0, 40.0)}


def expm_cases():
    def expm_upper(a):
        return (jax.scipy.linalg.expm(a, upper_triangular=True),)

    for dt, tag in ((np.float64, "f64"), (np.float32, "f32")):
        with x64(dt):
            for i, l1 in enumerate(EXPM_NORMS[dt]):
                vjp_case(f"expm_upper_{i}_{tag}", expm_upper, upper(4, l1, dt))
    with x64(np.float64):
        stack = np.stack([upper(3, l1, np.float64) for l1 in (0.01, 40.0)])
        vjp_case("expm_upper_batch_f64", expm_upper, stack)
        # max_squarings: a norm that needs 3 squarings, with 2 and 3 allowed
        a = R.standard_normal((3, 3))
        a = a * (60.0 / np.abs(a).sum(0).max())
        vjp_case("expm_max3_f64", lambda a: (jax.scipy.linalg.expm(a, max_squarings=3),), a)
        save("expm_max2_f64", a=a, out0=jax.scipy.linalg.expm(a, max_squarings=2))


def cholesky_cases():
    for dt, tag in ((np.float64, "f64"), (np.float32, "f32")):
        with x64(dt):
            m = R.standard_normal((4, 4))
            spd = (m @ m.T + 4 * np.eye(4)).astype(dt)
            skew = spd + np.triu(R.standard_normal((4, 4)), 1).astype(dt)  # upper part unread
            vjp_case(f"chol_upper_{tag}", lambda a: (jnp.linalg.cholesky(a, upper=True),), skew)
            vjp_case(f"chol_nosym_{tag}",
                     lambda a: (jnp.linalg.cholesky(a, symmetrize_input=False),), skew)


def matrix_rank_cases():
    with x64(np.float64):
        b = R.standard_normal((5, 2))
        low = b @ R.standard_normal((2, 4))  # rank 2
        spread = np.diag([3.0, 1.0, 1e-3]) @ np.linalg.qr(R.standard_normal((3, 3)))[0]
        sym = R.standard_normal((3, 2))
        sym = sym @ np.diag([2.0, -1.0]) @ sym.T  # symmetric, rank 2
        cases = {"rank_full": (R.standard_normal((3, 4)), None, False),
                 "rank_low": (low, None, False),
                 "rank_rtol": (spread, 0.01, False),  # drops 1e-3 (a given rtol is absolute)
                 "rank_herm": (sym, None, True),
                 "rank_batch": (np.stack([low[:4], R.standard_normal((4, 4))]), None, False),
                 "rank_zero": (np.zeros((2, 3)), None, False),
                 "rank_vector": (np.array([0.0, 2.0, 0.0]), None, False),
                 "rank_zero_vector": (np.zeros(3), None, False)}
        for case, (a, rtol, herm) in cases.items():
            save(case, a=a, out0=jnp.linalg.matrix_rank(a, rtol=rtol, hermitian=herm))
        f32 = low.astype(np.float32)
    with x64(np.float32):
        save("rank_low_f32", a=f32, out0=jnp.linalg.matrix_rank(f32))


def main():
    shutil.rmtree(DIR, ignore_errors=True)
    os.makedirs(DIR)
    hermitian_cases()
    expm_cases()
    cholesky_cases()
    matrix_rank_cases()


if __name__ == "__main__":
    main()
