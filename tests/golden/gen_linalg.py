"""Goldens for the linear algebra functions (jx/linalg.h), read by
tests/unit/test_linalg*.c.

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


def general(shape, dt):
    """Well-conditioned general matrices with their rows shuffled, so that LU pivots."""
    n = shape[-1]
    m = R.standard_normal(shape) + 0.5 * n * np.eye(n) * R.choice([-1, 1], shape[:-1] + (1,))
    return m[..., R.permutation(n), :].astype(dt)


def vjp_case(case, f, dt, *inputs):
    """f's outputs at inputs and the VJPs of every input against random cotangents."""
    out, vjp = jax.vjp(f, *map(jnp.asarray, inputs))
    ct = R.standard_normal(np.shape(out)).astype(dt)
    cts = vjp(jnp.asarray(ct))
    names = ["a", "b"][: len(inputs)]
    save(case, out=out, ct=ct, **dict(zip(names, inputs)),
         **{f"ct_{k}": v for k, v in zip(names, cts)})


def lu_cases():
    for case, shape, dt in (("lu_f64", (4, 4), np.float64), ("lu_f32", (3, 3), np.float32),
                            ("lu_batch_f64", (2, 3, 3), np.float64)):
        a = general(shape, dt)
        lu, piv, perm = lax.linalg.lu(jnp.asarray(a))
        save(case, pivots=np.asarray(piv, np.int32), permutation=np.asarray(perm, np.int32))
        vjp_case(case, lambda a: lax.linalg.lu(a)[0], dt, a)
    for dt, tag in ((np.float64, "f64"), (np.float32, "f32")):
        a = general((4, 4), dt)
        vjp_case(f"solve_{tag}", jnp.linalg.solve, dt, a, R.standard_normal((4, 2)).astype(dt))
        vjp_case(f"solve_vec_{tag}", jnp.linalg.solve, dt, a, R.standard_normal(4).astype(dt))
        vjp_case(f"inv_{tag}", jnp.linalg.inv, dt, a)
        vjp_case(f"det_{tag}", jnp.linalg.det, dt, a)
        vjp_case(f"logdet_{tag}", lambda a: jnp.linalg.slogdet(a)[1], dt, a)
        save(f"sign_{tag}", out=jnp.linalg.slogdet(a)[0])
    a = general((2, 3, 3), np.float64)
    vjp_case("solve_batch_f64", jnp.linalg.solve, np.float64, a,
             R.standard_normal((2, 3, 2)))
    vjp_case("det_batch_f64", jnp.linalg.det, np.float64, a)
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    sign, logdet = jnp.linalg.slogdet(singular)
    save("singular", a=singular, det=jnp.linalg.det(singular), sign=sign, logabsdet=logdet)


def eigh_cases():
    """eigh's eigenvectors have arbitrary signs: the goldens are the eigenvalues
    and VJPs of sign-invariant functions (the eigenvectors' squares)."""
    def values_and_squares(a):
        w, v = jnp.linalg.eigh(a)
        return w, v * v

    for case, shape, dt in (("eigh_f64", (4, 4), np.float64), ("eigh_f32", (3, 3), np.float32),
                            ("eigh_batch_f64", (2, 3, 3), np.float64)):
        a = R.standard_normal(shape).astype(dt)  # not symmetric: eigh symmetrizes it
        (w, squares), vjp = jax.vjp(values_and_squares, jnp.asarray(a))
        ct_w = R.standard_normal(w.shape).astype(dt)
        ct_v = R.standard_normal(squares.shape).astype(dt)
        (ct_a,) = vjp((jnp.asarray(ct_w), jnp.asarray(ct_v)))
        save(case, a=a, w=w, squares=squares, ct_w=ct_w, ct_v=ct_v, ct_a=ct_a)
        vjp_case(case.replace("eigh", "eigvalsh"), jnp.linalg.eigvalsh, dt, a)
    # equal eigenvalues: the eigenvalues' gradient stays finite (the
    # eigenvectors' tangent, infinite there, gets no cotangent)
    degenerate = np.diag([1.0, 1.0, 2.0])
    vjp_case("eigvalsh_degenerate", jnp.linalg.eigvalsh, np.float64, degenerate)


