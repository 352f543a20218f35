"""Goldens for the elementwise family: unary, binary, selection, conversion.

Expected values come from JAX in 64-bit mode, except that the dtypes of
promotions and of exact ops on 32-bit operands come from JAX's default mode
(jax_mode_for), whose dtypes jx's default mode gives. Transcendental functions are
computed in float64 (JAX x64, or SciPy for erf_inv/lgamma/digamma) from the
very input values and rounded once to the target dtype; the f32 kernels may
differ from that by a few ulp, hence rtol=2e-6 on those cases (f64: 4e-15,
16-bit floats: the harness defaults, which cover one ulp of double rounding
through f32). Composite activations in 16-bit floats compare with JAX's own
16-bit result.

Integer and bool inputs of floating functions compute in INEXACT[dtype]:
f32 for bool and integers up to 32 bits, f64 for 64-bit integers, as JAX
(jx_to_inexact).

Run from the repository root: python3 tests/golden/gen_elementwise.py
"""
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BY_NAME, Family, bfloat16, jax_mode_for, rng  # noqa: E402

warnings.filterwarnings("ignore")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")
import jax.numpy as jnp  # noqa: E402
import mpmath  # noqa: E402
import scipy.special as sps  # noqa: E402
from jax import lax  # noqa: E402

fam = Family("elementwise")
R = rng(7)

FLOATS = ["f16", "bf16", "f32", "f64"]
SINTS = ["i8", "i16", "i32", "i64"]
UINTS = ["u8", "u16", "u32", "u64"]
INTS = SINTS + UINTS
ALL = ["bool"] + INTS + FLOATS
INEXACT = {d: ("f64" if d in ("i64", "u64") else "f32") for d in ["bool"] + INTS}  # jx_to_inexact
F = {d: BY_NAME[d] for d in ALL}


def arr(vals, dt):
    return np.array(vals, dtype=np.float64).astype(F[dt]) if dt in FLOATS else \
        np.array(vals).astype(F[dt])


def ivals(dt):
    """Edge and ordinary values of an integer dtype."""
    if dt == "bool":
        return np.array([True, False, True, True, False], dtype=np.bool_)
    info = np.iinfo(F[dt])
    v = [info.min, info.max, 0, 1, 2, 3, 7, info.max - 1, info.min + 1, 100 % (int(info.max) + 1)]
    if info.min < 0:
        v += [-1, -2, -7, -100]
    return np.array(v, dtype=object).astype(F[dt])


def fvals(dt, lo=-4.0, hi=4.0, n=12, extra=()):
    v = [np.nan, np.inf, -np.inf, 0.0, -0.0] + list(extra) + list(R.uniform(lo, hi, n))
    return arr(v, dt)


def f64_then(dt, f, x):
    """f evaluated in float64 on x's values, rounded once to dt."""
    with np.errstate(all="ignore"):
        y = np.asarray(f(np.asarray(x).astype(np.float64)), dtype=np.float64)
    return y.astype(F[dt])


def ftol(dt, f32=2e-6, f64=4e-15, atol32=None, atol64=None):
    if dt == "f32":
        return dict(rtol=f32, atol=atol32 if atol32 is not None else f32)
    if dt == "f64":
        return dict(rtol=f64, atol=atol64 if atol64 is not None else f64)
    return {}


def jx64(fn):
    return lambda x: np.asarray(fn(jnp.asarray(x, dtype=jnp.float64)))


# ---- transcendental and other floating unary functions ----
def digamma_ref(x):
    """mpmath: SciPy's psi loses ~1e-13 near negative integers (-10.999)."""
    mpmath.mp.dps = 30
    f = np.vectorize(lambda v: float(mpmath.digamma(v)) if np.isfinite(v) else
                     (v if v > 0 else np.nan), otypes=[np.float64])
    with np.errstate(all="ignore"):
        y = f(np.where((x <= 0) & (x == np.floor(x)), 1.0, x))
    return np.where((x <= 0) & (x == np.floor(x)), np.nan, y)


