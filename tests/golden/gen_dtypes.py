"""Golden data for the dtype layer (tests/unit/test_dtypes.c).

Writes tests/golden/data/dtypes/:
  promote.txt          strong pairs: "S a b result"; weak Python scalars (bool,
                       int, float, complex) against each strong dtype: "W kind b result weak"
                       -- all from JAX with x64 enabled (jx_promote_types, and
                       jx's x64 mode)
  promote_x32.txt      the same from JAX's default mode (jax_enable_x64=False), which
                       jx's default mode follows; where an operand is 64-bit, which
                       that mode cannot hold, x64 JAX's result
  bf16_to_f32.npy      u32[65536]: the f32 bits of every bf16 bit pattern (JAX)
  f16_to_f32.npy       u32[65536]: the same for f16 (JAX: NaNs come back quiet)
  f32_to_bf16.in/out   u32 inputs (f32 bits), u16 results (JAX)
  f32_to_f16.in/out    u32 inputs, u16 results (JAX: NaN payloads kept, quieted)
  f64_to_f16.in/out    u64 inputs (f64 bits), u16 results (NumPy, which rounds once;
                       NaNs as JAX: canonical quiet NaN with the sign)
  f64_to_bf16.in/out   u64 inputs, u16 results from an exact reference below.
                       jx rounds f64 -> f16/bf16 once (include/jx/array.h); JAX/XLA
                       on CPU (and ml_dtypes for bf16) go through f32 and so round
                       twice near ties -- a deliberate difference, counted on stdout.
  store_f64.in.npy     f64 values; store_f64.<dt>.npy: JAX astype(dt) for the
                       integers (saturating, NaN -> 0); NumPy for bool/f16/f32/f64
                       (IEEE subnormals, which XLA on CPU flushes to zero when
                       converting f64 to f32); bf16 again from the exact reference
  store_i64.in.npy     i64 values; store_i64.<dt>.npy: JAX astype(dt)

Run from the repository root:  python3 tests/golden/gen_dtypes.py
"""
import os
import shutil
import warnings
from fractions import Fraction

import jax
import ml_dtypes
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax._src import dtypes as jdt  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "dtypes")
bf16 = ml_dtypes.bfloat16
DTYPES = [("bool", np.bool_), ("i8", np.int8), ("i16", np.int16), ("i32", np.int32),
          ("i64", np.int64), ("u8", np.uint8), ("u16", np.uint16), ("u32", np.uint32),
          ("u64", np.uint64), ("f16", np.float16), ("bf16", bf16), ("f32", np.float32),
          ("f64", np.float64), ("c64", np.complex64), ("c128", np.complex128)]
NAME = {np.dtype(t): n for n, t in DTYPES}
r = np.random.default_rng(1234)


def jax_astype(x, t):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(jnp.asarray(x).astype(t))


def save(name, arr):
    np.save(os.path.join(OUT, name), arr)


# ---- promotion ----
def promotion_lines(x64):
    """x64: the lattice (promote_types), as x64 JAX gives it; otherwise the
    result dtypes of JAX's default mode (result_type canonicalizes), with the
    lattice where an operand is 64-bit."""
    def wide(t):  # the dtypes JAX's default mode cannot hold
        return np.dtype(t) in (np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float64),
                               np.dtype(np.complex128))

    lines = []
    for a, ta in DTYPES:
        for b, tb in DTYPES:
            if x64 or wide(ta) or wide(tb):
                r = jnp.promote_types(ta, tb)
            else:
                jax.config.update("jax_enable_x64", False)
                r = jnp.result_type(ta, tb)
                jax.config.update("jax_enable_x64", True)
            lines.append(f"S {a} {b} {NAME[np.dtype(r)]}")
    for kind, val in (("bool", True), ("int", 2), ("float", 2.5), ("complex", 2.5 + 1j)):
        for b, tb in DTYPES:
            jax.config.update("jax_enable_x64", x64 or wide(tb))
            dt, weak = jdt.result_type(val, np.dtype(tb), return_weak_type_flag=True)
            jax.config.update("jax_enable_x64", True)
            lines.append(f"W {kind} {b} {NAME[np.dtype(dt)]} {int(weak)}")
    return lines


