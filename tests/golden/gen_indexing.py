"""Golden data for the indexing ops (tests/conformance/ops_indexing.c).

Expected outputs come from JAX with x64 enabled: jnp.take, jnp.take_along_axis,
jax.nn.one_hot, jax.ops.segment_sum, and lax.gather / lax.scatter* with the
dimension numbers that jnp indexing expressions (x[idx], x[:, idx], x[i, j],
x.at[...].set/add/mul/min/max) produce, read from their jaxprs. Each gather /
scatter configuration also runs with the index vector moved to another dim
(index_vector_dim != last, which JAX itself never emits) and, where the index
vectors have length 1, as scalar indices (index_vector_dim == rank). Writes
tests/golden/data/indexing/.

Run from the repository root:  python3 tests/golden/gen_indexing.py
"""
import os
import sys

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BY_NAME, Family, rng, sample  # noqa: E402

ALL = ["bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32",
       "f64"]
r = rng(11)
fam = Family("indexing")
MODE = lax.GatherScatterMode


def x(shape, dt):
    return sample(shape, dt, r)


def ints(shape, lo, hi, dt="i32"):
    return r.integers(lo, hi, size=shape, endpoint=True).astype(BY_NAME[dt])


def jcase(op, fn, ins, **kw):
    fam.case(op, ins, [np.asarray(fn(*ins))], **kw)


# ---- take ----
for dt in ALL:
    a = x((4, 3), dt)
    jcase("take", lambda a, i: jnp.take(a, i, axis=0), [a, ints((5,), -6, 6)], id=f"take_{dt}",
          axis=0)
a = x((3, 5, 2), "f32")
for axis, ishape in [(1, (2, 3)), (-1, (4,)), (0, ()), (2, (1, 1, 2))]:
    jcase("take", lambda a, i, ax=axis: jnp.take(a, i, axis=ax),
          [a, ints(ishape, -8, 8)], axis=axis)
for idt in ["i8", "i16", "i64", "u8", "u32", "u64"]:
    lo = 0 if idt[0] == "u" else -7
    jcase("take", lambda a, i: jnp.take(a, i, axis=1), [a, ints((6,), lo, 7, idt)],
          id=f"take_idx_{idt}", axis=1)
jcase("take", lambda a, i: jnp.take(a, i, axis=1),
      [a, np.array([2**31 - 1, 5, 4], dtype=np.uint64)], id="take_idx_u64_big", axis=1)
# (JAX/XLA on CPU truncate u64 indices >= 2**32 to 32 bits, so 2**32 + 1 reads
# element 1; jx treats them as out of range instead and fills.)
jcase("take", lambda a, i: jnp.take(a, i, axis=1), [a, ints((0, 2), 0, 3)], axis=1)
jcase("take", lambda a, i: jnp.take(a, i, axis=1), [x((2, 0), "f32"), ints((0,), 0, 3)],
      id="take_empty_axis", axis=1)
jcase("take", lambda a, i: jnp.take(a, i, axis=0), [x((5,), "i32"), ints((), -5, 4)], axis=0)

# ---- take_along_axis ----
for dt in ALL:
    a = x((3, 4), dt)
    jcase("take_along_axis", lambda a, i: jnp.take_along_axis(a, i, axis=1),
          [a, ints((3, 2), -5, 5)], id=f"take_along_axis_{dt}", axis=1)
a = x((3, 4, 2), "f32")
for axis, ishape in [(0, (5, 4, 2)), (-1, (3, 4, 3)), (1, (1, 6, 2)), (1, (3, 2, 1)),
                     (2, (1, 1, 4))]:
    jcase("take_along_axis", lambda a, i, ax=axis: jnp.take_along_axis(a, i, axis=ax),
          [a, ints(ishape, -5, 5)], axis=axis)
jcase("take_along_axis", lambda a, i: jnp.take_along_axis(a, i, axis=0),
      [x((1, 3), "i64"), ints((4, 1), -2, 2, "i8")], axis=0)
jcase("take_along_axis", lambda a, i: jnp.take_along_axis(a, i, axis=1),
      [x((2, 0), "f32"), ints((2, 3), 0, 1)], id="take_along_axis_empty_axis", axis=1)