TRANS = {
    # name: (f64 reference, domain lo, hi, extra values, extra tolerance args)
    "exp": (np.exp, -20, 20, [88.0, -100.0, 1e-8], {}),
    "exp2": (np.exp2, -20, 20, [127.0, -130.0, 0.5], {}),
    "expm1": (np.expm1, -5, 5, [1e-10, -1e-10, 50.0], {}),
    "log": (np.log, 0, 100, [1.0, 1e-30, -1.0, 2.0], {}),
    "log1p": (np.log1p, -0.99, 10, [1e-10, -1.0, -2.0, 1e10], {}),
    "sqrt": (np.sqrt, 0, 100, [2.0, 1e-30, -1.0, 4.0], {}),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0, 100, [4.0, 1e-30, -1.0], {}),
    "cbrt": (np.cbrt, -100, 100, [27.0, -8.0, 1e-30], {}),
    "tanh": (np.tanh, -10, 10, [1e-8, 20.0, -20.0], {}),
    "logistic": (lambda x: sps.expit(x), -30, 30, [-80.0, 80.0, 1e-8], {}),
    "sin": (np.sin, -10, 10, [np.pi, 1e-8, 100.0], dict(atol32=1e-7)),
    "cos": (np.cos, -10, 10, [np.pi / 2, 100.0], dict(atol32=1e-7)),
    "tan": (np.tan, -1.5, 1.5, [1e-8, 3.0], dict(atol32=1e-7)),
    "asin": (np.arcsin, -1, 1, [1.0, -1.0, 1.5], {}),
    "acos": (np.arccos, -1, 1, [1.0, -1.0, 1.5], {}),
    "atan": (np.arctan, -10, 10, [1e10, 1e-8], {}),
    "sinh": (np.sinh, -10, 10, [1e-8, 100.0], {}),
    "cosh": (np.cosh, -10, 10, [100.0], {}),
    "asinh": (np.arcsinh, -10, 10, [1e-8, 1e10], {}),
    "acosh": (np.arccosh, 1, 20, [1.0, 0.5, 1e10], {}),
    "atanh": (np.arctanh, -1, 1, [1.0, -1.0, 1.5, 1e-8], {}),
    "erf": (sps.erf, -4, 4, [1e-8, 10.0], {}),
    "erf_inv": (sps.erfinv, -1, 1, [1.0, -1.0, 1.5, 0.999999, -0.9999999999, 1e-8,
                                    1 - 2.0**-52, 0.5], dict(f64=2e-14)),
    "lgamma": (sps.gammaln, -5, 10, [1.0, 2.0, -1.0, -2.0, 0.5, -0.5, 1e-8, 1e5, 3.0],
               dict(atol32=2e-6, atol64=1e-14)),
    "digamma": (digamma_ref, -5, 10, [1.0, -1.0, -2.0, 0.5, -0.5, 1e-8, -1e-8, 1e5,
                                      1.4616321449683622, -2.5, -10.999],
                dict(f64=1e-14, atol32=1e-6, atol64=1e-14)),
}

for name, (ref, lo, hi, extra, tol) in TRANS.items():
    for dt in FLOATS:
        x = fvals(dt, lo, hi, extra=extra)
        fam.case(name, [x], [f64_then(dt, ref, x)], id=f"{name}_{dt}", **ftol(dt, **tol))
    for dt in ["bool", "i8", "u8", "i32", "u64"]:
        x = ivals(dt)
        if name in ("exp", "exp2", "sinh", "cosh"):
            x = x[np.abs(x.astype(np.float64)) < 200] if dt != "bool" else x
        out = INEXACT[dt]  # JAX converts to INEXACT first, then computes there
        fam.case(name, [x], [f64_then(out, ref, x.astype(F[out]))], id=f"{name}_{dt}",
                 **ftol(out, **tol))
    # scalar, empty, and a weak scalar that stays weak
    nog = dict(nograd=1) if name == "acosh" else {}  # 0.5 is outside acosh's domain (NaN)
    fam.case(name, [arr(0.5, "f32")], [f64_then("f32", ref, arr(0.5, "f32"))],
             id=f"{name}_scalar", **ftol("f32", **tol), **nog)
    fam.case(name, [np.zeros((0, 3), np.float32)], [np.zeros((0, 3), np.float32)],
             id=f"{name}_empty")
    fam.case(name, [np.array(3, np.int64)], [f64_then("f64", ref, np.array(3.0))],
             id=f"{name}_weakint", weak=[0], out_weak=1, **ftol("f64", **tol))