# ---- exact rounding of a double to a 16-bit float (reference for f64 -> bf16) ----
def round_exact(x, mant_bits, emin, emax):
    """x (a finite Python float) rounded once, to nearest even, to a binary format with
    mant_bits significant bits, normal exponents [emin, emax] (value = m * 2^e, m in [1,2))."""
    if x == 0:
        return x
    f = abs(Fraction(x))
    e = f.numerator.bit_length() - f.denominator.bit_length()
    if Fraction(2) ** e > f:
        e -= 1
    q = max(e, emin) - (mant_bits - 1)  # quantum 2^q
    scaled = f / Fraction(2) ** q
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    v = Fraction(n) * Fraction(2) ** q
    maxv = (2 - Fraction(2) ** (1 - mant_bits)) * Fraction(2) ** emax
    if v > maxv:
        return float("inf") if x > 0 else float("-inf")
    return float(v) if x > 0 else -float(v)


def f64_to_bf16_exact(xs):
    out = np.empty(len(xs), np.uint16)
    for i, x in enumerate(xs):
        if np.isnan(x):
            out[i] = 0xFFC0 if np.signbit(x) else 0x7FC0
        elif np.isinf(x):
            out[i] = 0xFF80 if x < 0 else 0x7F80
        else:
            v = round_exact(float(x), 8, -126, 127)
            h = np.array([v], np.float32).astype(bf16).view(np.uint16)[0]  # exact
            out[i] = h | (0x8000 if np.signbit(x) else 0)
    return out


# ---- samples for 32 -> 16 and 64 -> 16 ----
def neighbours(vals, dtype):
    """vals, the midpoints between them, and one ulp (of dtype) either side of each."""
    vals = np.asarray(vals, dtype)
    up = np.nextafter(vals, dtype(np.inf))
    dn = np.nextafter(vals, dtype(-np.inf))
    return np.concatenate([vals, up, dn])


def half_grid(fmt, n):
    """Representable values of a 16-bit format (fmt: np.float16 or bf16), the ties
    between neighbours, all as f64: a random subset of n plus the special ranges."""
    pats = np.concatenate([
        r.integers(0, 0x7C00 if fmt is np.float16 else 0x7F80, size=n),
        np.arange(0, 40), np.arange(0x3B0, 0x410),  # subnormals and the normal boundary
        np.array([0x7BFE, 0x7BFF] if fmt is np.float16 else [0x7F7E, 0x7F7F]),  # max finite
        np.array([0x3C00, 0x3C01, 0x3F80, 0x3F81]),
    ]).astype(np.uint16)
    lo = pats.view(fmt).astype(np.float64)
    hi = (pats + 1).view(fmt).astype(np.float64)  # the next value (inf past max finite)
    ties = np.where(np.isfinite(hi), (lo + hi) / 2, np.nan)
    if fmt is np.float16:
        ties[pats == 0x7BFF] = 65520.0  # the tie that overflows
    else:
        ties[pats == 0x7F7F] = float(Fraction(2) ** 128 - Fraction(2) ** (127 - 8))
    ties = ties[np.isfinite(ties)]
    vals = np.concatenate([lo, ties])
    vals = np.concatenate([vals, -vals])
    return vals


def specials64():
    nan_payloads = np.array([0x7FF0000000000001, 0x7FF4000000000000, 0xFFF8123456789ABC,
                             0x7FF8000000000001, 0xFFF0000000000F00], np.uint64).view(np.float64)
    return np.concatenate([nan_payloads, [np.inf, -np.inf, 0.0, -0.0, 1e300, -1e300, 1e-300,
                                          5e-324, 65504.0, 65519.99, 65520.0, 3.4e38,
                                          3.3895313892515355e38, 2.0 ** -24, 2.0 ** -25,
                                          2.0 ** -25 * 1.0000001, 2.0 ** -133, 2.0 ** -134]])


def specials32():
    nan_payloads = np.array([0x7F800001, 0x7FA00000, 0xFFC12345, 0x7F812345, 0xFFFFFFFF,
                             0x7FBFFFFF], np.uint32).view(np.float32)
    s = specials64()[5:].astype(np.float32)
    return np.concatenate([nan_payloads, s])


