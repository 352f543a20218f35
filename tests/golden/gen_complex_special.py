"""Golden data for the complex inverse trigonometric and hyperbolic
functions, expm1, log1p and exp2 in fused kernels
(tests/unit/test_fusion_complex_special.c).

Writes tests/golden/data/complex_special/, for each mode (x32: JAX's
default mode, complex64; x64: jax_enable_x64, complex128):
  <mode>.z.npy, <mode>.w.npy      complex inputs [4, 6], every quadrant,
                                  moduli from 0.1 to 3 (both sides of 1,
                                  where the inverse functions' cuts begin)
  <mode>.<chain>.npy              JAX's result of each chain in CHAINS

Run from the repository root:  python3 tests/golden/gen_complex_special.py
"""
import os

import jax
import numpy as np

from common import write_modes

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "complex_special")


def chains(jnp):
    return {
        "inverse": lambda z, w: (jnp.arcsin(z) * jnp.arccos(w) + jnp.arctan(z - w)
                                 - jnp.arcsinh(w) * jnp.arccosh(z) + jnp.arctanh(z * w)),
        "special": lambda z, w: (jnp.expm1(z) * jnp.exp2(w) + jnp.log1p(z * w)
                                 - jnp.expm1(jnp.log1p(w))),
        "special_rows": lambda z, w: jnp.sum(jnp.log1p(jnp.arcsinh(z) * w) + jnp.exp2(z), axis=1),
    }


def run(mode):
    jax.config.update("jax_enable_x64", mode == "x64")
    import jax.numpy as jnp
    cdt = np.complex128 if mode == "x64" else np.complex64
    r = np.random.default_rng(19)

    def crand(*s):
        angle = r.uniform(-np.pi, np.pi, s)
        modulus = np.exp(r.uniform(np.log(0.1), np.log(3.0), s))
        return (modulus * np.exp(1j * angle)).astype(cdt)

    z, w = crand(4, 6), crand(4, 6)
    save = lambda n, v: np.save(os.path.join(OUT, f"{mode}.{n}.npy"), np.asarray(v))
    save("z", z)
    save("w", w)
    for n, f in chains(jnp).items():
        save(n, jax.jit(f)(jnp.asarray(z), jnp.asarray(w)))


def main():
    write_modes(OUT, run, "complex_special")


if __name__ == "__main__":
    main()