# ---- exact unary ops, straight from JAX on the dtype ----
EXACT = {
    "neg": (jnp.negative, INTS + FLOATS),
    "abs": (jnp.abs, ALL),
    "sign": (jnp.sign, INTS + FLOATS),
    "floor": (jnp.floor, ALL),
    "ceil": (jnp.ceil, ALL),
    "round": (lambda x: x if x.dtype == jnp.bool_ else jnp.round(x), ALL),  # JAX fails on bool
    "round_away": (lambda x: lax.round(x) if jnp.issubdtype(x.dtype, jnp.floating) else x, ALL),
    "square": (jnp.square, ALL),
    "reciprocal": (jnp.reciprocal, FLOATS),
    "isfinite": (jnp.isfinite, ALL),
    "logical_not": (jnp.logical_not, ALL),
    "bitwise_not": (jnp.bitwise_not, ["bool"] + INTS),
    "population_count": (lax.population_count, INTS),
    "relu": (jax.nn.relu, ALL),
    "stop_gradient": (lax.stop_gradient, ALL),
}
ROUND_EXTRA = [0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 0.49999997, 1e10 + 0.5, 4503599627370497.0, 0.25]
for name, (fn, dts) in EXACT.items():
    # stop_gradient's derivative is zero by design, which finite differences
    # cannot confirm: its rule is checked in tests/unit/test_elementwise_ad.c
    nog = dict(nograd=1) if name == "stop_gradient" else {}
    for dt in dts:
        x = ivals(dt) if dt not in FLOATS else fvals(dt, -5, 5, extra=ROUND_EXTRA)
        with jax_mode_for(dt):
            fam.case(name, [x], [np.asarray(fn(jnp.asarray(x)))], id=f"{name}_{dt}", **nog)
    e, sc = np.zeros((2, 0), F[dts[-1]]), np.array(3).astype(F[dts[-1]])
    fam.case(name, [e], [np.asarray(fn(jnp.asarray(e)))], id=f"{name}_empty", **nog)
    fam.case(name, [sc], [np.asarray(fn(jnp.asarray(sc)))], id=f"{name}_scalar", **nog)
fam.case("neg", [np.array(2.0, np.float32)], [np.array(-2.0, np.float32)], id="neg_weak",
         weak=[0], out_weak=1)
fam.case("reciprocal", [ivals("i32")],
         [f64_then(INEXACT["i32"], lambda v: 1 / v, ivals("i32").astype(F[INEXACT["i32"]]))],
         id="reciprocal_i32", **ftol(INEXACT["i32"]))

# integer_pow: wrap for ints, lax.integer_pow's multiplication order for floats
for n in [0, 1, 2, 3, 5, 7, -1, -2, -3]:
    for dt in INTS + FLOATS:
        if n < 0 and dt not in FLOATS:
            continue
        x = ivals(dt) if dt not in FLOATS else fvals(dt, -3, 3, extra=[0.5, 2.0, 1e10])
        y = np.asarray(lax.integer_pow(jnp.asarray(x), n))
        fam.case("integer_pow", [x], [y], id=f"integer_pow_{dt}_{n}".replace("-", "m"), n=n)

# composite activations
ACT = {
    "gelu": (lambda x: jax.nn.gelu(x, approximate=True), dict(f32=1e-5, atol32=1e-6)),
    "gelu_exact": (lambda x: jax.nn.gelu(x, approximate=False),
                   dict(f32=1e-5, atol32=1e-6, f64=1e-14, atol64=1e-15)),
    "silu": (jax.nn.silu, dict(f32=1e-5, atol32=1e-7)),
    "softplus": (jax.nn.softplus, dict(f32=1e-5, atol32=1e-7)),
}
for name, (fn, tol) in ACT.items():
    for dt in FLOATS:
        x = fvals(dt, -6, 6, extra=[30.0, -30.0, 1e-3])
        if dt in ("f16", "bf16"):
            y = np.asarray(fn(jnp.asarray(x)))
            t = dict(rtol=2e-2, atol=2e-2) if dt == "bf16" else dict(rtol=4e-3, atol=4e-3)
        else:
            y = f64_then(dt, jx64(fn), x)
            t = ftol(dt, **tol)
        fam.case(name, [x], [y], id=f"{name}_{dt}", **t)
    x = ivals("i32")
    x = x[np.abs(x.astype(np.float64)) < 1e6]
    xi = x.astype(F[INEXACT["i32"]])  # computed in INEXACT[i32], as JAX
    fam.case(name, [x], [f64_then(INEXACT["i32"], jx64(fn), xi)], id=f"{name}_i32",
             **ftol(INEXACT["i32"], **tol))