def qr_cases():
    """q and r (LAPACK's signs, as JAX's on CPU) and the VJP against both."""
    for case, shape, mode, dt in (("qr_tall_f64", (4, 3), "reduced", np.float64),
                                  ("qr_tall_complete_f64", (4, 2), "complete", np.float64),
                                  ("qr_wide_f64", (3, 5), "reduced", np.float64),
                                  ("qr_wide_complete_f64", (2, 4), "complete", np.float64),
                                  ("qr_f32", (3, 3), "reduced", np.float32),
                                  ("qr_batch_f64", (2, 4, 3), "complete", np.float64)):
        a = R.standard_normal(shape).astype(dt)
        (q, r), vjp = jax.vjp(lambda a: tuple(jnp.linalg.qr(a, mode=mode)), jnp.asarray(a))
        ct_q = R.standard_normal(q.shape).astype(dt)
        ct_r = R.standard_normal(r.shape).astype(dt)
        (ct_a,) = vjp((jnp.asarray(ct_q), jnp.asarray(ct_r)))
        save(case, a=a, q=q, r=r, ct_q=ct_q, ct_r=ct_r, ct_a=ct_a)


VECTOR_ORDS = {"2": 2, "1": 1, "inf": np.inf, "neginf": -np.inf, "0": 0, "3": 3, "half": 0.5}
MATRIX_ORDS = {"fro": "fro", "1": 1, "neg1": -1, "inf": np.inf, "neginf": -np.inf}


def norm_cases():
    """Each order's value and VJP on a stack, and its gradient at zero (JAX's
    conventions for |x| and ties: NaN for the 2-norm, split ties for max)."""
    x = R.standard_normal((2, 5))
    m = R.standard_normal((2, 3, 4))
    for tag, ord_ in VECTOR_ORDS.items():
        vjp_case(f"vnorm_{tag}", lambda v: jnp.linalg.vector_norm(v, ord=ord_, axis=-1),
                 np.float64, x)
        save(f"vnorm_{tag}_zero", grad=jax.grad(lambda v: jnp.linalg.norm(v, ord=ord_))(
            jnp.zeros(3)))
    for tag, ord_ in MATRIX_ORDS.items():
        vjp_case(f"mnorm_{tag}", lambda v: jnp.linalg.matrix_norm(v, ord=ord_), np.float64, m)
        save(f"mnorm_{tag}_zero", grad=jax.grad(lambda v: jnp.linalg.norm(v, ord=ord_))(
            jnp.zeros((2, 2))))
    vjp_case("vnorm_2_f32", lambda v: jnp.linalg.vector_norm(v, axis=-1), np.float32,
             x.astype(np.float32))


def svd_cases():
    """svd's singular vectors have arbitrary signs (a column of u flips with
    its row of vh): the goldens are s, the vectors' squares and VJPs of
    those sign-invariant functions."""
    def parts(a, full):
        u, s, vh = jnp.linalg.svd(a, full_matrices=full)
        return s, u * u, vh * vh

    for case, shape, full, dt in (("svd_tall_f64", (5, 3), False, np.float64),
                                  ("svd_wide_f64", (3, 5), False, np.float64),
                                  ("svd_square_full_f64", (4, 4), True, np.float64),
                                  ("svd_f32", (4, 3), False, np.float32),
                                  ("svd_batch_f64", (2, 4, 3), False, np.float64),
                                  ("svd_batch_f32", (3, 3, 4), False, np.float32)):
        a = R.standard_normal(shape).astype(dt)
        (s, uu, vv), vjp = jax.vjp(lambda a: parts(a, full), jnp.asarray(a))
        ct_s = R.standard_normal(s.shape).astype(dt)
        ct_u = R.standard_normal(uu.shape).astype(dt)
        ct_v = R.standard_normal(vv.shape).astype(dt)
        (ct_a,) = vjp((jnp.asarray(ct_s), jnp.asarray(ct_u), jnp.asarray(ct_v)))
        save(case, a=a, s=s, uu=uu, vv=vv, ct_s=ct_s, ct_u=ct_u, ct_v=ct_v, ct_a=ct_a)
    # full_matrices of a non-square matrix: values only (JAX has no JVP there)
    a = R.standard_normal((5, 3))
    save("svd_tall_full_f64", a=a, s=jnp.linalg.svd(a, compute_uv=False))
    for case, shape, dt in (("svdvals_f64", (4, 6), np.float64), ("svdvals_f32", (5, 3), np.float32),
                            ("svdvals_batch_f64", (2, 3, 4), np.float64)):
        vjp_case(case, lambda a: jnp.linalg.svd(a, compute_uv=False), dt,
                 R.standard_normal(shape).astype(dt))
    nan = np.array([[1.0, np.nan, 0.0], [0.0, 1.0, 2.0]])
    u, s, vh = jnp.linalg.svd(nan, full_matrices=False)
    save("svd_nan", a=nan, u=u, s=s, vh=vh)


