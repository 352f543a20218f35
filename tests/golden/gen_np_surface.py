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
    case("repeat_counts", lambda a: jnp.repeat(a, np.array([2, 0, 3]), axis=0), normal(3, 2))
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


if __name__ == "__main__":
    groups = sys.argv[1:] or ["linear", "construct", "shape", "math", "activations"]
    if not sys.argv[1:] and os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT, exist_ok=True)
    for g in groups:
        globals()[g]()
    print(f"np_surface: {len(written)} cases -> {OUT}")