# ---- binary ops ----
def bvals(dt, n=24):
    """Pairs covering edges: ints with min/max/0/-1, floats with nan/inf/-0."""
    if dt == "bool":
        a = np.array([0, 0, 1, 1] * 3, np.bool_)
        return a, np.array([0, 1, 0, 1] * 3, np.bool_)
    if dt in FLOATS:
        sp = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, 0.5, 3.0]
        a = sp + list(R.uniform(-5, 5, n - len(sp)))
        b = sp[::-1] + list(R.uniform(-5, 5, n - len(sp)))
        a, b = a + sp, b + [0.0, -0.0, np.inf, 2.0, -3.0, np.nan, 0.0, 1.5, -1.5, -np.inf, 2.0, 1.0]
        return arr(a, dt), arr(b, dt)
    info = np.iinfo(F[dt])
    a = [info.min, info.min, info.max, info.max, 0, 7, 7, 1, 2, 3, 100 % (info.max + 1), 5]
    b = [-1 if info.min < 0 else 1, 0, 0, 1, 0, 3, 2, 0, 3, 2, 9, 5]
    if info.min < 0:
        a += [-7, -7, 7, -8, -1, info.min + 1]
        b += [2, -2, -2, 3, -1, -1]
    return np.array(a, dtype=object).astype(F[dt]), np.array(b, dtype=object).astype(F[dt])


def shift_vals(dt):
    bits = np.iinfo(F[dt]).bits
    info = np.iinfo(F[dt])
    a = [1, 1, 1, 1, 1, -1 if info.min < 0 else info.max, info.min, info.max, 5, 5, 12345 % (info.max + 1), 3]
    b = [0, 1, bits - 1, bits, bits + 3, 1, 1, bits - 1, 2, 255 % (info.max + 1), 3, -1 if info.min < 0 else info.max]
    return np.array(a, dtype=object).astype(F[dt]), np.array(b, dtype=object).astype(F[dt])


NUM = INTS + FLOATS
BIN = {
    "add": (jnp.add, ALL), "sub": (jnp.subtract, NUM), "mul": (jnp.multiply, ALL),
    "div": (jnp.true_divide, NUM), "floor_divide": (jnp.floor_divide, NUM),
    "rem": (lambda a, b: lax.rem(*jnp.broadcast_arrays(*_promote(a, b))), NUM),
    "pow": (jnp.power, NUM), "maximum": (jnp.maximum, ALL), "minimum": (jnp.minimum, ALL),
    "atan2": (jnp.arctan2, FLOATS), "nextafter": (jnp.nextafter, FLOATS),
    "eq": (jnp.equal, ALL), "ne": (jnp.not_equal, ALL), "lt": (jnp.less, ALL),
    "le": (jnp.less_equal, ALL), "gt": (jnp.greater, ALL), "ge": (jnp.greater_equal, ALL),
    "logical_and": (jnp.logical_and, ALL), "logical_or": (jnp.logical_or, ALL),
    "logical_xor": (jnp.logical_xor, ALL),
    "bitwise_and": (jnp.bitwise_and, ["bool"] + INTS),
    "bitwise_or": (jnp.bitwise_or, ["bool"] + INTS),
    "bitwise_xor": (jnp.bitwise_xor, ["bool"] + INTS),
    "shift_left": (jnp.left_shift, INTS),
    "shift_right_arithmetic": (lambda a, b: lax.shift_right_arithmetic(a, b), INTS),
    "shift_right_logical": (lambda a, b: lax.shift_right_logical(a, b), INTS),
}


def _promote(a, b):
    dt = jnp.result_type(a, b)
    return jnp.asarray(a, dt), jnp.asarray(b, dt)


FLOAT_F64 = {"div", "pow", "atan2", "rem"}  # transcendental or rounding-sensitive in f32
for name, (fn, dts) in BIN.items():
    for dt in dts:
        if name.startswith("shift"):
            a, b = shift_vals(dt)
        else:
            a, b = bvals(dt)
        if name in ("div", "floor_divide") and dt in INTS:
            keep = b != 0  # integer division by zero: XLA-defined, checked below for rem
            a, b = a[keep], b[keep]
        kw = {}
        if name == "div" and dt in INTS:  # integers divide in INEXACT (f64), see the top
            y = f64_then(INEXACT[dt], lambda _: a.astype(np.float64) / b.astype(np.float64), a)
            fam.case(name, [a, b], [y], id=f"{name}_{dt}")
            continue
        if name == "pow" and dt in SINTS:  # jnp.power looks at 6 exponent bits only;
            keep = b >= 0                  # negative exponents are checked elsewhere
            a, b = a[keep], b[keep]
        if dt in ("f32", "f64") and name in ("pow", "atan2"):
            y = f64_then(dt, lambda _: np.asarray(fn(jnp.asarray(a, jnp.float64),
                                                     jnp.asarray(b, jnp.float64))), a)
            kw = ftol(dt)
        else:
            y = np.asarray(fn(jnp.asarray(a), jnp.asarray(b)))
            if dt in ("f16", "bf16") and name in FLOAT_F64:
                kw = {}
        fam.case(name, [a, b], [y], id=f"{name}_{dt}", **kw)

