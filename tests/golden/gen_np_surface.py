"""Goldens for the jax.numpy / jax.nn surface of include/jx/ops.h (the
"jax.numpy / jax.nn surface" block) and jx_map / jx_associative_scan /
jx_reduce of include/jx/transform.h, read by tests/unit/test_np_*.c.

Writes tests/golden/data/np_surface/ (no cases.txt: the C tests name their
cases), per case:
  <case>.in<k>.npy    inputs
  <case>.out<k>.npy   JAX's outputs
  <case>.ct0.npy      a cotangent for output 0 (float outputs)
  <case>.grad<k>.npy  the gradient of sum(out0 * ct0) for each float input k
Each case runs in JAX's default mode, or x64 when an input is 64-bit
(common.jax_mode_for). A case made with vmap= holds jax.vmap of the
function, with those in_axes.

Run from the repository root:  python3 tests/golden/gen_np_surface.py
"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, jax_mode_for, rng  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

OUT = os.path.join(ROOT, "np_surface")
r = rng(19)
written = []


def normal(*shape, dtype=np.float32):
    return r.standard_normal(shape).astype(dtype)


def ints(lo, hi, *shape, dtype=np.int32):
    return r.integers(lo, hi, size=shape).astype(dtype)


def i32(*v):
    return np.array(v, np.int32)


def case(name, fn, *inputs, grad=True, vmap=None):
    inputs = [np.asarray(x) for x in inputs]
    with jax_mode_for(*[x.dtype for x in inputs]):
        f = jax.vmap(fn, in_axes=vmap) if vmap is not None else fn
        outs = f(*inputs)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        outs = [np.asarray(o) for o in outs]
        for k, x in enumerate(inputs):
            np.save(os.path.join(OUT, f"{name}.in{k}.npy"), x)
        for k, o in enumerate(outs):
            np.save(os.path.join(OUT, f"{name}.out{k}.npy"), o)
        fl = [k for k, x in enumerate(inputs) if np.issubdtype(x.dtype, np.floating)]
        if grad and fl and np.issubdtype(outs[0].dtype, np.floating):
            ct = r.standard_normal(outs[0].shape).astype(outs[0].dtype)
            np.save(os.path.join(OUT, f"{name}.ct0.npy"), ct)

            def loss(*fx):
                args = list(inputs)
                for k, v in zip(fl, fx):
                    args[k] = v
                o = f(*args)
                o = o[0] if isinstance(o, (list, tuple)) else o
                return jnp.sum(o * ct)

            gs = jax.grad(loss, argnums=tuple(range(len(fl))))(*[inputs[k] for k in fl])
            for k, g in zip(fl, gs):
                np.save(os.path.join(OUT, f"{name}.grad{k}.npy"), np.asarray(g))
    written.append(name)


def linear():
    a2, b2 = normal(3, 4), normal(4, 5)
    case("dot_1d", jnp.dot, normal(4), normal(4))
    case("dot_2d", jnp.dot, a2, b2)
    case("dot_nd_1d", jnp.dot, normal(2, 3, 4), normal(4))
    case("dot_nd_md", jnp.dot, normal(2, 3, 4), normal(2, 4, 5))
    case("dot_scalar", jnp.dot, normal(), normal(2, 3))
    case("dot_f64", jnp.dot, normal(3, 4, dtype=np.float64), normal(4, 2, dtype=np.float64))
    case("dot_int", jnp.dot, ints(-5, 5, 3, 4), ints(-5, 5, 4))
    case("vdot", jnp.vdot, normal(2, 3), normal(3, 2))
    case("tensordot_2", lambda a, b: jnp.tensordot(a, b, 2), normal(2, 3, 4), normal(3, 4, 5))
    case("tensordot_axes", lambda a, b: jnp.tensordot(a, b, ((0, 2), (1, 0))), normal(2, 3, 4),
         normal(4, 2, 5))
    case("outer", jnp.outer, normal(3), normal(2, 2))
    case("kron", jnp.kron, normal(2, 3), normal(2))
    case("kron_f64", jnp.kron, normal(2, 2, dtype=np.float64), normal(3, 2, dtype=np.float64))
    case("diagonal", lambda a: jnp.diagonal(a, 1, 0, 2), normal(3, 2, 4))
    case("diagonal_neg", lambda a: jnp.diagonal(a, -1), normal(4, 3))
    case("diagonal_empty", lambda a: jnp.diagonal(a, 5), normal(4, 3))
    case("trace", lambda a: jnp.trace(a, 0, 1, 2), normal(2, 3, 3))
    case("trace_int", lambda a: jnp.trace(a, -1), ints(-9, 9, 4, 4, dtype=np.int8))
    case("diag_v", lambda v: jnp.diag(v, 1), normal(3))
    case("diag_v_neg", lambda v: jnp.diag(v, -2), normal(2))
    case("diag_m", lambda m: jnp.diag(m, 1), normal(3, 4))
    case("tril", lambda a: jnp.tril(a), normal(2, 3, 4))
    case("triu", lambda a: jnp.triu(a, 1), normal(4, 3))
    case("tril_neg", lambda a: jnp.tril(a, -1), normal(3, 3, dtype=np.float64))
    case("dot_vmap", jnp.dot, normal(3, 4), normal(4, 2), vmap=(0, None))
    case("diagonal_vmap", lambda a: jnp.diagonal(a, 1), normal(2, 3, 4), vmap=0)


def construct():
    case("zeros_like", jnp.zeros_like, normal(2, 3))
    case("ones_like", jnp.ones_like, ints(0, 4, 3, dtype=np.int16), grad=False)
    case("full_like", lambda a: jnp.full_like(a, 2.5), normal(2, dtype=np.float64))
    case("linspace", lambda a, b: jnp.linspace(a, b, 5), np.float32(1), np.float32(3))
    case("linspace_open", lambda a, b: jnp.linspace(a, b, 4, endpoint=False), np.float32(-1),
         np.float32(2))
    case("linspace_axis", lambda a, b: jnp.linspace(a, b, 3, axis=1), normal(2),
         normal(2))
    case("linspace_one", lambda a, b: jnp.linspace(a, b, 1), np.float64(2), np.float64(7))
    case("linspace_int", lambda a, b: jnp.linspace(a, b, 4), np.int32(0), np.int32(10),
         grad=False)
    case("logspace", lambda a, b: jnp.logspace(a, b, 4, base=2.0), np.float32(0), np.float32(3))
    case("meshgrid_xy", lambda x, y, z: jnp.meshgrid(x, y, z), normal(2), normal(3), normal(4))
    case("meshgrid_ij", lambda x, y: jnp.meshgrid(x, y, indexing="ij"), normal(2), normal(3))


def shape():
    x = normal(4, 6)
    case("split", lambda a: jnp.split(a, 3, axis=1), x)
    case("split_at", lambda a: jnp.split(a, [1, 3, 3], axis=0), normal(5, 2))
    case("array_split", lambda a: jnp.array_split(a, 3, axis=-1), normal(2, 7))
    case("tile", lambda a: jnp.tile(a, (2, 1, 3)), normal(2, 3))
    case("tile_short", lambda a: jnp.tile(a, 2), normal(2, 3))
    case("repeat", lambda a: jnp.repeat(a, 3, axis=1), normal(2, 3))
    case("repeat_flat", lambda a: jnp.repeat(a, 2), normal(2, 2))
    case("repeat_counts", lambda a: jnp.repeat(a, i32(2, 0, 3), axis=0), normal(3, 2))
    case("roll", lambda a: jnp.roll(a, 2, axis=1), normal(3, 5))
    case("roll_neg", lambda a: jnp.roll(a, -7, axis=0), normal(5, 2))
    case("roll_flat", lambda a: jnp.roll(a, 4), normal(3, 3))
    case("moveaxis", lambda a: jnp.moveaxis(a, (0, 1), (2, 0)), normal(2, 3, 4, 5))
    case("swapaxes", lambda a: jnp.swapaxes(a, 0, -1), normal(2, 3, 4))
    case("diff", lambda a: jnp.diff(a, 2, axis=0), normal(5, 3))
    case("diff_bool", lambda a: jnp.diff(a), np.array([True, True, False, True]), grad=False)
    for mode in ("edge", "reflect", "symmetric", "wrap"):
        case(f"pad_{mode}", lambda a, m=mode: jnp.pad(a, ((5, 2), (1, 3)), mode=m), normal(3, 4))
    case("pad_reflect_1", lambda a: jnp.pad(a, ((2, 3),), mode="reflect"), normal(1))
    case("pad_constant", lambda a: jnp.pad(a, ((1, 2), (0, 1)), constant_values=1.5),
         normal(2, 2))
    case("pad_ramp", lambda a: jnp.pad(a, ((2, 3), (1, 0)), mode="linear_ramp",
                                       end_values=0.5), normal(3, 2))
    case("pad_ramp_int", lambda a: jnp.pad(a, ((3, 2),), mode="linear_ramp", end_values=-4),
         ints(0, 20, 4), grad=False)
    case("array_split_many", lambda a: jnp.array_split(a, 5), normal(3))
    case("tile_zero", lambda a: jnp.tile(a, (0, 2)), normal(2, 3))
    case("repeat_zero", lambda a: jnp.repeat(a, 0, axis=0), normal(2, 3))
    case("roll_vmap", lambda a: jnp.roll(a, 1, axis=0), normal(2, 4, 3), vmap=0)


def math():
    special = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 3.0, 1e30], np.float32)
    case("isnan", jnp.isnan, special, grad=False)
    case("isinf", jnp.isinf, special, grad=False)
    case("isnan_int", jnp.isnan, ints(0, 3, 3), grad=False)
    case("nan_to_num", jnp.nan_to_num, special)
    case("nan_to_num_f64", lambda a: jnp.nan_to_num(a, nan=-1.0, neginf=-7.0),
         special.astype(np.float64))
    a = np.array([1.0, 1.0, np.inf, np.inf, np.nan, np.nan, 0.0, 1e-9], np.float32)
    b = np.array([1.0 + 1e-6, 1.1, np.inf, -np.inf, np.nan, 1.0, 1e-9, 0.0], np.float32)
    case("isclose", jnp.isclose, a, b, grad=False)
    case("isclose_nan", lambda x, y: jnp.isclose(x, y, rtol=0.2, atol=0.0, equal_nan=True), a, b,
         grad=False)
    case("allclose", jnp.allclose, a[:2], b[:2], grad=False)
    pos = np.abs(normal(6)) + 0.1
    case("log2", jnp.log2, pos)
    case("log10", jnp.log10, pos.astype(np.float64))
    case("log2_int", jnp.log2, ints(1, 100, 4), grad=False)
    x = np.array([0.0, 1.0, -np.inf, np.inf, -np.inf, 30.0, -2.0], np.float32)
    y = np.array([0.0, -3.0, 2.0, 1.0, -np.inf, -30.0, -2.0], np.float32)
    case("logaddexp", jnp.logaddexp, x, y)
    case("logaddexp_f64", jnp.logaddexp, normal(5, dtype=np.float64), normal(5, dtype=np.float64))
    h1 = np.array([3.0, 0.0, -5.0, np.inf, 7.0, 0.5], np.float32)
    h2 = np.array([4.0, 0.0, 12.0, 1.0, 7.0, -2.0], np.float32)
    case("hypot", jnp.hypot, h1, h2)
    case("clip_arrays", lambda a, lo, hi: jnp.clip(a, lo, hi), normal(3, 4), normal(4) - 1,
         normal(3, 1) + 1)
    case("clip_lo_only", lambda a, lo: jnp.clip(a, lo), normal(5), normal(5))


def activations():
    x = np.array([-3.0, -0.5, 0.0, 0.5, 2.0, -20.0], np.float32)
    case("elu", lambda a: jax.nn.elu(a, 0.7), x)
    case("leaky_relu", lambda a: jax.nn.leaky_relu(a, 0.1), x)
    case("selu", jax.nn.selu, x.astype(np.float64))
    case("glu", lambda a: jax.nn.glu(a, axis=0), normal(4, 3))
    case("standardize", jax.nn.standardize, normal(3, 5))
    case("standardize_axes", lambda a: jax.nn.standardize(a, axis=(0, 2), epsilon=1e-3),
         normal(2, 3, 4, dtype=np.float64))


def stats():
    case("var_ddof", lambda a: jnp.var(a, axis=1, ddof=1), normal(3, 4))
    case("std_ddof", lambda a: jnp.std(a, axis=(0, 2), ddof=2, keepdims=True),
         normal(2, 3, 4, dtype=np.float64))
    case("var_int", lambda a: jnp.var(a, ddof=1), ints(-5, 5, 6), grad=False)
    x = normal(3, 7)
    case("quantile", lambda a, q: jnp.quantile(a, q, axis=1), x, np.float32(0.3))
    case("quantile_vec", lambda a, q: jnp.quantile(a, q), x, np.array([0.0, 0.25, 0.9, 1.0],
                                                                      np.float32))
    for m in ("lower", "higher", "nearest", "midpoint"):
        case(f"quantile_{m}", lambda a, q, m=m: jnp.quantile(a, q, axis=0, method=m,
                                                             keepdims=True), x,
             np.array([0.1, 0.5, 0.75], np.float32))
    case("quantile_axes", lambda a, q: jnp.quantile(a, q, axis=(0, 2)),
         normal(2, 3, 4, dtype=np.float64), np.float64(0.4))
    case("quantile_nan", lambda a, q: jnp.quantile(a, q, axis=1),
         np.array([[1.0, np.nan, 2.0], [3.0, 1.0, 2.0]], np.float32), np.float32(0.5))
    case("percentile", lambda a, q: jnp.percentile(a, q, axis=-1), x,
         np.array([10.0, 50.0], np.float32))
    case("median", lambda a: jnp.median(a, axis=1), normal(3, 6))
    case("median_odd", lambda a: jnp.median(a), normal(5, dtype=np.float64))
    case("median_vmap", lambda a: jnp.median(a), normal(3, 4), vmap=0)
    h = normal(20)
    case("histogram", lambda a: jnp.histogram(a, bins=5), h, grad=False)
    case("histogram_range", lambda a, w: jnp.histogram(a, bins=4, range=(-1.0, 1.0), weights=w,
                                                       density=True), h, np.abs(normal(20)))
    case("histogram_flat", lambda a: jnp.histogram(a, bins=3), np.full(4, 2.0, np.float32),
         grad=False)
    case("histogram_edges", lambda a, e, w: jnp.histogram(a, bins=e, weights=w)[0], h,
         np.array([-2.0, -0.5, 0.0, 0.1, 3.0], np.float32), np.abs(normal(20)))
    case("bincount", lambda x: jnp.bincount(x, length=6), i32(0, 1, 1, 3, -2, 9, 5),
         grad=False)
    case("bincount_w", lambda x, w: jnp.bincount(x, w, length=4), i32(0, 1, 1, 3, 2),
         normal(5))
    srt = np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32)
    qv = np.array([[2.0, np.nan, 0.0], [4.0, 1.0, 2.5]], np.float32)
    case("searchsorted_left", lambda a, v: jnp.searchsorted(a, v), srt, qv, grad=False)
    case("searchsorted_right", lambda a, v: jnp.searchsorted(a, v, side="right"), srt, qv,
         grad=False)
    case("digitize", lambda x, b: jnp.digitize(x, b), qv, srt[:4], grad=False)
    case("digitize_right_desc", lambda x, b: jnp.digitize(x, b, right=True), qv,
         srt[:4][::-1].copy(), grad=False)
    xp = np.array([0.0, 1.0, 1.0, 2.5, 4.0], np.float32)
    fp = normal(5)
    xq = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.9, 4.0, 5.0], np.float32)
    case("interp", jnp.interp, xq, xp, fp)
    case("interp_lr", lambda x, a, b: jnp.interp(x, a, b, left=-9.0, right=9.0), xq, xp, fp)
    for mode in ("full", "same", "valid"):
        case(f"convolve_{mode}", lambda a, v, m=mode: jnp.convolve(a, v, mode=m), normal(6),
             normal(3))
        case(f"correlate_{mode}", lambda a, v, m=mode: jnp.correlate(a, v, mode=m), normal(3),
             normal(5))
    case("convolve_f64", lambda a, v: jnp.convolve(a, v), normal(4, dtype=np.float64),
         normal(4, dtype=np.float64))


def sets():
    u = np.array([3.0, 1.0, np.nan, 1.0, np.nan, -2.0], np.float32)
    case("unique", lambda a: jnp.unique(a, size=6, fill_value=-1), u, grad=False)
    case("unique_default_fill", lambda a: jnp.unique(a, size=7), u[[0, 1, 3, 5]], grad=False)
    case("unique_short", lambda a: jnp.unique(a, size=2), ints(0, 4, 3, 3), grad=False)
    nz = np.array([[0, 2, 0], [1, 0, 3]], np.int32)
    case("nonzero", lambda a: jnp.nonzero(a, size=4, fill_value=-1), nz)
    case("nonzero_pad", lambda a: jnp.nonzero(a, size=5), nz)
    case("nonzero_cut", lambda a: jnp.nonzero(a, size=2), nz)
    case("argwhere", lambda a: jnp.argwhere(a, size=4), nz > 1)
    case("where_one", lambda a: jnp.where(a, size=3, fill_value=7), np.array([0.0, 1.5, 0.0, -1.0],
                                                                              np.float32),
         grad=False)
    data = normal(6, 2)
    ids = i32(0, 2, 2, 1, 0, 7)
    for op in ("max", "min", "prod"):
        f = getattr(jax.ops, f"segment_{op}")
        # JAX differentiates scatter_mul only with unique indices
        case(f"segment_{op}", lambda d, i, f=f: f(d, i, num_segments=4), data, ids,
             grad=op != "prod")
    case("segment_max_int", lambda d, i: jax.ops.segment_max(d, i, num_segments=4),
         ints(-9, 9, 6), ids)
    case("segment_max_vmap", lambda d, i: jax.ops.segment_max(d, i, num_segments=3), normal(2, 5),
         i32(0, 1, 1, 2, 0), vmap=(0, None))


def at():
    A = jnp.asarray
    x = normal(4, 5, 3)
    i0 = np.array([[0, -1], [2, 7]], np.int32)
    i1 = i32(1, 3)
    v = normal(2, 2, 3)
    case("at_get_arrays", lambda a, i, j: A(a).at[i, j].get(), x, i0, i1)
    case("at_get_slice", lambda a: A(a).at[1:4:2, ::-2].get(), x)
    case("at_get_mixed", lambda a, j: A(a).at[::2, j].get(), x, i1)
    case("at_get_apart", lambda a, i, j: A(a).at[i, 1:3, j].get(), x, i1, i1)
    case("at_set", lambda a, i, j, v: A(a).at[i, j].set(v), x, i0, i1, v)
    case("at_add_dup", lambda a, i, v: A(a).at[i].add(v), normal(5, 2), i32(1, 1, -1, 9),
         normal(4, 2))
    case("at_mul", lambda a, v: A(a).at[1:, 0].mul(v), normal(3, 2), normal(2))
    case("at_min", lambda a, i, v: A(a).at[i].min(v), normal(5), i32(0, 0, 3), normal(3))
    case("at_max", lambda a, i, v: A(a).at[2:0:-1, i].max(v), normal(4, 3), i32(2),
         np.float32(0.5))
    case("at_set_slice_scalar", lambda a: A(a).at[1, :].set(7), ints(0, 5, 3, 4), grad=False)
    case("at_get_empty", lambda a: A(a).at[2:2].get(), normal(4, 2))
    case("at_set_empty", lambda a, v: A(a).at[3:1].set(v), normal(4, 2), normal(2))
    case("at_set_vmap", lambda a, i, v: A(a).at[i].set(v), normal(2, 5), i32(1, 3),
         normal(2, 2), vmap=(0, None, 0))


def control():
    case("map", lambda xs, ws: jax.lax.map(lambda xw: jnp.sin(xw[0]) * jnp.sum(xw[0] * xw[1]),
                                           (xs, ws)), normal(4, 3), normal(4, 3))
    case("map_batched", lambda xs, ws: jax.lax.map(
        lambda xw: jnp.sin(xw[0]) * jnp.sum(xw[0] * xw[1]), (xs, ws), batch_size=3),
        normal(7, 3), normal(7, 3))
    case("assoc_add", lambda x: jax.lax.associative_scan(jnp.add, x, axis=1), normal(2, 7))
    case("assoc_add_rev", lambda x: jax.lax.associative_scan(jnp.add, x, reverse=True),
         normal(6, dtype=np.float64))
    case("assoc_matmul", lambda m: jax.lax.associative_scan(jnp.matmul, m), normal(5, 2, 2))
    case("assoc_affine",
         lambda a, b: jax.lax.associative_scan(lambda x, y: (x[0] * y[0], y[0] * x[1] + y[1]),
                                               (a, b)),
         normal(8), normal(8))
    case("reduce_mul", lambda x: jax.lax.reduce(x, np.float32(1), lambda a, b: a * b, (1,)),
         normal(3, 5))
    case("reduce_lse", lambda x: jax.lax.reduce(x, np.float64(-np.inf), jnp.logaddexp, (0, 2)),
         normal(3, 2, 5, dtype=np.float64), grad=False)
    case("assoc_matmul_vmap", lambda m: jax.lax.associative_scan(jnp.matmul, m),
         normal(2, 4, 2, 2), vmap=0)
    case("map_vmap", lambda xs, ws: jax.lax.map(lambda xw: jnp.sin(xw[0]) * jnp.sum(xw[0] * xw[1]),
                                                (xs, ws)), normal(2, 3, 4), normal(3, 4),
         vmap=(0, None))
    case("reduce_vmap", lambda x: jax.lax.reduce(x, np.float32(1), lambda a, b: a * b, (0,)),
         normal(2, 3, 4), vmap=0)


def options():
    """The options of jnp.pad, quantile/percentile, interp, searchsorted and unique beyond
    their defaults (its own random stream, so the cases above keep their inputs)."""
    global r
    r = rng(194)
    for mode in ("reflect", "symmetric"):
        case(f"pad_{mode}_odd", lambda a, m=mode: jnp.pad(a, ((5, 2), (1, 3)), mode=m,
                                                         reflect_type="odd"), normal(3, 4))
        case(f"pad_{mode}_odd_int", lambda a, m=mode: jnp.pad(a, ((4, 6),), mode=m,
                                                             reflect_type="odd"),
             ints(-9, 9, 3), grad=False)
    case("pad_reflect_odd_1", lambda a: jnp.pad(a, ((2, 3), (0, 0)), mode="reflect",
                                                reflect_type="odd"), normal(1, 2))
    case("pad_symmetric_odd_f64", lambda a: jnp.pad(a, ((3, 4),), mode="symmetric",
                                                    reflect_type="odd"),
         normal(2, dtype=np.float64))
    for mode in ("maximum", "minimum", "mean", "median"):
        case(f"pad_{mode}", lambda a, m=mode: jnp.pad(a, ((2, 1), (0, 3)), mode=m), normal(3, 4))
        case(f"pad_{mode}_len", lambda a, m=mode: jnp.pad(a, ((1, 2), (2, 2)), mode=m,
                                                         stat_length=((2, 9), (1, 3))),
             normal(4, 5, dtype=np.float64))
    case("pad_mean_int", lambda a: jnp.pad(a, ((2, 3),), mode="mean", stat_length=((2, 3),)),
         i32(1, 2, 7, 4, 4), grad=False)
    case("pad_median_int", lambda a: jnp.pad(a, ((1, 1), (2, 0)), mode="median"),
         ints(-9, 9, 2, 4), grad=False)
    case("pad_empty", lambda a: jnp.pad(a, ((1, 2), (0, 1)), mode="empty"), normal(2, 2))
    case("diff_prepend", lambda a: jnp.diff(a, axis=0, prepend=1.5), normal(3, 2))
    case("diff_append", lambda a, e: jnp.diff(a, 2, append=e), normal(2, 3), normal(2, 2))
    case("diff_both_int", lambda a, e: jnp.diff(a, prepend=e, append=e), ints(0, 9, 4), normal(1),
         grad=False)

    icdf = "inverted_cdf"
    case("quantile_icdf", lambda a, q: jnp.quantile(a, q, axis=1, method=icdf), normal(3, 7),
         np.array([0.0, 0.2, 0.5, 0.99, 1.0], np.float32))
    case("quantile_icdf_keep", lambda a, q: jnp.quantile(a, q, axis=0, method=icdf,
                                                         keepdims=True),
         np.array([[1.0, np.nan, 2.0], [3.0, 1.0, 2.0], [0.5, 4.0, 2.0]], np.float32),
         np.float32(0.5))
    w_red = np.abs(normal(2, 4, dtype=np.float64))
    w_red[1, 2] = 0.0
    case("quantile_weighted", lambda a, q, w: jnp.quantile(a, q, axis=(0, 2), method=icdf,
                                                           weights=w),
         normal(2, 3, 4, dtype=np.float64), np.array([0.1, 0.5, 0.9], np.float64), w_red)
    w_full = np.abs(normal(3, 5))
    w_full[2, 1] = -1.0  # a negative weight makes its row NaN
    case("quantile_weighted_full", lambda a, q, w: jnp.quantile(a, q, axis=1, method=icdf,
                                                                weights=w, keepdims=True),
         normal(3, 5), np.float32(0.3), w_full)
    case("percentile_weighted", lambda a, q, w: jnp.percentile(a, q, method=icdf, weights=w),
         normal(6), np.array([25.0, 75.0], np.float32), np.abs(normal(6)))

    xp = np.array([0.0, 1.0, 1.0, 2.5, 4.0], np.float32)
    xq = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.9, 4.0, 5.0], np.float32)
    case("interp_arrays", lambda x, a, b, lv: jnp.interp(x, a, b, left=lv, right="extrapolate"),
         xq, xp, normal(5), normal(8))
    case("interp_extrapolate", lambda x, a, b: jnp.interp(x, a, b, left="extrapolate"),
         xq, xp, normal(5))
    xpp = np.array([350.0, 10.0, 95.0, 180.0, -90.0], np.float32)
    xqp = np.array([-170.0, 0.0, 5.0, 100.0, 355.0, 400.0, 725.0], np.float32)
    case("interp_period", lambda x, a, b, p: jnp.interp(x, a, b, period=p), xqp, xpp, normal(5),
         np.float32(-360.0))
    case("interp_period_f64", lambda x, a, b, p: jnp.interp(x, a, b, period=p),
         xqp.astype(np.float64), np.array([0.1, 2.0, 1.0, 4.5], np.float64),
         normal(4, dtype=np.float64), np.float64(5.0))
    qv = np.array([[2.0, np.nan, 0.0], [4.0, 1.0, 2.5]], np.float32)
    case("searchsorted_sorter", lambda a, v, s: jnp.searchsorted(a, v, side="right", sorter=s),
         np.array([3.0, 1.0, 2.0, 2.0, 0.5], np.float32), qv, i32(4, 1, 2, 3, 0), grad=False)

    def unique_all(size, fill=None):
        return lambda a: jnp.unique(a, return_index=True, return_inverse=True,
                                    return_counts=True, size=size, fill_value=fill)
    u = np.array([[3.0, 1.0, np.nan], [1.0, np.nan, -2.0]], np.float32)
    case("unique_all", unique_all(6, -1), u)
    case("unique_all_short", unique_all(2), ints(0, 4, 3, 3), grad=False)
    case("unique_all_default_fill", unique_all(7), np.array([2.0, 1.0, 2.0, 2.0], np.float64))
    case("unique_all_empty", unique_all(3, 0), np.zeros((2, 0), np.float32), grad=False)
    mask = np.array([[True, False, True, True], [False, False, False, False],
                     [True, True, False, True]])
    case("var_where", lambda a, m: jnp.var(a, axis=1, where=m), normal(3, 4), mask)
    case("std_where", lambda a, m: jnp.std(a, axis=(0, 2), ddof=1, keepdims=True, where=m),
         normal(2, 3, 4, dtype=np.float64), r.random((1, 3, 4)) < 0.6)
    case("var_where_all", lambda a, m: jnp.var(a, ddof=2, where=m), normal(3, 4), mask[0])
    case("var_ddof_too_big", lambda a: jnp.var(a, axis=0, ddof=3), normal(3, 2))
    case("roll_axes", lambda a: jnp.roll(a, (2, -1, 7), axis=(1, 0, 1)), normal(3, 4))
    case("meshgrid_sparse_xy", lambda x, y, z: jnp.meshgrid(x, y, z, sparse=True), normal(2),
         normal(3), normal(4))
    case("meshgrid_sparse_ij", lambda x, y: jnp.meshgrid(x, y, sparse=True, indexing="ij"),
         normal(2), normal(3))
    case("standardize_where", lambda a, m: jax.nn.standardize(a, where=m), normal(3, 4),
         np.array([[True, False, True, True], [True, True, False, True],
                   [False, True, True, False]]))
    case("standardize_given", lambda a, mu, v: jax.nn.standardize(a, axis=0, mean=mu, variance=v,
                                                                   epsilon=1e-3),
         normal(3, 4), normal(4), np.abs(normal(4)))
    case("standardize_stable", lambda a: jax.nn.standardize(a, axis=(0, 2), algorithm="stable"),
         normal(2, 3, 4, dtype=np.float64) + 100.0)
    case("pad_odd_vmap", lambda a: jnp.pad(a, ((2, 3),), mode="symmetric", reflect_type="odd"),
         normal(2, 3), vmap=0)
    case("quantile_weighted_vmap", lambda a, q, w: jnp.quantile(a, q, method=icdf, weights=w),
         normal(3, 5), np.array([0.25, 0.5], np.float32), np.abs(normal(3, 5)), vmap=(0, None, 0))
    case("interp_period_vmap", lambda x, a, b, p: jnp.interp(x, a, b, period=p), normal(2, 4),
         xpp, normal(5), np.float32(360.0), vmap=(0, None, None, None))
    case("unique_all_vmap", unique_all(4, -1), ints(0, 5, 3, 5).astype(np.float32), vmap=0)


if __name__ == "__main__":
    groups = sys.argv[1:] or ["linear", "construct", "shape", "math", "activations", "stats",
                              "sets", "at", "control", "options"]
    if not sys.argv[1:] and os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT, exist_ok=True)
    for g in groups:
        globals()[g]()
    print(f"np_surface: {len(written)} cases -> {OUT}")
