"""Goldens for the general eigendecomposition (jx_linalg_eig, eigvals,
eig_ex), read by tests/unit/test_linalg_geev.c.

Each case writes <case>_<name>.npy into tests/golden/data/linalg_eig/: the
input a, JAX's eigenvalues w and eigenvectors (vr right, vl left), random
complex cotangents (ct_*) and JAX's VJP ct_a against them. geev's
normalization (unit norm, largest component real) and order are LAPACK's in
both, so the vectors are compared as they are. f32 and c64 cases run JAX in
its default mode, f64 and c128 ones with jax_enable_x64.

Run from the repository root:  python3 tests/golden/gen_linalg_eig.py
"""
import os
import shutil

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "linalg_eig")
R = np.random.default_rng(192)


def save(case, **arrays):
    for name, v in arrays.items():
        np.save(os.path.join(DIR, f"{case}_{name}.npy"), np.asarray(v))


def matrix(shape, dt):
    """A general matrix (with complex eigenvalue pairs when real)."""
    m = R.standard_normal(shape)
    if np.issubdtype(dt, np.complexfloating):
        m = m + 1j * R.standard_normal(shape)
    return m.astype(dt)


def cotangent(shape, cdt):
    return (R.standard_normal(shape) + 1j * R.standard_normal(shape)).astype(cdt)


def complex_of(dt):
    return np.complex128 if dt in (np.float64, np.complex128) else np.complex64


def eig_case(case, shape, dt):
    a = matrix(shape, dt)
    cdt = complex_of(dt)
    w, vl, vr = lax.linalg.eig(jnp.asarray(a))
    # eigvals and its VJP
    out, vjp = jax.vjp(jnp.linalg.eigvals, jnp.asarray(a))
    ct_w = cotangent(out.shape, cdt)
    (ct_a,) = vjp(jnp.asarray(ct_w))
    save(case, a=a, w=w, vl=vl, vr=vr, ct_w=ct_w, ct_a=ct_a)
    # eigenvalues and right eigenvectors differentiated (the opt-in)
    def right(a):
        w, vr = lax.linalg.eig(a, compute_left_eigenvectors=False, enable_eigvec_derivs=True)
        return w, vr

    (w2, vr2), vjp = jax.vjp(right, jnp.asarray(a))
    ct_vr = cotangent(vr2.shape, cdt)
    (ct_a_right,) = vjp((jnp.asarray(ct_w), jnp.asarray(ct_vr)))
    # and all three
    def both(a):
        return tuple(lax.linalg.eig(a, enable_eigvec_derivs=True))

    _, vjp = jax.vjp(both, jnp.asarray(a))
    ct_vl = cotangent(vr2.shape, cdt)
    (ct_a_both,) = vjp((jnp.asarray(ct_w), jnp.asarray(ct_vl), jnp.asarray(ct_vr)))
    save(case, ct_vr=ct_vr, ct_vl=ct_vl, ct_a_right=ct_a_right, ct_a_both=ct_a_both)


CASES = (("eig_f64", (4, 4), np.float64), ("eig_c128", (3, 3), np.complex128),
         ("eig_batch_f64", (2, 3, 3), np.float64), ("eig_batch_c128", (2, 2, 3, 3), np.complex128),
         ("eig_f32", (4, 4), np.float32), ("eig_c64", (3, 3), np.complex64),
         ("eig_batch_f32", (3, 3, 3), np.float32))


def main():
    shutil.rmtree(DIR, ignore_errors=True)
    os.makedirs(DIR)
    for case, shape, dt in CASES:
        with jax.enable_x64(dt in (np.float64, np.complex128)):
            eig_case(case, shape, dt)
    with jax.enable_x64(True):
        # real eigenvalues only (a symmetric matrix) and a repeated one
        sym = matrix((3, 3), np.float64)
        sym = sym + sym.T
        w, vr = jnp.linalg.eig(sym)
        save("eig_symmetric", a=sym, w=w, vr=vr)
        # a matrix holding a NaN: NaNs, as JAX
        nan = np.array([[1.0, np.nan], [2.0, 3.0]])
        w, vr = jnp.linalg.eig(nan)
        save("eig_nan", a=nan, w=w, vr=vr)


if __name__ == "__main__":
    main()
