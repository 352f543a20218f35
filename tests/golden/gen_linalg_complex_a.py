"""Goldens for the complex linear algebra of jx_linalg_cholesky, triangular_solve,
lu, solve, inv, det, slogdet, matrix_power, expm and the norms, read by
tests/unit/test_linalg_complex_a.c.

Each case writes <case>_<dt>_<name>.npy into tests/golden/data/linalg_complex_a/:
the inputs in0, in1, JAX's output out, a random cotangent ct (real for a real
output, so that the VJP is jax.grad of a real function) and JAX's VJP vjp0,
vjp1 against it. c64 cases run JAX in its default mode, c128 ones with
jax_enable_x64.

Run from the repository root:  python3 tests/golden/gen_linalg_complex_a.py
"""
import os
import shutil

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.linalg import expm

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "linalg_complex_a")
R = np.random.default_rng(1919)


def cnormal(shape, dt):
    return (R.standard_normal(shape) + 1j * R.standard_normal(shape)).astype(dt)


def general(dt, shape=(2, 3, 3)):
    """Well conditioned general complex matrices."""
    return (cnormal(shape, dt) + 3 * np.eye(shape[-1])).astype(dt)


def hermitian_pd(dt, shape=(2, 3, 3)):
    b = cnormal(shape, dt)
    return (b @ np.conj(np.swapaxes(b, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dt)


def tri(lower, transpose_a, conjugate_a, unit_diagonal, left_side):
    return lambda a, b: lax.linalg.triangular_solve(
        a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
        conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)


def logabsdet(a):
    return jnp.linalg.slogdet(a)[1]


def sign(a):
    return jnp.linalg.slogdet(a)[0]


# name: (function, input makers)
CASES = {
    "cholesky": (jnp.linalg.cholesky, [hermitian_pd]),
    "cholesky_upper": (lambda a: jnp.linalg.cholesky(a, upper=True), [hermitian_pd]),
    "tri_left_lower_h": (tri(True, True, True, False, True),
                         [general, lambda dt: cnormal((2, 3, 2), dt)]),
    "tri_right_upper_conj": (tri(False, False, True, False, False),
                             [general, lambda dt: cnormal((2, 2, 3), dt)]),
    "tri_left_upper_t_unit": (tri(False, True, False, True, True),
                              [general, lambda dt: cnormal((2, 3, 2), dt)]),
    "lu": (lambda a: lax.linalg.lu(a)[0], [lambda dt: cnormal((2, 3, 3), dt)]),
    "solve": (jnp.linalg.solve, [general, lambda dt: cnormal((2, 3, 2), dt)]),
    "solve_vector": (jnp.linalg.solve,
                     [lambda dt: general(dt, (3, 3)), lambda dt: cnormal((3,), dt)]),
    "inv": (jnp.linalg.inv, [general]),
    "det": (jnp.linalg.det, [general]),
    "slogdet_sign": (sign, [general]),
    "slogdet_logabsdet": (logabsdet, [general]),
    "matrix_power_3": (lambda a: jnp.linalg.matrix_power(a, 3), [general]),
    "matrix_power_neg2": (lambda a: jnp.linalg.matrix_power(a, -2), [general]),
    "expm": (expm, [lambda dt: (0.3 * cnormal((2, 3, 3), dt)).astype(dt)]),
    "expm_squared": (expm, [lambda dt: (3 * cnormal((2, 3, 3), dt)).astype(dt)]),
    "vector_norm_2": (lambda x: jnp.linalg.vector_norm(x, axis=-1),
                      [lambda dt: cnormal((2, 4), dt)]),
    "vector_norm_1": (lambda x: jnp.linalg.vector_norm(x, ord=1, axis=-1),
                      [lambda dt: cnormal((2, 4), dt)]),
    "vector_norm_inf": (lambda x: jnp.linalg.vector_norm(x, ord=jnp.inf, axis=-1),
                        [lambda dt: cnormal((2, 4), dt)]),
    "vector_norm_neg_inf": (lambda x: jnp.linalg.vector_norm(x, ord=-jnp.inf, axis=-1),
                            [lambda dt: cnormal((2, 4), dt)]),
    "vector_norm_0": (lambda x: jnp.linalg.vector_norm(x, ord=0, axis=-1),
                      [lambda dt: cnormal((2, 4), dt)]),
    "vector_norm_3": (lambda x: jnp.linalg.vector_norm(x, ord=3, axis=-1),
                      [lambda dt: cnormal((2, 4), dt)]),
    "matrix_norm_fro": (lambda x: jnp.linalg.matrix_norm(x), [general]),
    "matrix_norm_1": (lambda x: jnp.linalg.matrix_norm(x, ord=1), [general]),
    "matrix_norm_neg_1": (lambda x: jnp.linalg.matrix_norm(x, ord=-1), [general]),
    "matrix_norm_inf": (lambda x: jnp.linalg.matrix_norm(x, ord=jnp.inf), [general]),
    "matrix_norm_neg_inf": (lambda x: jnp.linalg.matrix_norm(x, ord=-jnp.inf), [general]),
}


def save(case, **arrays):
    for name, v in arrays.items():
        np.save(os.path.join(DIR, f"{case}_{name}.npy"), np.asarray(v))


def cotangent(out):
    out = np.asarray(out)
    if np.iscomplexobj(out):
        return cnormal(out.shape, out.dtype)
    return R.standard_normal(out.shape).astype(out.dtype)


def run(name, fn, makers, dt):
    ins = [m(dt) for m in makers]
    out, vjp = jax.vjp(fn, *[jnp.asarray(x) for x in ins])
    ct = cotangent(out)
    cts = vjp(jnp.asarray(ct))
    arrays = {f"in{i}": x for i, x in enumerate(ins)}
    arrays.update({f"vjp{i}": c for i, c in enumerate(cts)})
    tag = "c64" if dt == np.complex64 else "c128"
    save(f"{name}_{tag}", out=out, ct=ct, **arrays)
    if name == "lu":
        _, piv, perm = lax.linalg.lu(jnp.asarray(ins[0]))
        save(f"{name}_{tag}", pivots=piv, permutation=perm)


def main():
    shutil.rmtree(DIR, ignore_errors=True)
    os.makedirs(DIR)
    for dt in (np.complex64, np.complex128):
        with jax.enable_x64(dt == np.complex128):
            for name, (fn, makers) in CASES.items():
                run(name, fn, makers, dt)
    # a Hermitian matrix that is not positive definite: JAX's NaNs
    with jax.enable_x64(True):
        a = np.array([[1, 2 + 1j], [2 - 1j, 1]], np.complex128)
        save("not_pd_c128", a=a, out=jnp.linalg.cholesky(jnp.asarray(a)))
        s = np.array([[1 + 1j, 2 + 2j], [2 + 2j, 4 + 4j]], np.complex128)
        sign_, logabs = jnp.linalg.slogdet(jnp.asarray(s))
        save("singular_c128", a=s, det=jnp.linalg.det(jnp.asarray(s)), sign=sign_, logabsdet=logabs)


if __name__ == "__main__":
    main()