# integer division edge cases through lax (XLA semantics): x / 0 = -1, x % 0 = x,
# INT_MIN / -1 = INT_MIN
for dt in ["i8", "i32", "i64", "u8", "u32"]:
    info = np.iinfo(F[dt])
    a = np.array([info.min, 7, -7 if info.min < 0 else 9, 0, info.max], dtype=object).astype(F[dt])
    b = np.array([-1 if info.min < 0 else 3, 0, 0, 0, 2], dtype=object).astype(F[dt])
    fam.case("rem", [a, b], [np.asarray(lax.rem(jnp.asarray(a), jnp.asarray(b)))],
             id=f"rem_edge_{dt}")
    fam.case("floor_divide", [a, b], [np.asarray(jnp.floor_divide(jnp.asarray(a), jnp.asarray(b)))],
             id=f"floor_divide_edge_{dt}")

# promotion and broadcasting between strong dtypes
PAIRS = [("i8", "u8"), ("u64", "i64"), ("bf16", "f16"), ("i32", "f16"), ("bool", "i8"),
         ("u32", "i32"), ("f32", "f64"), ("u8", "bf16"), ("i64", "f32")]
for da, db in PAIRS:
    a = ivals(da)[:4] if da not in FLOATS else fvals(da)[:4]
    b = ivals(db)[:3] if db not in FLOATS else fvals(db)[:3]
    a2, b2 = a.reshape(4, 1), b.reshape(1, 3)
    for name in ["add", "mul", "maximum", "lt", "eq"]:
        with jax_mode_for(da, db):
            y = np.asarray(BIN[name][0](jnp.asarray(a2), jnp.asarray(b2)))
        fam.case(name, [a2, b2], [y], id=f"{name}_{da}_{db}")
for name in ["add", "sub", "div", "pow", "atan2", "maximum", "ge"]:
    a = R.uniform(0.5, 3, (2, 1, 3)).astype(np.float32)
    b = R.uniform(0.5, 3, (4, 1)).astype(np.float32)
    y = np.asarray(BIN[name][0](jnp.asarray(a), jnp.asarray(b)))
    fam.case(name, [a, b], [y], id=f"{name}_bcast", **ftol("f32"))
    fam.case(name, [np.zeros((0, 3), np.float32), np.ones((3,), np.float32)],
             [np.asarray(BIN[name][0](jnp.zeros((0, 3), jnp.float32), jnp.ones(3, jnp.float32)))],
             id=f"{name}_empty")
    fam.case(name, [np.array(2.0), np.array(3.0)],
             [np.asarray(BIN[name][0](2.0, 3.0))], id=f"{name}_scalar")

# weak scalars: the array's dtype wins within a kind, the scalar's kind wins above
WEAK = [("f32", 2.5, "f64", "add"), ("bf16", 3.0, "f64", "mul"), ("i8", 3, "i64", "add"),
        ("u8", 200, "i64", "sub"), ("i32", 2.5, "f64", "mul"), ("f16", 2, "i64", "div"),
        ("bool", 1, "i64", "add"), ("u16", 7, "i64", "shift_left"), ("i32", 3, "i64", "floor_divide"),
        ("f32", 0.5, "f64", "pow"), ("u32", 5, "i64", "lt")]
for dt, s, sdt, name in WEAK:
    a = ivals(dt)[:6] if dt not in FLOATS else fvals(dt, -3, 3)[:8]
    with jax_mode_for(dt):  # a Python scalar is weak, not an explicit 64-bit operand
        j = BIN[name][0](jnp.asarray(a), s)
        j2 = BIN[name][0](s, jnp.asarray(a))
    y, w = np.asarray(j), int(j.weak_type)
    sarr = np.array(s, dtype=F[sdt])
    fam.case(name, [a, sarr], [y], id=f"{name}_weak_{dt}", weak=[1], out_weak=w,
             **(ftol("f32") if y.dtype == np.float32 else {}))
    fam.case(name, [sarr, a], [np.asarray(j2)], id=f"{name}_weakl_{dt}", weak=[0],
             out_weak=int(j2.weak_type), **(ftol("f32") if y.dtype == np.float32 else {}))
