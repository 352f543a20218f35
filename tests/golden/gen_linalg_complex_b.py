"""Goldens for the complex (c64, c128) QR, Hermitian eigendecomposition, SVD,
pseudo-inverse and least squares (jx_linalg_qr, jx_linalg_eigh, jx_linalg_eigvalsh,
jx_linalg_svd, jx_linalg_svdvals, jx_linalg_pinv_ex, jx_linalg_lstsq), read by
tests/unit/test_linalg_complex_b.c.

Each case writes <case>_<name>.npy into tests/golden/data/linalg_complex_b/.
Eigenvectors are defined up to a phase per column, so eigh's goldens are
phase-invariant: the eigenvalues w, the squared moduli |v|^2 of the vectors,
and JAX's VJP ct_a of (w, |v|^2) against real cotangents (ct_w, ct_v); the
SVD's likewise of (s, |u|^2, |vh|^2), whose phases cancel. QR's
q and r are LAPACK's (geqrf/ungqr) in both and are compared as they are. c64
cases run JAX in its default mode, c128 ones with jax_enable_x64.

Run from the repository root:  python3 tests/golden/gen_linalg_complex_b.py
"""
import os
import shutil

import numpy as np

import jax
import jax.numpy as jnp

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "linalg_complex_b")
R = np.random.default_rng(1919)


def save(case, **arrays):
    for name, v in arrays.items():
        np.save(os.path.join(DIR, f"{case}_{name}.npy"), np.asarray(v))


def matrix(shape, dt):
    return (R.standard_normal(shape) + 1j * R.standard_normal(shape)).astype(dt)


def real_of(dt):
    return np.float64 if dt == np.complex128 else np.float32


def values_and_moduli(a):
    w, v = jnp.linalg.eigh(a)
    return w, jnp.abs(v) ** 2


def eigh_case(case, shape, dt):
    a = matrix(shape, dt)
    (w, mod), vjp = jax.vjp(values_and_moduli, jnp.asarray(a))
    ct_w = R.standard_normal(w.shape).astype(real_of(dt))
    ct_v = R.standard_normal(mod.shape).astype(real_of(dt))
    (ct_a,) = vjp((jnp.asarray(ct_w), jnp.asarray(ct_v)))
    # grad of a real function of a complex input, as jax.grad gives it
    (g,) = [jax.grad(lambda a: jnp.sum(jnp.linalg.eigvalsh(a) * jnp.asarray(ct_w)))(jnp.asarray(a))]
    save(case, a=a, w=w, moduli=mod, ct_w=ct_w, ct_v=ct_v, ct_a=ct_a, grad_eigvalsh=g)


def svd_moduli(a):
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    return s, jnp.abs(u) ** 2, jnp.abs(vh) ** 2


def svd_case(case, shape, dt):
    a = matrix(shape, dt)
    (s, mu, mvh), vjp = jax.vjp(svd_moduli, jnp.asarray(a))
    rdt = real_of(dt)
    ct_s = R.standard_normal(s.shape).astype(rdt)
    ct_u = R.standard_normal(mu.shape).astype(rdt)
    ct_vh = R.standard_normal(mvh.shape).astype(rdt)
    (ct_a,) = vjp((jnp.asarray(ct_s), jnp.asarray(ct_u), jnp.asarray(ct_vh)))
    g = jax.grad(lambda a: jnp.sum(jnp.linalg.svd(a, compute_uv=False) * jnp.asarray(ct_s)))(
        jnp.asarray(a))
    save(case, a=a, s=s, moduli_u=mu, moduli_vh=mvh, ct_s=ct_s, ct_u=ct_u, ct_vh=ct_vh, ct_a=ct_a,
         grad_svdvals=g)


def lstsq_case(case, m, n, k, dt):
    a, b = matrix((m, n), dt), matrix((m, k), dt)
    x, resid, rank, s = jnp.linalg.lstsq(jnp.asarray(a), jnp.asarray(b))
    ct_x = matrix(x.shape, dt)
    # grad of a real loss: re<ct_x, x> + sum(resid)
    def loss(a, b):
        x, resid, _, _ = jnp.linalg.lstsq(a, b)
        return jnp.sum(jnp.real(jnp.conj(jnp.asarray(ct_x)) * x)) + jnp.sum(resid)

    ga, gb = jax.grad(loss, argnums=(0, 1))(jnp.asarray(a), jnp.asarray(b))
    save(case, a=a, b=b, x=x, resid=resid, rank=rank, s=s, ct_x=ct_x, grad_a=ga, grad_b=gb)