def conversions():
    all16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    save("bf16_to_f32.npy", jax_astype(all16.view(bf16), jnp.float32).view(np.uint32))
    save("f16_to_f32.npy", jax_astype(all16.view(np.float16), jnp.float32).view(np.uint32))

    rand32 = r.integers(0, 2 ** 32, size=4000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    for name, fmt, t in (("bf16", bf16, jnp.bfloat16), ("f16", np.float16, jnp.float16)):
        grid = half_grid(fmt, 1500)
        x32 = np.concatenate([neighbours(grid.astype(np.float32), np.float32), specials32(),
                              rand32])
        save(f"f32_to_{name}.in.npy", x32.view(np.uint32))
        save(f"f32_to_{name}.out.npy", jax_astype(x32, t).view(np.uint16))
        x64 = np.concatenate([neighbours(grid, np.float64), specials64(),
                              r.standard_normal(2000) * 10.0 ** r.integers(-12, 12, 2000),
                              rand32.astype(np.float64)])
        save(f"f64_to_{name}.in.npy", x64.view(np.uint64))
        jax_out = jax_astype(x64, t).view(np.uint16)
        if name == "f16":  # NumPy rounds f64 -> f16 once; NaNs as JAX (canonical, signed)
            out = x64.astype(np.float16).view(np.uint16)
            out[np.isnan(x64)] = jax_out[np.isnan(x64)]
        else:
            out = f64_to_bf16_exact(x64)
            # where no double rounding can happen (x exact in f32) JAX must agree, except
            # that XLA on CPU flushes f64 values in f32's subnormal range to zero
            with np.errstate(over="ignore"):
                exact32 = (np.isfinite(x64) & (np.abs(x64) >= 2.0 ** -126) &
                           (x64.astype(np.float32).astype(np.float64) == x64))
            assert (out[exact32] == jax_out[exact32]).all()
        n_diff = int((out != jax_out).sum())
        print(f"f64 -> {name}: JAX (via f32) differs from rounding once on {n_diff} "
              f"of {len(x64)} samples")
        save(f"f64_to_{name}.out.npy", out)


def stores():
    f = np.concatenate([specials64(), [3.7, -3.7, 255.5, 256.0, -128.5, -129.0, 127.9, 2.0 ** 63,
                                       -(2.0 ** 63) - 5000.0, 2.0 ** 64, 2.0 ** 31, -(2.0 ** 31),
                                       4294967295.0, 65535.5, 1.5, 2.5, -0.5, 0.49999999],
                        r.standard_normal(200) * 10.0 ** r.integers(-3, 21, 200)])
    save("store_f64.in.npy", f)
    for n, t in DTYPES:
        if n == "bf16":
            out = f64_to_bf16_exact(f).view(bf16)
        elif n in ("bool", "f16", "f32", "f64", "c64", "c128"):
            out = f.astype(t)  # NumPy: IEEE, where XLA on CPU flushes subnormals to zero
        else:
            out = jax_astype(f, t)
        save(f"store_f64.{n}.npy", out)
    i = np.concatenate([
        np.array([0, 1, -1, 127, 128, 255, 256, -128, -129, 32767, 32768, 65535, 65536,
                  2 ** 31 - 1, 2 ** 31, -(2 ** 31), 2 ** 32 - 1, 2 ** 32, 2 ** 53 + 1,
                  2 ** 60 + 2 ** 36 + 1, 2 ** 60 + 2 ** 52 + 1, -(2 ** 60 + 2 ** 52 + 1),
                  2 ** 63 - 1, -(2 ** 63), 65519, 65520, 2049, 2051, 16777217], np.int64),
        r.integers(-(2 ** 63), 2 ** 63 - 1, size=200, dtype=np.int64),
        r.integers(-70000, 70000, size=100, dtype=np.int64)])
    save("store_i64.in.npy", i)
    for n, t in DTYPES:
        save(f"store_i64.{n}.npy", jax_astype(i, t))


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    for name, x64 in (("promote.txt", True), ("promote_x32.txt", False)):
        with open(os.path.join(OUT, name), "w") as fh:
            fh.write("# written by tests/golden/gen_dtypes.py; do not edit\n")
            fh.write("\n".join(promotion_lines(x64)) + "\n")
    conversions()
    stores()
    total = sum(os.path.getsize(os.path.join(OUT, p)) for p in os.listdir(OUT))
    print(f"dtypes: {len(os.listdir(OUT))} files, {total / 1e6:.2f} MB -> {OUT}")


if __name__ == "__main__":
    main()
