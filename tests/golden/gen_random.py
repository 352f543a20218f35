"""Golden files for the random family: jax.random with its default PRNG
(threefry2x32, jax_threefry_partitionable=True), in both of JAX's modes:

  data/random      JAX's default mode (jax_enable_x64=False): f16, bf16, f32;
                   jx's default mode must give these bits exactly
  data/random_x64  jax_enable_x64=True, f64 too; the conformance runner turns
                   jx's x64 mode on for a family whose name ends in _x64

Every case takes the raw key (jax.random.key_data, u32[2]) as in0, so the C
side needs no seeding logic to run it. Every value must match exactly (rtol =
atol = 0), except f64 normal and truncated_normal: XLA's f64 erf_inv is a
polynomial a few ulp from the true value, jx's is refined to double
precision, so those cases carry a tolerance. The f32 bits are those of XLA's
CPU kernels on a CPU with fused multiply-add (src/ops/random_ops.c).

Run from the repository root:  python3 tests/golden/gen_random.py
"""
import jax

assert jax.config.jax_threefry_partitionable, "golden data assumes partitionable threefry"

import jax.numpy as jnp  # noqa: E402
import jax.random as jr  # noqa: E402
import numpy as np  # noqa: E402
from common import Family, bfloat16  # noqa: E402

EXACT = dict(rtol=0.0, atol=0.0)
F64_ERF_TOL = dict(rtol=1e-14, atol=1e-14)


def kd(key):
    return np.asarray(jr.key_data(key))


def keys():
    """A few keys: from seeds, and one from a split (high words non-zero)."""
    out = [("s0", jr.key(0)), ("s42", jr.key(42)), ("s2p40", jr.key(2**40 + 7))]
    out.append(("split", jr.split(jr.key(7), 3)[2]))
    return out