jcase("take_along_axis", lambda a, i: jnp.take_along_axis(a, i, axis=0),
      [x((4,), "bf16"), ints((0,), 0, 1)], axis=0)

# ---- one_hot ----
for dt in ["f32", "bf16", "f16", "f64", "i32", "u8", "bool"]:
    jcase("one_hot", lambda i, d=dt: jax.nn.one_hot(i, 5, dtype=BY_NAME[d]),
          [ints((2, 3), -2, 6)], id=f"one_hot_{dt}", n=5, dtype=dt)
for idt in ["i8", "u16", "i64"]:
    lo = 0 if idt[0] == "u" else -3
    jcase("one_hot", lambda i: jax.nn.one_hot(i, 4, dtype=np.float32), [ints((6,), lo, 5, idt)],
          id=f"one_hot_idx_{idt}", n=4, dtype="f32")
jcase("one_hot", lambda i: jax.nn.one_hot(i, 3, dtype=np.float32), [ints((), 0, 2)], n=3,
      dtype="f32")
jcase("one_hot", lambda i: jax.nn.one_hot(i, 0, dtype=np.float32), [ints((2,), 0, 2)], n=0,
      dtype="f32")
jcase("one_hot", lambda i: jax.nn.one_hot(i, 3, dtype=np.float32), [ints((0,), 0, 2)], n=3,
      dtype="f32")

# ---- segment_sum ----
for dt in ["i8", "i32", "i64", "u8", "u32", "f16", "bf16", "f32", "f64"]:
    jcase("segment_sum", lambda d, s: jax.ops.segment_sum(d, s, 4),
          [x((7, 2), dt), ints((7,), -1, 5)], id=f"segment_sum_{dt}", n=4)
jcase("segment_sum", lambda d, s: jax.ops.segment_sum(d, s, 3), [x((6,), "f32"),
      np.array([0, 0, 2, 2, 2, 1], np.int32)], n=3)
jcase("segment_sum", lambda d, s: jax.ops.segment_sum(d, s, 2), [x((0, 3), "f32"),
      ints((0,), 0, 1)], n=2)
jcase("segment_sum", lambda d, s: jax.ops.segment_sum(d, s, 0), [x((3, 2), "f64"),
      ints((3,), 0, 1)], n=0)
jcase("segment_sum", lambda d, s: jax.ops.segment_sum(d, s, 3),
      [np.array([100, 100, 100, 7], np.int8), np.array([1, 1, 1, 0], np.uint8)],
      id="segment_sum_wrap", n=3)


# ---- gather / scatter dimension numbers from jnp indexing expressions ----
def find_eqn(jaxpr, names):
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in names:
            return eqn
        for p in eqn.params.values():
            sub = getattr(p, "jaxpr", None)
            if sub is not None:
                found = find_eqn(getattr(sub, "jaxpr", sub), names)
                if found is not None:
                    return found
    return None


def gather_config(f, *args):
    eqn = find_eqn(jax.make_jaxpr(f)(*args).jaxpr, ("gather",))
    dn = eqn.params["dimension_numbers"]
    assert not dn.operand_batching_dims
    return dn, tuple(eqn.params["slice_sizes"]), eqn.invars[1].aval.shape


def scatter_config(f, *args):
    eqn = find_eqn(jax.make_jaxpr(f)(*args).jaxpr,
                   ("scatter", "scatter-add", "scatter_add", "scatter-mul", "scatter_mul",
                    "scatter-min", "scatter_min", "scatter-max", "scatter_max"))
    dn = eqn.params["dimension_numbers"]
    assert not dn.operand_batching_dims
    return dn, eqn.invars[1].aval.shape, eqn.invars[2].aval.shape


def lst(t):
    return [int(v) for v in t]


def index_variants(idx):
    """(indices, index_vector_dim) forms equivalent to JAX's trailing index vector."""
    k = idx.ndim - 1
    out = [(idx, k)]
    if k > 0:
        out.append((np.ascontiguousarray(np.moveaxis(idx, -1, 0)), 0))
    if idx.shape[-1] == 1:
        out.append((np.ascontiguousarray(idx[..., 0]), k))
    return out


