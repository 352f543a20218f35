"""Goldens for reductions, cumulative ops, sorting and windows (family 'reduce').

Expected values come from JAX in 64-bit mode, except integer sums, products and
bool cumsums, which come from the mode jx runs them in (jax_mode_for: JAX's
default mode for operands of up to 32 bits). Float sums are compared with an
f64 reference (the sum of the exactly widened inputs, rounded once), with a
tolerance stated per case from the sum of magnitudes; JAX's own f32 result is
checked against the same tolerance here, so the golden agrees with JAX.
flax is not installed: max_pool/avg_pool goldens transcribe flax.linen.pool
(lax.reduce_window over the spatial dims; avg divides by the window size).

Run from the repository root:  python3 tests/golden/gen_reduce.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Family, rng, sample, BY_NAME, bfloat16, jax_mode_for  # noqa: E402

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

F = Family("reduce")
R = rng(7)
ALL = ["bool", "i8", "u8", "i32", "i64", "u32", "f16", "bf16", "f32", "f64"]
NUM = [d for d in ALL if d != "bool"]
FLOATS = ["f16", "bf16", "f32", "f64"]
EPS = {"f16": 2.0**-10, "bf16": 2.0**-7, "f32": 2.0**-23, "f64": 2.0**-52}


def dt(name):
    return BY_NAME[name]


def npa(x):
    return np.asarray(x)


def isfloat(name):
    return name in FLOATS


def axis_arg(axes):
    return None if axes is None else tuple(axes)


def axes_kv(axes):
    return {} if axes is None else {"axes": list(axes)}


def special(x):
    """Sprinkles NaN, inf and -inf into a float array (in place, flat)."""
    f = x.reshape(-1)
    if f.size >= 6:
        f[1] = np.inf
        f[4] = -np.inf
        f[f.size - 2] = np.nan
    return x


def sum_tol(name, x, axes, acc_eps=None):
    """Tolerance for a float sum: rounding of the result plus accumulation error."""
    a = np.abs(x.astype(np.float64))
    mag = float(np.max(np.sum(a, axis=axis_arg(axes)), initial=0.0)) if a.size else 0.0
    acc = acc_eps if acc_eps is not None else (EPS["f64"] if name == "f64" else EPS["f32"])
    return {"rtol": 2 * EPS[name], "atol": 8 * acc * mag + 1e-300}


# ---------------------------------------------------------------- ties
# Cases whose inputs tie where the op chooses among equal values (max/min,
# sort, top_k, max pooling) sit at points where the op is not differentiable:
# central differences there average the tied elements' directions (order 1)
# or jump (order 2), while any valid subgradient picks one convention. Such
# cases are marked nograd=1; gen_smooth below adds tie-free cases instead.
def has_ties(x, axis):
    """1 if some line of x along axis holds two equal values."""
    y = np.moveaxis(np.asarray(x, np.float64), axis, -1).reshape(-1, x.shape[axis])
    return any(len(np.unique(row)) < len(row) for row in y)


def tie_kv(x, axis):
    return {"nograd": 1} if isfloat(res_name_any(x)) and has_ties(x, axis) else {}


def res_name_any(x):
    return {np.dtype(np.float16): "f16", np.dtype(bfloat16): "bf16", np.dtype(np.float32): "f32",
            np.dtype(np.float64): "f64"}.get(np.dtype(x.dtype), "int")


def window_ties(x, dims, strides, pads):
    """1 if some window of lax.reduce_window (max) holds its maximum twice."""
    xp = np.pad(np.asarray(x, np.float64), pads, constant_values=-np.inf)
    out = [(xp.shape[d] - dims[d]) // strides[d] + 1 for d in range(x.ndim)]
    for o in np.ndindex(*out):
        win = xp[tuple(slice(o[d] * strides[d], o[d] * strides[d] + dims[d])
                       for d in range(x.ndim))]
        if np.sum(win == win.max()) > 1 and np.isfinite(win.max()):
            return 1
    return 0


def pool_tie_kv(x, window, strides, padding):
    """tie_kv for flax_pool(x, ..., window, strides, padding) with max."""
    strides = strides or (1,) * len(window)
    nb = x.ndim - (len(window) + 1)
    dims = (1,) * nb + tuple(window) + (1,)
    st = (1,) * nb + tuple(strides) + (1,)
    pads = lax.padtype_to_pads(x.shape, dims, st, padding)
    return {"nograd": 1} if window_ties(x, dims, st, pads) else {}


# ---------------------------------------------------------------- reductions
SHAPE = (3, 4, 5)
AXES = [None, [1], [0, -1], [-3, 2], []]


def gen_sum_prod():
    for name in ALL:
        for axes in AXES:
            for keep in (0, 1):
                if axes == [] and keep:
                    continue
                lo, hi = (-3, 3) if isfloat(name) else (-3, 3)
                x = sample(SHAPE, name, R, lo, hi)
                for op, f in (("sum", jnp.sum), ("prod", jnp.prod)):
                    with jax_mode_for(name):  # the accumulator's dtype depends on the mode
                        want = npa(f(x, axis=axis_arg(axes) if axes != [] else None,
                                     keepdims=bool(keep)))
                    kv = dict(axes_kv(axes), keepdims=keep)
                    if isfloat(name):
                        ref = f(x.astype(np.float64), axis=axis_arg(axes) if axes != [] else None,
                                keepdims=bool(keep))
                        got_jax = want.astype(np.float64)
                        if op == "sum":
                            want = npa(ref).astype(dt(name))
                            tol = sum_tol(name, x, axes if axes != [] else None)
                            assert np.allclose(got_jax, np.asarray(ref), rtol=tol["rtol"],
                                               atol=tol["atol"] + 2 * EPS[name] * np.abs(ref).max())
                            kv.update(tol)
                        else:
                            kv.update(rtol=8 * EPS[name] + 64 * EPS["f32"], atol=0)
                            # second differences of a product of many small factors are
                            # below the central-difference check's resolution
                            reduced = np.prod([SHAPE[a] for a in (
                                axes if axes not in (None, []) else range(len(SHAPE)))])
                            if reduced >= 24:
                                kv.update(nograd2=1)
                    F.case(op, [x], [want], id=f"{op}_{name}_{len(F.cases)}", **kv)
    # a long f32 sum (pairwise accumulation) against f64
    for name in ("f32", "f16", "bf16"):
        x = sample((4, 1000), name, R, -1, 3)
        ref = np.sum(x.astype(np.float64), axis=1)
        F.case("sum", [x], [ref.astype(dt(name))], id=f"sum_long_{name}", axes=[1],
               **sum_tol(name, x, [1]))
    # empty arrays and scalars give the identity
    for name in ("f32", "i32", "bool", "u8"):
        x = np.zeros((0, 3), dt(name))
        with jax_mode_for(name):
            for op, f in (("sum", jnp.sum), ("prod", jnp.prod)):
                F.case(op, [x], [npa(f(x, axis=0))], id=f"{op}_empty_{name}", axes=[0])
                F.case(op, [x], [npa(f(x))], id=f"{op}_empty_all_{name}")
            s = np.array(5, dt(name)) if name != "bool" else np.array(True)
            F.case("sum", [s], [npa(jnp.sum(s))], id=f"sum_scalar_{name}")
    # integer wrap: i64 and u64 sums and products overflow as XLA wraps
    big = np.array([2**62, 2**62, 2**62, 3], np.int64)
    F.case("sum", [big], [npa(jnp.sum(big))], id="sum_wrap_i64")
    ubig = np.array([2**63, 2**63, 7], np.uint64)
    F.case("sum", [ubig], [npa(jnp.sum(ubig))], id="sum_wrap_u64")
    i32 = np.array([2**31 - 1, 2**31 - 1, 5], np.int32)  # sums in i32 and wraps
    with jax_mode_for("i32"):
        F.case("sum", [i32], [npa(jnp.sum(i32))], id="sum_i32_wraps")
    p = np.array([3**20, 3**20, 3**5], np.int64)
    F.case("prod", [p], [npa(jnp.prod(p))], id="prod_wrap_i64")
    x = special(sample((6, 4), "f32", R))
    F.case("sum", [x], [npa(jnp.sum(x, axis=0))], id="sum_nan_inf_f32", axes=[0])


def gen_max_min():
    for name in ALL:
        for axes in AXES[:4]:
            for keep in (0, 1):
                x = sample(SHAPE, name, R)
                if isfloat(name):
                    special(x)
                for op, f in (("max", jnp.max), ("min", jnp.min)):
                    F.case(op, [x], [npa(f(x, axis=axis_arg(axes), keepdims=bool(keep)))],
                           id=f"{op}_{name}_{len(F.cases)}", keepdims=keep, **axes_kv(axes))
    # extremes of integer ranges and size-1 dims
    for name in ("i8", "u8", "u32", "i64"):
        info = np.iinfo(dt(name))
        x = np.array([[info.min, info.max, 0]], dt(name))
        for op, f in (("max", jnp.max), ("min", jnp.min)):
            F.case(op, [x], [npa(f(x, axis=-1))], id=f"{op}_range_{name}", axes=[-1])
            F.case(op, [x], [npa(f(x, axis=0))], id=f"{op}_size1_{name}", axes=[0])
    # an empty non-reduced axis is fine
    x = np.zeros((0, 4), np.float32)
    F.case("max", [x], [npa(jnp.max(x, axis=1))], id="max_empty_kept", axes=[1])


def gen_all_any():
    for name in ALL:
        for axes in (None, [0], [-1], [0, 2]):
            x = sample(SHAPE, name, R)
            x.reshape(-1)[::3] = 0
            if isfloat(name):
                x.reshape(-1)[2] = np.nan
            x.reshape(-1)[5:10] = 0 if name != "bool" else False
            for op, f in (("all", jnp.all), ("any", jnp.any)):
                for keep in (0, 1):
                    F.case(op, [x], [npa(f(x, axis=axis_arg(axes), keepdims=bool(keep)))],
                           id=f"{op}_{name}_{len(F.cases)}", keepdims=keep, **axes_kv(axes))
    x = np.zeros((2, 0), np.float32)
    for op, f in (("all", jnp.all), ("any", jnp.any)):
        F.case(op, [x], [npa(f(x, axis=1))], id=f"{op}_empty", axes=[1])
        F.case(op, [x], [npa(f(x))], id=f"{op}_empty_all")


def stat_tol(res, x, axes):
    """Tolerance for mean/var/std/logsumexp: result rounding plus f32 accumulation."""
    if res == "f64":
        return {"rtol": 1e-13, "atol": 1e-13}
    acc = EPS["f32"]
    return {"rtol": 4 * EPS[res] + 64 * acc, "atol": 64 * acc}


def gen_stats():
    for name in ALL:
        for axes in (None, [1], [0, -1]):
            for keep in (0, 1):
                x = sample(SHAPE, name, R)
                for op, f in (("mean", jnp.mean), ("var", jnp.var), ("std", jnp.std)):
                    want = npa(f(x, axis=axis_arg(axes), keepdims=bool(keep)))
                    F.case(op, [x], [want], id=f"{op}_{name}_{len(F.cases)}", keepdims=keep,
                           **axes_kv(axes), **stat_tol(res_name(want), x, axes))
    # a constant-offset variance (two-pass stability)
    x = (1000.0 + sample((64,), "f32", R)).astype(np.float32)
    F.case("var", [x], [npa(jnp.var(x))], id="var_offset_f32", rtol=1e-4, atol=1e-4)
    x = np.zeros((0, 3), np.float32)
    for op, f in (("mean", jnp.mean), ("var", jnp.var)):
        F.case(op, [x], [npa(f(x, axis=0))], id=f"{op}_empty", axes=[0])


def res_name(a):
    return {np.dtype(np.float16): "f16", np.dtype(bfloat16): "bf16", np.dtype(np.float32): "f32",
            np.dtype(np.float64): "f64"}[np.dtype(a.dtype)]


def gen_logsumexp_softmax():
    lse = jax.nn.logsumexp if hasattr(jax.nn, "logsumexp") else jax.scipy.special.logsumexp
    for name in FLOATS + ["i32", "i8", "i64", "bool"]:
        for axes in (None, [1], [0, -1]):
            x = sample((3, 4, 5), name, R)
            for keep in (0, 1):
                want = npa(lse(x, axis=axis_arg(axes), keepdims=bool(keep)))
                F.case("logsumexp", [x], [want], id=f"logsumexp_{name}_{len(F.cases)}",
                       keepdims=keep, **axes_kv(axes), **stat_tol(res_name(want), x, axes))
    x = np.array([[-np.inf, -np.inf, -np.inf], [1.0, -np.inf, 2.0], [np.inf, 0.0, 1.0],
                  [np.nan, 0.0, 1.0], [1000.0, 1000.0, -1000.0]], np.float32)
    F.case("logsumexp", [x], [npa(lse(x, axis=1))], id="logsumexp_special", axes=[1])
    e = np.zeros((2, 0), np.float64)
    F.case("logsumexp", [e], [npa(lse(e, axis=1))], id="logsumexp_empty", axes=[1])
    for name in FLOATS + ["i32", "i64"]:
        for axis in (-1, 0, 1):
            x = sample((3, 4, 5), name, R)
            for op, f in (("softmax", jax.nn.softmax), ("log_softmax", jax.nn.log_softmax)):
                want = npa(f(x, axis=axis))
                # x - max and the log of the sum are each rounded to the result dtype
                # (XLA may keep them wider), so the error scales with |x|
                tol = stat_tol(res_name(want), x, None)
                tol["atol"] += 4 * EPS[res_name(want)] * float(np.max(np.abs(x.astype(np.float64))))
                F.case(op, [x], [want], id=f"{op}_{name}_{len(F.cases)}", axis=axis, **tol)
    x = np.array([[-np.inf, 0.0, 1.0], [1000.0, 999.0, -1000.0], [-np.inf, -np.inf, 3.0]],
                 np.float32)
    for op, f in (("softmax", jax.nn.softmax), ("log_softmax", jax.nn.log_softmax)):
        F.case(op, [x], [npa(f(x, axis=-1))], id=f"{op}_special", axis=-1, rtol=1e-6, atol=1e-6)


def gen_arg():
    for name in ALL:
        for axis in (0, 1, -1):
            x = sample((4, 6), name, R)
            if name not in ("bool",):
                x.reshape(-1)[::5] = x.reshape(-1)[0]  # ties
            for op, f in (("argmax", jnp.argmax), ("argmin", jnp.argmin)):
                F.case(op, [x], [npa(f(x, axis=axis)).astype(np.int32)],
                       id=f"{op}_{name}_{len(F.cases)}", axis=axis)
    x = np.array([[1.0, np.nan, 3.0, np.nan], [np.inf, 2.0, np.inf, -np.inf],
                  [-0.0, 0.0, -np.inf, -np.inf], [-np.nan, 1.0, np.nan, 5.0]], np.float64)
    for name in FLOATS:
        y = x.astype(dt(name))
        for op, f in (("argmax", jnp.argmax), ("argmin", jnp.argmin)):
            for axis in (0, 1):
                F.case(op, [y], [npa(f(y, axis=axis)).astype(np.int32)],
                       id=f"{op}_nan_{name}_{axis}", axis=axis)
    s = np.array([3.0], np.float32)
    F.case("argmax", [s], [np.array(0, np.int32)], id="argmax_size1", axis=0)


# ---------------------------------------------------------------- cumulative
def gen_cumulative():
    fns = {"sum": lax.cumsum, "prod": lax.cumprod, "max": lax.cummax, "min": lax.cummin}
    for name in ALL:
        for axis in (0, 1, -1):
            x = sample((3, 4, 5), name, R, -2, 2)
            if isfloat(name) and axis == 1:
                special(x)
            for op in ("sum", "prod"):
                f = jnp.cumsum if op == "sum" else jnp.cumprod
                with jax_mode_for(name):  # bool accumulates in the mode's int
                    want = npa(f(x, axis=axis))
                kv = {}
                if isfloat(name):
                    kv = {"rtol": 4 * EPS[name] + 1e-14, "atol": 4 * EPS[name] * 16}
                F.case(f"cum{op}", [x], [want], id=f"cum{op}_{name}_{len(F.cases)}", axis=axis,
                       **kv)
            if name == "bool":
                continue
            ties = tie_kv(x, axis)
            for op in ("max", "min"):
                F.case(f"cum{op}", [x], [npa(fns[op](x, axis=axis % 3))],
                       id=f"cum{op}_{name}_{len(F.cases)}", axis=axis, **ties)
            for op in ("sum", "prod", "max", "min"):
                want = npa(fns[op](x, axis=axis % 3, reverse=True))
                kv = {"rtol": 4 * EPS[name] + 1e-14, "atol": 4 * EPS[name] * 16} if isfloat(name) else {}
                if op in ("max", "min"):
                    kv.update(ties)
                F.case("cumulative", [x], [want], id=f"cumrev_{op}_{name}_{len(F.cases)}",
                       how=op, axis=axis, reverse=1, **kv)
                if name in ("i32", "f32"):
                    F.case("cumulative", [x], [npa(fns[op](x, axis=axis % 3))],
                           id=f"cumfwd_{op}_{name}_{len(F.cases)}", how=op, axis=axis, reverse=0,
                           **kv)
    # i8 cumsum keeps i8 and wraps
    x = np.array([100, 100, 100, -128, -128], np.int8)
    F.case("cumsum", [x], [npa(jnp.cumsum(x))], id="cumsum_wrap_i8", axis=0)
    x = np.zeros((0, 3), np.float32)
    F.case("cumsum", [x], [npa(jnp.cumsum(x, axis=0))], id="cumsum_empty", axis=0)


# ---------------------------------------------------------------- sorting
def float_specials(name, n):
    base = np.array([1.0, np.nan, 3.0, -np.nan, 3.0, -np.inf, -0.0, 0.0, np.inf, -0.0, 1.0,
                     np.nan], np.float64)
    return np.resize(base, n).astype(dt(name))


def gen_sort():
    for name in ALL:
        for axis in (0, -1):
            x = sample((5, 6), name, R, -3, 3)
            if isfloat(name):
                x = np.round(x).astype(dt(name))  # ties
                x.reshape(-1)[:12] = float_specials(name, 12)
            F.case("sort", [x], [npa(jnp.sort(x, axis=axis))], id=f"sort_{name}_{len(F.cases)}",
                   axis=axis)
            F.case("argsort", [x], [npa(jnp.argsort(x, axis=axis, stable=True)).astype(np.int32)],
                   id=f"argsort_{name}_{len(F.cases)}", axis=axis)
    x = np.zeros((0, 4), np.float32)
    F.case("sort", [x], [x], id="sort_empty", axis=-1)
    F.case("argsort", [x], [x.astype(np.int32)], id="argsort_empty", axis=-1)
    # lax.sort with several operands and keys
    for name in ("i32", "f32", "bf16", "u8"):
        k1 = np.round(sample((4, 7), name, R, -2, 2)).astype(dt(name))
        k2 = sample((4, 7), "i8", R) % 3
        v = sample((4, 7), "f64", R)
        for nk in (1, 2):
            for dim in (0, 1):
                outs = lax.sort((k1, k2, v), dimension=dim, num_keys=nk, is_stable=True)
                F.case("sort_multi", [k1, k2, v], [npa(o) for o in outs],
                       id=f"sort_multi_{name}_{nk}_{dim}", axis=dim if dim == 0 else -1,
                       num_keys=nk, **(tie_kv(k1, dim) if isfloat(name) else {}))
    # top_k: total order on floats, lower index first among equals
    for name in ALL:
        x = sample((3, 8), name, R, -3, 3)
        if isfloat(name):
            x = np.round(x).astype(dt(name))
            x[0] = float_specials(name, 12)[:8]
        for k in (0, 1, 3, 8):
            vals, idx = lax.top_k(x, k)
            F.case("top_k", [x], [npa(vals), npa(idx).astype(np.int32)],
                   id=f"top_k_{name}_{k}", k=k)
    x = sample((2, 3, 5), "f32", R)
    vals, idx = lax.top_k(x, 2)
    F.case("top_k", [x], [npa(vals), npa(idx)], id="top_k_rank3", k=2)
    x = np.array([0.0, -0.0, 0.0, -0.0], np.float32)
    vals, idx = lax.top_k(x, 4)
    F.case("top_k", [x], [npa(vals), npa(idx)], id="top_k_zeros", k=4, **tie_kv(x, 0))


# ---------------------------------------------------------------- windows
def pads_same(shape, window, strides):
    out = []
    for n, w, s in zip(shape, window, strides):
        o = -(-n // s)
        p = max((o - 1) * s + w - n, 0)
        out.append((p // 2, p - p // 2))
    return out


def flax_pool(x, init, fn, window, strides, padding):
    """flax.linen.pooling.pool (count_include_pad=True for avg)."""
    strides = strides or (1,) * len(window)
    nb = x.ndim - (len(window) + 1)
    dims = (1,) * nb + tuple(window) + (1,)
    st = (1,) * nb + tuple(strides) + (1,)
    single = nb == 0
    if single:
        x = x[None]
        dims, st = (1,) + dims, (1,) + st
    y = lax.reduce_window(x, init, fn, dims, st, padding)
    return y[0] if single else y


def gen_windows():
    ops = {"sum": (lax.add, 0), "max": (lax.max, -np.inf), "min": (lax.min, np.inf)}
    cfgs = [((2, 2), None, None, None), ((3, 2), (2, 1), None, None),
            ((2, 3), (1, 2), (1, 0), (2, 1)), ((1, 1), (3, 3), (0, 0), (0, 0)),
            ((4, 4), (1, 1), (0, 1), (1, 0))]
    for name in ALL:
        x = sample((5, 6), name, R, -3, 3)
        if isfloat(name):
            x[2, 3] = np.nan
            x[0, 0] = np.inf
        for op in ("sum", "max", "min"):
            if op == "sum" and name == "bool":
                continue
            fn, init = ops[op]
            for i, (w, s, lo, hi) in enumerate(cfgs):
                pad = [(a, b) for a, b in zip(lo or (0, 0), hi or (0, 0))]
                if name == "bool":
                    init_v = np.array(op == "min", np.bool_)
                elif isfloat(name):
                    init_v = np.array(init, dt(name))
                else:
                    info = np.iinfo(dt(name))
                    init_v = np.array({"sum": 0, "max": info.min, "min": info.max}[op], dt(name))
                xin = x.astype(np.float64) if (isfloat(name) and op == "sum") else x
                iv = init_v.astype(np.float64) if (isfloat(name) and op == "sum") else init_v
                want = npa(lax.reduce_window(xin, iv, fn, w, s or (1, 1), pad)).astype(dt(name))
                kv = {}
                if s:
                    kv["strides"] = list(s)
                if lo:
                    kv["pad_lo"], kv["pad_hi"] = list(lo), list(hi)
                if isfloat(name) and op == "sum":
                    kv.update(rtol=2 * EPS[name], atol=64 * EPS[name])
                F.case("reduce_window", [x], [want], id=f"rw_{op}_{name}_{i}", how=op,
                       window=list(w), **kv)
    x = sample((6,), "i32", R)
    F.case("reduce_window", [x], [npa(lax.reduce_window(x, 0, lax.add, (7,), (1,), "VALID"))],
           id="rw_too_big", how="sum", window=[7])
    # pools: NHWC (batch..., H, W, C), VALID / SAME, strides
    for name in ("f32", "f16", "bf16", "f64", "i32"):
        for shape, w, s in (((2, 5, 6, 3), (2, 2), (2, 2)), ((2, 5, 6, 3), (3, 3), None),
                            ((5, 6, 2), (2, 3), (1, 2)), ((2, 2, 4, 5, 1), (3, 2), (2, 1))):
            x = sample(shape, name, R, -3, 3)
            for padding in ("VALID", "SAME"):
                kv = {"window": list(w), "padding": padding}
                if s:
                    kv["strides"] = list(s)
                if name != "i32":
                    mp = flax_pool(x, -np.inf, lax.max, w, s, padding)
                    F.case("max_pool", [x], [npa(mp)], id=f"max_pool_{name}_{len(F.cases)}",
                           **kv, **pool_tie_kv(x, w, s, padding))
                ap = flax_pool(x, np.array(0, x.dtype), lax.add, w, s, padding) / np.prod(w)
                akv = dict(kv)
                if name in FLOATS:
                    akv.update(rtol=4 * EPS[name], atol=16 * EPS[name])
                F.case("avg_pool", [x], [npa(ap)], id=f"avg_pool_{name}_{len(F.cases)}", **akv)


# ---------------------------------------------------------------- smooth cases
# Finite, tie-free inputs, so that --mode=grad checks the derivative rules of
# the choosing ops (the cases above mostly hold NaN/inf or ties), plus
# products through zeros. A separate generator keeps the draws above as they
# were.
R2 = rng(8)


def distinct(shape, name, lo=-3.0, hi=3.0):
    """Values spread over [lo, hi] in random order, no two equal in dtype name."""
    n = int(np.prod(shape))
    v = np.linspace(lo, hi, n) + R2.uniform(-0.2, 0.2, n) * (hi - lo) / max(n, 1)
    x = R2.permutation(v).reshape(shape).astype(dt(name))
    assert len(np.unique(x.astype(np.float64))) == n
    return x


def gen_smooth():
    for name in ("f32", "f64", "bf16"):
        n = 40 if name == "bf16" else 60  # bf16 holds few distinct values in [-3, 3]
        shape = (2, 4, 5) if name == "bf16" else SHAPE
        for axes in (None, [1], [0, -1]):
            for keep in (0, 1):
                x = distinct(shape, name)
                for op, f in (("max", jnp.max), ("min", jnp.min)):
                    F.case(op, [x], [npa(f(x, axis=axis_arg(axes), keepdims=bool(keep)))],
                           id=f"smooth_{op}_{name}_{len(F.cases)}", keepdims=keep,
                           **axes_kv(axes))
        del n
    # products through zeros: one zero, two zeros, and a zero-free line
    x = distinct((3, 5), "f64", -2, 2)
    x[0, 2] = 0
    x[1, 1] = x[1, 3] = 0
    for axes in ([1], [0], None):
        F.case("prod", [x], [npa(jnp.prod(x, axis=axis_arg(axes)))],
               id=f"smooth_prod_zeros_{len(F.cases)}", **axes_kv(axes))
    F.case("cumprod", [x], [npa(jnp.cumprod(x, axis=1))], id="smooth_cumprod_zeros", axis=1)
    for name in ("f32", "f64"):
        for axis in (0, -1):
            x = distinct((3, 7), name)
            for op in ("max", "min", "prod"):
                for rev in (0, 1):
                    fn = {"max": lax.cummax, "min": lax.cummin, "prod": lax.cumprod}[op]
                    kv = {"rtol": 1e-5, "atol": 1e-5} if op == "prod" else {}
                    F.case("cumulative", [x], [npa(fn(x, axis=axis % 2, reverse=bool(rev)))],
                           id=f"smooth_cum{op}_{name}_{len(F.cases)}", how=op, axis=axis,
                           reverse=rev, **kv)
            F.case("sort", [x], [npa(jnp.sort(x, axis=axis))], id=f"smooth_sort_{name}_{axis}",
                   axis=axis)
    for dim in (0, 1):
        k1 = distinct((4, 7), "f32")
        k2 = (sample((4, 7), "i8", R2) % 3).astype(np.int8)
        v = distinct((4, 7), "f64")
        for nk in (1, 2):
            outs = lax.sort((k1, k2, v), dimension=dim, num_keys=nk, is_stable=True)
            F.case("sort_multi", [k1, k2, v], [npa(o) for o in outs],
                   id=f"smooth_sort_multi_{nk}_{dim}", axis=dim if dim == 0 else -1, num_keys=nk)
    for name in ("f32", "f64"):
        x = distinct((3, 8), name)
        for k in (1, 3, 8):
            vals, idx = lax.top_k(x, k)
            F.case("top_k", [x], [npa(vals), npa(idx).astype(np.int32)],
                   id=f"smooth_top_k_{name}_{k}", k=k)
    x = distinct((2, 3, 5), "f64")
    vals, idx = lax.top_k(x, 2)
    F.case("top_k", [x], [npa(vals), npa(idx)], id="smooth_top_k_rank3", k=2)
    ops = {"sum": (lax.add, 0.0), "max": (lax.max, -np.inf), "min": (lax.min, np.inf)}
    cfgs = [((2, 2), None, None, None), ((3, 2), (2, 1), None, None),
            ((2, 3), (1, 2), (1, 0), (2, 1)), ((1, 1), (3, 3), (0, 0), (0, 0)),
            ((4, 4), (1, 1), (0, 1), (1, 0)), ((2, 2), (2, 2), (3, 0), (0, 3))]
    for name in ("f32", "f64"):
        x = distinct((5, 6), name)
        for op in ("sum", "max", "min"):
            fn, init = ops[op]
            for i, (w, s, lo, hi) in enumerate(cfgs):
                pad = [(a, b) for a, b in zip(lo or (0, 0), hi or (0, 0))]
                want = npa(lax.reduce_window(x.astype(np.float64), init, fn, w, s or (1, 1),
                                             pad)).astype(dt(name))
                if not np.all(np.isfinite(want)):
                    continue  # a window entirely in padding: -inf/inf, no derivative to check
                kv = {}
                if s:
                    kv["strides"] = list(s)
                if lo:
                    kv["pad_lo"], kv["pad_hi"] = list(lo), list(hi)
                if op == "sum":
                    kv.update(rtol=2 * EPS[name], atol=64 * EPS[name])
                F.case("reduce_window", [x], [want], id=f"smooth_rw_{op}_{name}_{i}", how=op,
                       window=list(w), **kv)
    for shape, w, s in (((2, 5, 6, 3), (2, 2), (2, 2)), ((5, 6, 2), (3, 3), None)):
        x = distinct(shape, "f64")
        for padding in ("VALID", "SAME"):
            kv = {"window": list(w), "padding": padding}
            if s:
                kv["strides"] = list(s)
            mp = flax_pool(x, -np.inf, lax.max, w, s, padding)
            F.case("max_pool", [x], [npa(mp)], id=f"smooth_max_pool_{len(F.cases)}", **kv)


gen_sum_prod()
gen_max_min()
gen_all_any()
gen_stats()
gen_logsumexp_softmax()
gen_arg()
gen_cumulative()
gen_sort()
gen_windows()
gen_smooth()
F.write()