# two weak scalars keep the dtypes they were given (jx_scalar's dtype is explicit)
fam.case("add", [np.array(2, np.int64), np.array(1.5)], [np.array(3.5)], id="add_weak_both",
         weak=[0, 1], out_weak=1)

# ---- selection ----
for dt in ALL:
    a = ivals(dt)[:5] if dt not in FLOATS else fvals(dt)[:5]
    b = ivals(dt)[5:10] if dt not in FLOATS else fvals(dt)[5:10]
    if len(b) < 5:
        b = np.concatenate([b, a])[:5]
    w = np.array([True, False, True, False, False])
    fam.case("select_n", [w, a, b], [np.asarray(lax.select_n(w, a, b))], id=f"select_n_{dt}")
    fam.case("where", [w, a, b], [np.asarray(jnp.where(w, a, b))], id=f"where_{dt}")
wi = np.array([[0, 1, 2, -1], [5, 2, 1, 0]], np.int32)
cs = [R.uniform(-1, 1, (2, 4)).astype(np.float32) for _ in range(3)]
fam.case("select_n", [wi] + cs, [np.asarray(lax.select_n(wi, *cs))], id="select_n_i32_3")
wu = np.array([[0, 1, 1, 0], [1, 0, 1, 0]], np.uint8)
fam.case("select_n", [wu] + cs[:2], [np.asarray(lax.select_n(wu, *cs[:2]))], id="select_n_u8")
fam.case("select_n", [np.array(True)] + cs[:2], [cs[1]], id="select_n_scalar_which")
fam.case("select_n", [np.zeros((0,), np.bool_), np.zeros((0,), np.float32),
                      np.zeros((0,), np.float32)], [np.zeros((0,), np.float32)], id="select_n_empty")
fam.case("select_n", [np.array(2, np.int32), cs[0]], [cs[0]], id="select_n_one_case")
# where: int and float conditions, three-way broadcasting, promotion
c = np.array([[0], [3], [-1]], np.int32)
a = np.arange(4, dtype=np.int32)
b = np.array(2.5, np.float32)
fam.case("where", [c, a, b], [np.asarray(jnp.where(c, a, b))], id="where_bcast_promote")
cf = np.array([0.0, np.nan, -0.0, 2.0])
fam.case("where", [cf, np.arange(4, dtype=np.int8), np.array(-1, np.int64)],
         [np.asarray(jnp.where(cf, np.arange(4, dtype=np.int8), -1))], id="where_weak", weak=[2])
fam.case("where", [np.zeros((0, 2), np.bool_), np.ones((2,), np.float64), np.array(0.0)],
         [np.zeros((0, 2))], id="where_empty")

# clamp (same dtype; lo/hi scalar or x's shape); clip (jnp.clip with Python bounds)
for dt in NUM + ["bool"]:
    x = ivals(dt) if dt not in FLOATS else fvals(dt, -5, 5)
    lo = np.array(-2 if dt in SINTS or dt in FLOATS else 1).astype(F[dt])
    hi = np.array(3).astype(F[dt]) if dt != "bool" else np.array(True)
    if dt == "bool":
        lo = np.array(False)
    fam.case("clamp", [lo, x, hi], [np.asarray(lax.clamp(lo, x, hi))], id=f"clamp_{dt}")
    if dt != "bool":
        fam.case("clip", [x], [np.asarray(jnp.clip(x, -2 if dt not in UINTS else 1, 3))],
                 id=f"clip_{dt}", lo=-2 if dt not in UINTS else 1, hi=3)
xf = fvals("f32", -5, 5)
lo_arr = R.uniform(-3, 0, xf.shape).astype(np.float32)
hi_arr = np.full(xf.shape, np.nan, np.float32)
hi_arr[::2] = 1.0
fam.case("clamp", [lo_arr, xf, hi_arr], [np.asarray(lax.clamp(lo_arr, xf, hi_arr))],
         id="clamp_arrays")