i2 = np.zeros(3, np.int32)
GATHERS = [  # (name, operand shape, expression)
    ("x_idx", (5, 3), lambda a, i: a[i]),
    ("x_col_idx", (3, 5, 2), lambda a, i: a[:, i]),
    ("x_i_j", (4, 5), lambda a, i: a[i, i]),
    ("x_i_slice_j", (4, 3, 5), lambda a, i: a[i, :, i]),
    ("x_idx_int", (4, 5), lambda a, i: a[i, 2]),
    ("x_i_range", (6, 4), lambda a, i: a[i, 1:3]),
]
for name, shape, expr in GATHERS:
    a0 = np.zeros(shape, np.float32)
    dn, ss, ishape = gather_config(expr, a0, i2)
    dims_max = max(shape)
    for mode, mname in [(MODE.CLIP, 0), (MODE.FILL_OR_DROP, 1)]:
        for dt in (["f32", "i32"] if mode == MODE.CLIP else ["f32", "bf16", "i16", "u32",
                                                              "bool", "f64"]):
            a = x(shape, dt)
            idx = ints(ishape, -2, dims_max + 1)
            want = lax.gather(a, idx, dn, ss, mode=mode)
            for k, (iv, ivd) in enumerate(index_variants(idx)):
                fam.case("gather", [a, iv], [np.asarray(want)], id=f"gather_{name}_{mname}_{dt}_{k}",
                         offset=lst(dn.offset_dims), collapsed=lst(dn.collapsed_slice_dims),
                         sim=lst(dn.start_index_map), sizes=lst(ss), ivd=ivd, mode=mname)
# a gather with an empty operand dim and with no indices
a = x((3, 0), "f32")
dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                start_index_map=(0,))
idx = ints((2, 1), 0, 2)
fam.case("gather", [a, idx], [np.asarray(lax.gather(a, idx, dn, (1, 0), mode=MODE.CLIP))],
         id="gather_empty_operand", offset=[1], collapsed=[0], sim=[0], sizes=[1, 0], ivd=1,
         mode=0)
a = x((3, 2), "f32")
idx = ints((0, 1), 0, 2)
fam.case("gather", [a, idx], [np.asarray(lax.gather(a, idx, dn, (1, 2), mode=MODE.FILL_OR_DROP))],
         id="gather_no_indices", offset=[1], collapsed=[0], sim=[0], sizes=[1, 2], ivd=1, mode=1)
# slice sizes > 1 in a gathered dim: windows partly out of range clamp or fill
dn = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                start_index_map=(0, 1))
a = x((5, 6), "f32")
idx = np.array([[0, 0], [3, 4], [4, 1], [-1, 2], [2, 5]], np.int64)
for mode, mname in [(MODE.CLIP, 0), (MODE.FILL_OR_DROP, 1)]:
    fam.case("gather", [a, idx], [np.asarray(lax.gather(a, idx, dn, (2, 3), mode=mode))],
             id=f"gather_window_{mname}", offset=[1, 2], collapsed=[], sim=[0, 1], sizes=[2, 3],
             ivd=1, mode=mname)

OPS = {"set": lax.scatter, "add": lax.scatter_add, "mul": lax.scatter_mul,
       "min": lax.scatter_min, "max": lax.scatter_max}
