"""Golden data for complex numbers (tests/unit/test_complex.c).

Writes tests/golden/data/complex/, for each mode (x32: JAX's default mode,
complex64; x64: jax_enable_x64, complex128):
  <mode>.z.npy, <mode>.w.npy      complex inputs [2, 3]
  <mode>.x.npy                     a real input [2, 3] (f32 / f64)
  <mode>.a.npy, <mode>.b.npy       complex matrices [3, 4] and [4, 2]
  <mode>.<op>.npy                  JAX's result of each op named in OPS below
  <mode>.grad_<f>.npy              jax.grad of the real functions in GRADS
  <mode>.hgrad_<f>.npy             jax.grad(..., holomorphic=True) of HGRADS

Run from the repository root:  python3 tests/golden/gen_complex.py
"""
import os

import jax
import numpy as np

from common import write_modes

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "complex")


def ops(jnp):
    return {
        "exp": lambda z, w, x: jnp.exp(z),
        "log": lambda z, w, x: jnp.log(z),
        "sqrt": lambda z, w, x: jnp.sqrt(z),
        "rsqrt": lambda z, w, x: jax.lax.rsqrt(z),
        "tanh": lambda z, w, x: jnp.tanh(z),
        "sin": lambda z, w, x: jnp.sin(z),
        "cos": lambda z, w, x: jnp.cos(z),
        "abs": lambda z, w, x: jnp.abs(z),
        "sign": lambda z, w, x: jnp.sign(z),
        "square": lambda z, w, x: jnp.square(z),
        "reciprocal": lambda z, w, x: jnp.reciprocal(z),
        "cube": lambda z, w, x: jax.lax.integer_pow(z, 3),
        "neg": lambda z, w, x: -z,
        "conj": lambda z, w, x: jnp.conj(z),
        "real": lambda z, w, x: jnp.real(z),
        "imag": lambda z, w, x: jnp.imag(z),
        "angle": lambda z, w, x: jnp.angle(z),
        "add": lambda z, w, x: z + w,
        "sub": lambda z, w, x: z - w,
        "mul": lambda z, w, x: z * w,
        "div": lambda z, w, x: z / w,
        "pow": lambda z, w, x: z ** w,
        "mul_real": lambda z, w, x: z * x,
        "add_scalar": lambda z, w, x: x + (2 - 1j),
        "complex": lambda z, w, x: jax.lax.complex(x, 2 * x),
        "eq": lambda z, w, x: z == jnp.where(x > 0, z, w),
        "sum0": lambda z, w, x: jnp.sum(z, axis=0),
        "prod1": lambda z, w, x: jnp.prod(z, axis=1),
        "mean": lambda z, w, x: jnp.mean(z),
        "where": lambda z, w, x: jnp.where(x > 0, z, w),
        "astype_real": lambda z, w, x: z.real.astype(x.dtype),
        "exp2": lambda z, w, x: jnp.exp2(z),
        "expm1": lambda z, w, x: jnp.expm1(z),
        "log1p": lambda z, w, x: jnp.log1p(z),
        "tan": lambda z, w, x: jnp.tan(z),
        "asin": lambda z, w, x: jnp.arcsin(z),
        "acos": lambda z, w, x: jnp.arccos(z),
        "atan": lambda z, w, x: jnp.arctan(z),
        "sinh": lambda z, w, x: jnp.sinh(z),
        "cosh": lambda z, w, x: jnp.cosh(z),
        "asinh": lambda z, w, x: jnp.arcsinh(z),
        "acosh": lambda z, w, x: jnp.arccosh(z),
        "atanh": lambda z, w, x: jnp.arctanh(z),
        "gather": lambda z, w, x: z[:, IDX],
        "scatter_add": lambda z, w, x: z.at[:, IDX].add(w),
        "conv": lambda z, w, x: conv(z, w),
        # one fused kernel under jx's jit (tests/unit/test_fusion_complex.c)
        "chain": lambda z, w, x: chain(jnp, z, w, x),
        "chain_rows": lambda z, w, x: jnp.sum(chain(jnp, z, w, x), axis=1),
        "chain_cols": lambda z, w, x: jnp.sum(chain(jnp, z, w, x), axis=0),
        "trig_chain": lambda z, w, x: jnp.tan(z) * jnp.sinh(w) + jnp.cosh(z - w),
    }


IDX = np.array([2, 0, 2])  # a repeated index: scatter_add sums both updates