fam.case("clamp", [np.array(2.0, np.float32), xf, np.array(1.0, np.float32)],
         [np.asarray(lax.clamp(np.float32(2), xf, np.float32(1)))], id="clamp_lo_gt_hi")
fam.case("clamp", [np.array(0.0, np.float32), arr([-0.0, 0.0, -1.0], "f32"), np.array(-0.0, np.float32)],
         [np.asarray(lax.clamp(np.float32(0), arr([-0.0, 0.0, -1.0], "f32"), np.float32(-0.0)))],
         id="clamp_signed_zero", nograd=1)  # every point sits on a kink (x, lo, hi tie)
xi = ivals("i32")
with jax_mode_for("i32"):
    fam.case("clip", [xi], [np.asarray(jnp.clip(xi, 0.5, 10.5))], id="clip_i32_float_bounds",
             lo=0.5, hi=10.5)
fam.case("clip", [xi], [np.asarray(jnp.clip(xi, None, 5))], id="clip_i32_no_lo", hi=5)
fam.case("clip", [xf], [np.asarray(jnp.clip(xf, -1.5, None))], id="clip_f32_no_hi", lo=-1.5)
fam.case("clip", [xf], [np.asarray(jnp.clip(xf, 2.0, 1.0))], id="clip_lo_gt_hi", lo=2.0, hi=1.0)
xb = arr([1.0, 2.0, 3.0], "bf16")
fam.case("clip", [xb], [np.asarray(jnp.clip(xb, 1.3, 2.7))], id="clip_bf16_round", lo=1.3, hi=2.7)
xu = np.array([1, 200, 255], np.uint8)
fam.case("clip", [xu], [np.array([1, 200, 255], np.uint8)], id="clip_u8_wide_bound",
         lo=0, hi=300)  # saturated bound (JAX wraps 300 to 44)

# ---- conversions ----
FSRC = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.9, -2.9, 127.5,
        255.5, 256.0, -129.0, 1e10, -1e10, 65504.0, 65520.0, 3.0e38, 1e-8,
        1.00390625, 1.01171875, 1.00048828125, 1.00146484375, 2.0**24 + 1, 2.0**31,
        -2.0**31, 2.0**63, 2.0**64, 6.1e-5, 5.9e-8, -3.0e-8, 1e300]
for src in ALL:
    if src in FLOATS:
        x = arr(FSRC, src)
    elif src == "bool":
        x = ivals("bool")
    else:
        info = np.iinfo(F[src])
        v = [info.min, info.max, 0, 1, min(255, info.max), 256 % (info.max + 1), info.max // 3]
        if info.bits == 64:
            v += [2**53 + 1, 2**24 + 1, 2**62 + 2**40 + 1, (2**63 - 1) if info.min < 0 else 2**64 - 1]
        if info.min < 0:
            v += [-1, max(-129, info.min), -2**15 if info.bits > 8 else -100,
                  -(2**24 + 1) if info.bits >= 32 else -3]
        x = np.array(v, dtype=object).astype(F[src])
    for dst in ALL:
        y = np.asarray(jnp.asarray(x).astype(F[dst]))
        fam.case("astype", [x], [y], id=f"astype_{src}_{dst}", dtype=dst, out_weak=0)
fam.case("astype", [np.array(2.5, np.float32)], [np.array(2, np.int32)], id="astype_weak",
         dtype="i32", weak=[0], out_weak=0)
fam.case("astype", [np.zeros((0, 2), np.float64)], [np.zeros((0, 2), np.int8)], id="astype_empty",
         dtype="i8")

BITCAST = [("f32", "i32"), ("f32", "u16"), ("f64", "u8"), ("bf16", "i16"), ("f16", "u16"),
           ("i64", "f64"), ("u8", "i8"), ("i32", "f16"), ("u16", "bf16"), ("bool", "bool")]
for src, dst in BITCAST:
    if src in FLOATS:
        x = fvals(src, -3, 3, n=3).reshape(2, 4)
    elif src == "bool":
        x = np.array([True, False] * 4).reshape(2, 4)
    else:
        x = R.integers(0, 100, (2, 4)).astype(F[src])
    y = np.asarray(lax.bitcast_convert_type(jnp.asarray(x), F[dst]))
    fam.case("bitcast_convert_type", [x], [y], id=f"bitcast_{src}_{dst}", dtype=dst)
    back = np.ascontiguousarray(y)
    fam.case("bitcast_convert_type", [back], [x], id=f"bitcast_{dst}_{src}_back", dtype=src)
fam.case("bitcast_convert_type", [np.array(1.0, np.float32)],
         [np.asarray(lax.bitcast_convert_type(jnp.float32(1.0), jnp.uint8))], id="bitcast_scalar",
         dtype="u8")

# ---- finite f64 cases in each function's smooth domain, for --mode=grad ----
# (the cases above mostly hold NaN/inf or sit on kinks, which the grad mode
# skips); values stay away from the domain ends, poles and kinks, so that
# central differences of order 1 and 2 are accurate.
GRAD_DOMAIN = {
    "exp": (-3, 3), "exp2": (-3, 3), "expm1": (-3, 3), "log": (0.5, 5), "log1p": (-0.5, 5),
    "sqrt": (0.5, 5), "rsqrt": (0.5, 5), "cbrt": (0.5, 5), "tanh": (-3, 3),
    "logistic": (-5, 5), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1, 1), "asin": (-0.8, 0.8),
    "acos": (-0.8, 0.8), "atan": (-5, 5), "sinh": (-3, 3), "cosh": (-3, 3), "asinh": (-5, 5),
    "acosh": (1.5, 5), "atanh": (-0.8, 0.8), "erf": (-2, 2), "erf_inv": (-0.8, 0.8),
    "lgamma": (0.5, 5), "digamma": (0.5, 5),
}
G = np.random.default_rng(7)