SCATTERS = [  # (name, operand shape, expression giving a scatter)
    ("at_idx", (5, 3), lambda a, i: a.at[i].add(1.0)),
    ("at_col_idx", (3, 5, 2), lambda a, i: a.at[:, i].add(1.0)),
    ("at_i_j", (4, 5), lambda a, i: a.at[i, i].add(1.0)),
    ("at_i_slice_j", (4, 3, 5), lambda a, i: a.at[i, :, i].add(1.0)),
    ("at_i_range", (6, 4), lambda a, i: a.at[i, 1:3].add(1.0)),
]
for name, shape, expr in SCATTERS:
    a0 = np.zeros(shape, np.float32)
    dn, ishape, ushape = scatter_config(expr, a0, i2)
    dims_max = max(shape)
    for opname, fn in OPS.items():
        for mode, mname in [(MODE.FILL_OR_DROP, 0), (MODE.CLIP, 1)]:
            dts = ["f32", "i32"]
            if mode == MODE.FILL_OR_DROP and opname == "add":
                dts += ["f16", "bf16", "i8", "u16", "i64", "f64"]
            if mode == MODE.FILL_OR_DROP and opname in ("set", "max"):
                dts += ["bool", "u64"]
            for dt in dts:
                a = x(shape, dt)
                idx = ints(ishape, -2, dims_max + 1)
                upd = x(ushape, dt)
                want = fn(a, idx, upd, dn, mode=mode)
                for k, (iv, ivd) in enumerate(index_variants(idx)):
                    fam.case("scatter", [a, iv, upd], [np.asarray(want)],
                             id=f"scatter_{name}_{opname}_{mname}_{dt}_{k}",
                             uwd=lst(dn.update_window_dims), iwd=lst(dn.inserted_window_dims),
                             sdod=lst(dn.scatter_dims_to_operand_dims), ivd=ivd, kind=opname,
                             mode=mname)
# duplicates: every index the same; partly out-of-range windows
dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=(0,))
a = x((4, 3), "f32")
idx = np.array([[2], [2], [2], [1], [2]], np.int32)
upd = x((5, 3), "f32")
for opname, fn in OPS.items():
    fam.case("scatter", [a, idx, upd], [np.asarray(fn(a, idx, upd, dn, mode=MODE.FILL_OR_DROP))],
             id=f"scatter_dup_{opname}", uwd=[1], iwd=[0], sdod=[0], ivd=1, kind=opname, mode=0)
dn = lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(),
                                 scatter_dims_to_operand_dims=(0, 1))
a = x((5, 6), "i32")
idx = np.array([[0, 0], [3, 4], [4, 1], [-1, 2], [2, 5], [1, 1]], np.int64)
upd = x((6, 2, 3), "i32")
for mode, mname in [(MODE.FILL_OR_DROP, 0), (MODE.CLIP, 1)]:
    for opname in ["set", "add"]:
        fam.case("scatter", [a, idx, upd], [np.asarray(OPS[opname](a, idx, upd, dn, mode=mode))],
                 id=f"scatter_window_{opname}_{mname}", uwd=[1, 2], iwd=[], sdod=[0, 1], ivd=1,
                 kind=opname, mode=mname)
# NaN in scatter_min/max, integer wrap in scatter_add
dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=(0,))
a = np.array([1.0, np.nan, 3.0], np.float32)
idx = np.array([[0], [0], [2], [1]], np.int32)
upd = np.array([np.nan, 2.0, -1.0, 5.0], np.float32)
for opname in ["min", "max"]:
    fam.case("scatter", [a, idx, upd], [np.asarray(OPS[opname](a, idx, upd, dn))],
             id=f"scatter_nan_{opname}", uwd=[], iwd=[0], sdod=[0], ivd=1, kind=opname, mode=0)
a = np.array([120, -120, 5], np.int8)
upd = np.array([100, 10, -100, -100], np.int8)
fam.case("scatter", [a, idx, upd], [np.asarray(lax.scatter_add(a, idx, upd, dn))],
         id="scatter_add_wrap_i8", uwd=[], iwd=[0], sdod=[0], ivd=1, kind="add", mode=0)
fam.case("scatter", [a, idx, upd], [np.asarray(lax.scatter_mul(a, idx, upd, dn))],
         id="scatter_mul_wrap_i8", uwd=[], iwd=[0], sdod=[0], ivd=1, kind="mul", mode=0)

# Numerical derivatives are NaN where an output is inf or NaN (pad with an
# infinite value, gather's NaN fill): the grad mode skips those cases; the
# rules at such points are checked by tests/unit/test_shape_ad.c.
for n, (cid, op, kv, ins, outs) in enumerate(fam.cases):
    if any(o.dtype.kind == "f" or o.dtype.name == "bfloat16" for o in outs) and not all(
            np.isfinite(o.astype(np.float64)).all() for o in outs):
        fam.cases[n] = (cid, op, (kv + " nograd=1").strip(), ins, outs)
fam.write()