def generate(x64):
    jax.config.update("jax_enable_x64", x64)
    fam = Family("random_x64" if x64 else "random")
    FLOATS = [np.float16, bfloat16, np.float32] + ([np.float64] if x64 else [])

    def erf_tol(dt):
        return F64_ERF_TOL if np.dtype(dt) == np.float64 else EXACT

    # ---- keys from seeds: in0 is the seed as u64 ----
    # (the default mode's seeds are 32-bit: JAX keeps the low word)
    seeds = [0, 1, 42, 2**31, 2**32 + 5, 2**40 + 7]
    if x64:
        seeds += [2**63 - 1, 2**63, 2**63 + 12345, 2**64 - 1]
    for seed in seeds:
        s = np.uint64(seed) if x64 else seed
        fam.case("key", [np.array(np.uint64(seed))], [kd(jr.key(s))], id=f"key_{seed}")
    # negative int64 seeds are their two's complement
    fam.case("key", [np.array(np.int64(-3).astype(np.uint64))], [kd(jr.key(-3))], id="key_minus3")

    # ---- split, fold_in ----
    for name, k in keys():
        for n in [0, 1, 2, 5]:
            fam.case("split", [kd(k)], [kd(jr.split(k, n))], id=f"split_{name}_{n}", n=n)
        for d in [0, 1, 12345, 2**32 - 1]:
            fam.case("fold_in", [kd(k)], [kd(jr.fold_in(k, d))], id=f"fold_in_{name}_{d}", data=d)

    # ---- bits (u32) ----
    SHAPES = [(), (0,), (1,), (5,), (7,), (3, 4), (2, 3, 5), (2, 0, 3), (1, 1, 1)]
    for name, k in keys():
        for s in SHAPES:
            fam.case("bits", [kd(k)], [jr.bits(k, s, dtype=jnp.uint32)],
                     id=f"bits_{name}_{'x'.join(map(str, s)) or 'scalar'}", shape=list(s))

    # ---- uniform: every float dtype, several ranges ----
    RANGES = [(0.0, 1.0), (-2.0, 5.0), (-1e-3, 1e-3), (3.0, 3.0), (1.0, 1000.0), (-7.5, -0.25)]
    for name, k in keys():
        for dt in FLOATS:
            for lo, hi in RANGES:
                for s in ([(), (7,), (4, 5)] if name == "s0" else [(7,)]):
                    fam.case("uniform", [kd(k)], [jr.uniform(k, s, dt, lo, hi)],
                             id=f"uniform_{name}_{np.dtype(dt).name}", dtype=dt, shape=list(s),
                             lo=lo, hi=hi, **EXACT)
        fam.case("uniform", [kd(k)], [jr.uniform(k, (0, 3), jnp.float32)],
                 id=f"uniform_{name}_empty", dtype=np.float32, shape=[0, 3], lo=0.0, hi=1.0)
    # a large draw exercises the whole mantissa range
    fam.case("uniform", [kd(jr.key(1))], [jr.uniform(jr.key(1), (4096,), jnp.float32)],
             id="uniform_large_f32", dtype=np.float32, shape=[4096], lo=0.0, hi=1.0)
    fam.case("uniform", [kd(jr.key(1))], [jr.uniform(jr.key(1), (1024,), bfloat16)],
             id="uniform_large_bf16", dtype=bfloat16, shape=[1024], lo=0.0, hi=1.0)

    # ---- normal, truncated_normal ----
    for name, k in keys():
        for dt in FLOATS:
            tol = erf_tol(dt)
            for s in [(), (9,), (3, 4)]:
                fam.case("normal", [kd(k)], [jr.normal(k, s, dt)], id=f"normal_{name}_{np.dtype(dt).name}",
                         dtype=dt, shape=list(s), **tol)
            for lo, hi in [(-2.0, 2.0), (0.0, 1.0), (-1.0, 3.0), (1.0, 5.0), (-np.inf, 0.5)]:
                fam.case("truncated_normal", [kd(k)], [jr.truncated_normal(k, lo, hi, (11,), dt)],
                         id=f"truncated_normal_{name}_{np.dtype(dt).name}", dtype=dt, shape=[11],
                         lo=lo, hi=hi, **tol)
    fam.case("normal", [kd(jr.key(5))], [jr.normal(jr.key(5), (2048,), jnp.float32)],
             id="normal_large_f32", dtype=np.float32, shape=[2048], **EXACT)
    fam.case("normal", [kd(jr.key(5))], [jr.normal(jr.key(5), (0,), jnp.float32)],
             id="normal_empty", dtype=np.float32, shape=[0])

    # ---- bernoulli ----
    for name, k in keys():
        for p in [0.0, 0.3, 0.5, 0.99, 1.0]:
            for s in [(), (10,), (4, 6)]:
                fam.case("bernoulli", [kd(k)], [jr.bernoulli(k, p, s)], id=f"bernoulli_{name}",
                         p=p, shape=list(s))

    # ---- categorical: JAX's default int (i32; i64 under x64) ----
    r = np.random.default_rng(0)
    for name, k in keys():
        for dt in FLOATS:
            for shape, axis in [((5,), 0), ((3, 4), 1), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1),
                                ((6, 1), 1)]:
                logits = (r.standard_normal(shape) * 2).astype(dt)
                want = np.asarray(jr.categorical(k, logits, axis=axis))
                fam.case("categorical", [kd(k), logits], [want],
                         id=f"categorical_{name}_{np.dtype(dt).name}", axis=axis)
    # a strongly peaked distribution and one with an impossible category
    peaked = np.array([[0.0, 20.0, 0.0], [-np.inf, 0.0, 0.0]], np.float32)
    for name, k in keys():
        want = np.asarray(jr.categorical(k, peaked, axis=-1))
        fam.case("categorical", [kd(k), peaked], [want], id=f"categorical_{name}_peaked", axis=-1)

    # ---- permutation: JAX's default int ----
    for name, k in keys():
        for n in [0, 1, 2, 10, 100, 1625, 1626, 3000]:
            want = np.asarray(jr.permutation(k, n))
            fam.case("permutation", [kd(k)], [want], id=f"permutation_{name}_{n}", n=n)

    fam.write()


generate(x64=False)
generate(x64=True)