def gvals(lo, hi, shape=(2, 3), sign=False):
    v = G.uniform(lo, hi, shape)
    return v * G.choice([-1.0, 1.0], shape) if sign else v


for name, (lo, hi) in GRAD_DOMAIN.items():
    x = gvals(lo, hi, sign=name == "cbrt")
    if name in ("lgamma", "digamma"):  # negative non-integers too (reflection)
        x[0, 0], x[1, 0] = -2.5, -0.7
    fam.case(name, [x], [f64_then("f64", TRANS[name][0], x)], id=f"{name}_grad",
             **ftol("f64", **TRANS[name][4]))
for name in ["neg", "abs", "square", "reciprocal", "relu"]:
    x = gvals(0.3, 3, sign=True)  # away from abs's and relu's kink at 0
    fam.case(name, [x], [np.asarray(EXACT[name][0](jnp.asarray(x)))], id=f"{name}_grad")
for n in [2, 3, -2, 1, 0]:
    x = gvals(0.3, 3, sign=True)
    fam.case("integer_pow", [x], [np.asarray(lax.integer_pow(jnp.asarray(x), n))],
             id=f"integer_pow_grad_{n}".replace("-", "m"), n=n)
for name, (fn, tol) in ACT.items():
    x = gvals(-4, 4, shape=(3, 3))
    fam.case(name, [x], [jx64(fn)(x)], id=f"{name}_grad", **ftol("f64", **tol))
for name in ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2"]:
    a, b = gvals(0.5, 3), gvals(0.5, 3)
    if name not in ("pow", "div"):
        a, b = a * G.choice([-1.0, 1.0], a.shape), b * G.choice([-1.0, 1.0], b.shape)
    y = np.asarray(BIN[name][0](jnp.asarray(a), jnp.asarray(b)))
    fam.case(name, [a, b], [y], id=f"{name}_grad", **ftol("f64"))
w = np.array([[True, False, True], [False, False, True]])
a, b = gvals(-2, 2), gvals(-2, 2)
fam.case("select_n", [w, a, b], [np.asarray(lax.select_n(w, a, b))], id="select_n_grad")
fam.case("select_n", [np.array(False), a, b], [a], id="select_n_grad_scalar_which")
fam.case("where", [w, a, np.array(1.5)], [np.asarray(jnp.where(w, a, 1.5))], id="where_grad")
x = np.array([[-3.0, -1.5, 0.2], [0.7, 1.9, 4.0]])
fam.case("clamp", [np.array(-1.0), x, np.array(2.0)],
         [np.asarray(lax.clamp(-1.0, x, 2.0))], id="clamp_grad_scalar_bounds")
lo_a, hi_a = np.full((2, 3), -1.0), np.full((2, 3), 2.0)
lo_a[0, 1], hi_a[1, 2] = -2.0, 5.0  # (JAX's rule gives hi no tangent where lo > hi)
fam.case("clamp", [lo_a, x, hi_a], [np.asarray(lax.clamp(lo_a, x, hi_a))],
         id="clamp_grad_arrays")

fam.write()