def pinv_case(case, shape, dt, hermitian):
    a = matrix(shape, dt)
    p, vjp = jax.vjp(lambda a: jnp.linalg.pinv(a, hermitian=hermitian), jnp.asarray(a))
    ct = matrix(p.shape, dt)
    (ct_a,) = vjp(jnp.asarray(ct))
    save(case, a=a, p=p, ct=ct, ct_a=ct_a)


def qr_case(case, shape, dt, mode):
    a = matrix(shape, dt)
    q, r = jnp.linalg.qr(jnp.asarray(a), mode=mode)
    save(case, a=a, q=q, r=r)


def qr_vjp_case(case, shape, dt, mode):
    """JAX's VJP of qr against complex cotangents (q and r are LAPACK's in both)."""
    a = matrix(shape, dt)
    (q, r), vjp = jax.vjp(lambda a: tuple(jnp.linalg.qr(a, mode=mode)), jnp.asarray(a))
    ct_q, ct_r = matrix(q.shape, dt), matrix(r.shape, dt)
    (ct_a,) = vjp((jnp.asarray(ct_q), jnp.asarray(ct_r)))
    save(case, a=a, q=q, r=r, ct_q=ct_q, ct_r=ct_r, ct_a=ct_a)


EIGH = (("eigh_c128", (4, 4), np.complex128), ("eigh_c64", (3, 3), np.complex64),
        ("eigh_batch_c128", (2, 3, 3), np.complex128))
QR = (("qr_tall_c128", (4, 3), np.complex128, "reduced"),
      ("qr_complete_c128", (4, 3), np.complex128, "complete"),
      ("qr_wide_c64", (2, 3), np.complex64, "reduced"),
      ("qr_batch_c128", (2, 3, 2), np.complex128, "reduced"))

SVD = (("svd_tall_c128", (4, 3), np.complex128), ("svd_wide_c64", (2, 3), np.complex64),
       ("svd_batch_c128", (2, 3, 3), np.complex128))
LSTSQ = (("lstsq_c128", (4, 3, 2), np.complex128), ("lstsq_c64", (3, 3, 1), np.complex64))

PINV = (("pinv_c128", (4, 3), np.complex128, False), ("pinv_wide_c64", (2, 3), np.complex64, False),
        ("pinv_hermitian_c128", (3, 3), np.complex128, True))
QR_VJP = (("qr_vjp_tall_c128", (4, 3), np.complex128, "reduced"),
          ("qr_vjp_complete_c128", (4, 3), np.complex128, "complete"),
          ("qr_vjp_wide_c64", (2, 3), np.complex64, "reduced"))


def main():
    shutil.rmtree(DIR, ignore_errors=True)
    os.makedirs(DIR)
    for case, shape, dt in EIGH:
        with jax.enable_x64(dt == np.complex128):
            eigh_case(case, shape, dt)
    for case, shape, dt, mode in QR:
        with jax.enable_x64(dt == np.complex128):
            qr_case(case, shape, dt, mode)
    for case, shape, dt in SVD:
        with jax.enable_x64(dt == np.complex128):
            svd_case(case, shape, dt)
    for case, (m, n, k), dt in LSTSQ:
        with jax.enable_x64(dt == np.complex128):
            lstsq_case(case, m, n, k, dt)
    for case, shape, dt, hermitian in PINV:
        with jax.enable_x64(dt == np.complex128):
            pinv_case(case, shape, dt, hermitian)
    for case, shape, dt, mode in QR_VJP:
        with jax.enable_x64(dt == np.complex128):
            qr_vjp_case(case, shape, dt, mode)
    with jax.enable_x64(True):
        # a Hermitian matrix holding a NaN: NaNs in both outputs, as JAX
        nan = np.array([[1.0, np.nan + 1j], [np.nan - 1j, 3.0]], np.complex128)
        w, v = jnp.linalg.eigh(nan)
        save("eigh_nan", a=nan, w=w, v=v)


if __name__ == "__main__":
    main()
