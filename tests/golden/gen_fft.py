"""Golden data for the Fourier transforms (tests/unit/test_fft.c).

Writes tests/golden/data/fft/, for each mode (x32: JAX's default mode; x64):
  <mode>.x.npy     a real input [4, 6] (f32 / f64)
  <mode>.z.npy     a complex input [4, 6] (c64 / c128)
  <mode>.<case>.npy  JAX's result of each case in CASES (jax.numpy.fft)
  <mode>.grad_<g>.npy  jax.grad of the real functions in GRADS w.r.t. x or z

Run from the repository root:  python3 tests/golden/gen_fft.py
"""
import os

import jax
import numpy as np

from common import write_modes

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "fft")


def cases(f):
    return {
        "fft": lambda x, z: f.fft(z),
        "fft_n8_axis0": lambda x, z: f.fft(z, n=8, axis=0),
        "fft_n4_real": lambda x, z: f.fft(x, n=4),
        "ifft": lambda x, z: f.ifft(z),
        "ifft_ortho": lambda x, z: f.ifft(z, norm="ortho"),
        "fft_forward": lambda x, z: f.fft(z, norm="forward"),
        "rfft": lambda x, z: f.rfft(x),
        "rfft_n5": lambda x, z: f.rfft(x, n=5),
        "rfft_axis0_ortho": lambda x, z: f.rfft(x, axis=0, norm="ortho"),
        "irfft": lambda x, z: f.irfft(z),
        "irfft_n7": lambda x, z: f.irfft(z, n=7),
        "irfft_axis0_forward": lambda x, z: f.irfft(z, axis=0, norm="forward"),
        "fft2": lambda x, z: f.fft2(z),
        "ifft2_s": lambda x, z: f.ifft2(z, s=(3, 8)),
        "rfft2": lambda x, z: f.rfft2(x),
        "irfft2": lambda x, z: f.irfft2(z),
        "fftn_axes10": lambda x, z: f.fftn(z, axes=(1, 0)),
        "rfftn_ortho": lambda x, z: f.rfftn(x, norm="ortho"),
        "irfftn_s": lambda x, z: f.irfftn(z, s=(4, 9)),
        "fftshift": lambda x, z: f.fftshift(x),
        "ifftshift_axis1": lambda x, z: f.ifftshift(z, axes=1),
        "fftfreq7": lambda x, z: f.fftfreq(7, 0.5, dtype=x.dtype),
        "fftfreq8": lambda x, z: f.fftfreq(8, dtype=x.dtype),
        "rfftfreq7": lambda x, z: f.rfftfreq(7, 2.0, dtype=x.dtype),
    }


def grads(jnp, f):
    # real functions, each with respect to its first argument
    return {
        "rfft_x": (0, lambda x, z: jnp.sum(jnp.abs(f.rfft(x)) ** 2 * jnp.arange(4.0)[:, None])),
        "irfft_z": (1, lambda x, z: jnp.sum(f.irfft(z) * jnp.arange(10.0))),
        "fft_z": (1, lambda x, z: jnp.sum(jnp.real(f.fft(z)) * jnp.arange(6.0) +
                                       jnp.imag(f.ifft(z, axis=0)) ** 2)),
        "rfft2_irfft2": (0, lambda x, z: jnp.sum(jnp.sin(f.irfft2(f.rfft2(x) * 1.5)))),
        "rfft_n5": (0, lambda x, z: jnp.sum(jnp.imag(f.rfft(x, n=5, norm="ortho")))),
    }


def run(mode):
    jax.config.update("jax_enable_x64", mode == "x64")
    import jax.numpy as jnp
    f = jnp.fft
    cdt, rdt = (np.complex128, np.float64) if mode == "x64" else (np.complex64, np.float32)
    r = np.random.default_rng(5)
    x = r.standard_normal((4, 6)).astype(rdt)
    z = (r.standard_normal((4, 6)) + 1j * r.standard_normal((4, 6))).astype(cdt)
    save = lambda n, v: np.save(os.path.join(OUT, f"{mode}.{n}.npy"), np.asarray(v))
    save("x", x)
    save("z", z)
    for n, fn in cases(f).items():
        save(n, fn(jnp.asarray(x), jnp.asarray(z)))
    for n, (arg, fn) in grads(jnp, f).items():
        save("grad_" + n, jax.grad(fn, argnums=arg)(x, z))


def main():
    write_modes(OUT, run, "fft")


if __name__ == "__main__":
    main()