def pinv_lstsq_cases():
    for case, shape, dt in (("pinv_tall_f64", (5, 3), np.float64),
                            ("pinv_wide_f64", (3, 4), np.float64),
                            ("pinv_f32", (4, 3), np.float32),
                            ("pinv_batch_f64", (2, 3, 4), np.float64)):
        vjp_case(case, jnp.linalg.pinv, dt, R.standard_normal(shape).astype(dt))
    # rank 2 of 3: the default cutoff drops the third singular value
    low = R.standard_normal((4, 2)) @ R.standard_normal((2, 3))
    vjp_case("pinv_rank2_f64", jnp.linalg.pinv, np.float64, low)
    # an explicit rtol that drops the smallest of a spread of singular values
    spread = np.diag([3.0, 1.0, 0.2]) @ np.linalg.qr(R.standard_normal((3, 3)))[0]
    vjp_case("pinv_rtol_f64", lambda a: jnp.linalg.pinv(a, rtol=0.1), np.float64, spread)
    for case, ashape, bshape, dt in (("lstsq_f64", (6, 3), (6, 2), np.float64),
                                     ("lstsq_vec_f64", (6, 3), (6,), np.float64),
                                     ("lstsq_wide_f64", (3, 5), (3, 2), np.float64),
                                     ("lstsq_f32", (5, 3), (5, 2), np.float32)):
        a = R.standard_normal(ashape).astype(dt)
        b = R.standard_normal(bshape).astype(dt)
        x, resid, rank, s = jnp.linalg.lstsq(a, b)
        save(case, resid=resid, rank=np.asarray(rank, np.int32), s=s)
        vjp_case(case, lambda a, b: jnp.linalg.lstsq(a, b)[0], dt, a, b)
    a = R.standard_normal((5, 2)) @ R.standard_normal((2, 4))  # rank 2
    b = R.standard_normal((5, 2))
    x, resid, rank, s = jnp.linalg.lstsq(a, b)
    save("lstsq_rank2_f64", a=a, b=b, x=x, resid=resid, rank=np.asarray(rank, np.int32), s=s)
    x, resid, rank, s = jnp.linalg.lstsq(a, b, rcond=0.5)
    save("lstsq_rcond_f64", x=x, resid=resid, rank=np.asarray(rank, np.int32))


MATRIX_POWERS = (0, 1, 2, 3, 5, 6, -1, -3)


def matrix_power_cases():
    a = general((3, 3), np.float64) / 2
    for k in MATRIX_POWERS:
        tag = f"m{-k}" if k < 0 else str(k)
        vjp_case(f"mpow_{tag}_f64", lambda a: jnp.linalg.matrix_power(a, k), np.float64, a)
    vjp_case("mpow_5_f32", lambda a: jnp.linalg.matrix_power(a, 5), np.float32,
             (general((3, 3), np.float64) / 2).astype(np.float32))
    vjp_case("mpow_batch_f64", lambda a: jnp.linalg.matrix_power(a, 4), np.float64,
             general((2, 3, 3), np.float64) / 2)


def scaled(n, l1, dt):
    """An n x n matrix with 1-norm l1, which picks expm's Pade degree and squarings."""
    m = R.standard_normal((n, n))
    return (m * (l1 / np.abs(m).sum(0).max())).astype(dt)


EXPM_NORMS = {np.float64: (0.01, 0.2, 0.8, 1.5, 3.0, 40.0), np.float32: (0.3, 1.0, 3.0, 40.0)}


def expm_cases():
    for dt, tag in ((np.float64, "f64"), (np.float32, "f32")):
        for i, l1 in enumerate(EXPM_NORMS[dt]):
            vjp_case(f"expm_{i}_{tag}", jax.scipy.linalg.expm, dt, scaled(4, l1, dt))
    stack = np.stack([scaled(3, l1, np.float64) for l1 in (0.01, 1.5, 40.0, 0.2)])
    vjp_case("expm_batch_f64", jax.scipy.linalg.expm, np.float64, stack)
    huge = scaled(3, 1e7, np.float64)  # more than 16 squarings: NaNs, as JAX
    save("expm_huge", a=huge, out=jax.scipy.linalg.expm(huge))


def nan_cases():
    """A matrix holding a NaN: LAPACK's (and JAX's) results, NaNs where they fall."""
    a = np.array([[1.0, np.nan], [2.0, 3.0]])
    lu, piv, perm = lax.linalg.lu(jnp.asarray(a))
    q, r = jnp.linalg.qr(a)
    save("nan", a=a, lu=lu, pivots=np.asarray(piv, np.int32),
         permutation=np.asarray(perm, np.int32), q=q, r=r, det=jnp.linalg.det(a),
         solve=jnp.linalg.solve(a, np.ones(2)))


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
    lu_cases()
    eigh_cases()
    qr_cases()
    norm_cases()
    svd_cases()
    pinv_lstsq_cases()
    matrix_power_cases()
    expm_cases()
    nan_cases()


if __name__ == "__main__":
    main()