def conv(z, w):
    """[1, 2, 3] (NCH) by [1, 2, 2] (OIH): padded by 1, the kernel dilated by 2"""
    return jax.lax.conv_general_dilated(z[None], w[:, :2][None], window_strides=(1,),
                                        padding=[(1, 1)], rhs_dilation=(2,))


def chain(jnp, z, w, x):
    u = jnp.exp(z) * w - jnp.sqrt(z) / (w + jnp.conj(z))
    v = jnp.sin(u) * jnp.cos(z) + jnp.tanh(w) + jnp.log(z) * z ** w
    s = jnp.where(x > 0, u, v) * jnp.sign(z)
    s = s + jax.lax.complex(x, jnp.real(z)) * jax.lax.rsqrt(w) - jnp.imag(w)
    return s + jnp.abs(z) + jax.lax.integer_pow(z, 3) - jax.lax.integer_pow(w, -21)


def grads(jnp):
    return {
        "abs2": lambda z, w: jnp.sum(jnp.abs(z) ** 2),
        "re_sq": lambda z, w: jnp.sum(jnp.real(z * z)),
        "abs_expw": lambda z, w: jnp.sum(jnp.abs(jnp.exp(z) * w)),
        "im_logdiv": lambda z, w: jnp.sum(jnp.imag(jnp.log(z) / w)),
        "angle": lambda z, w: jnp.sum(jnp.angle(z) * jnp.real(w)),
        "mixed": lambda z, w: jnp.sum(jnp.real(jnp.sqrt(z) * jnp.conj(w)) + jnp.tanh(z).imag),
        "trig": lambda z, w: jnp.sum(jnp.abs(jnp.tan(z) + jnp.arcsin(w)) + jnp.real(jnp.arccos(z) * jnp.arctan(w))),
        # acosh's JVP, 1/sqrt(x^2 - 1), is its derivative where Re x >= 0 only
        "hyp": lambda z, w: jnp.sum(jnp.imag(jnp.sinh(z) * jnp.cosh(w) + jnp.arcsinh(z)) + jnp.abs(jnp.arccosh(w + 3) - jnp.arctanh(z))),
        "scatter": lambda z, w: jnp.sum(jnp.abs(z.at[:, IDX].add(w * z)) ** 2 + jnp.real(z[:, IDX] * w)),
        "conv_lhs": lambda z, w: jnp.sum(jnp.abs(conv(z, w)) ** 2),
        "conv_rhs": lambda z, w: jnp.sum(jnp.imag(conv(w, z)) + jnp.real(conv(w, z * z))),
        "logexp1p": lambda z, w: jnp.sum(jnp.abs(jnp.exp2(w) * jnp.expm1(z)) + jnp.real(jnp.log1p(w) * z)),
    }


def hgrads(jnp):
    return {
        "sinz": lambda z, w: jnp.sum(jnp.sin(z) * z),
        "poly": lambda z, w: jnp.sum(z ** 3 * w + jnp.exp(z)),
        "inv": lambda z, w: jnp.sum(jnp.arctan(z) * jnp.sinh(w) + jnp.log1p(z) * jnp.expm1(w) + jnp.arcsinh(z) + jnp.arccos(z) + jnp.arctanh(z) * jnp.tan(z)),
    }


def run(mode):
    jax.config.update("jax_enable_x64", mode == "x64")
    import jax.numpy as jnp
    cdt, rdt = (np.complex128, np.float64) if mode == "x64" else (np.complex64, np.float32)
    r = np.random.default_rng(11)

    def crand(*s):
        return (r.standard_normal(s) + 1j * r.standard_normal(s)).astype(cdt)

    z, w = crand(2, 3), crand(2, 3)
    x = r.standard_normal((2, 3)).astype(rdt)
    a, b = crand(3, 4), crand(4, 2)
    save = lambda n, v: np.save(os.path.join(OUT, f"{mode}.{n}.npy"), np.asarray(v))
    for n, v in (("z", z), ("w", w), ("x", x), ("a", a), ("b", b)):
        save(n, v)
    for n, f in ops(jnp).items():
        save(n, f(jnp.asarray(z), jnp.asarray(w), jnp.asarray(x)))
    save("matmul", jnp.asarray(a) @ jnp.asarray(b))
    save("grad_matmul", jax.grad(lambda a, b: jnp.sum(jnp.abs(a @ b) ** 2))(a, b))
    for n, f in grads(jnp).items():
        save("grad_" + n, jax.grad(f)(z, w))
    for n, f in hgrads(jnp).items():
        save("hgrad_" + n, jax.grad(f, holomorphic=True)(z, w))


def main():
    write_modes(OUT, run, "complex")


if __name__ == "__main__":
    main()
