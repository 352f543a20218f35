"""Golden files for the contraction family: dot_general, matmul, einsum, conv.

Integer and bool results come from JAX as they are (exact, wrapping). Float
results are JAX's op run on the inputs widened to f64 (preferred element
type f64 where one is given) and rounded once to the result dtype: an f64
oracle. jx sums f16/bf16 in f32 and f32 x f32 -> f32 in f32 (FMA chains for
small products, BLAS for large ones, as XLA), so its f32 results sit within
the summation bound gamma_K sum |a b| of it (tests/unit/test_dot_small.c
and test_dot_blas.c check that bound itself), which at these cases' sizes
is inside the f32 tolerance below; JAX's own f32 sums depend on XLA's
accumulation order. Each float case
also checks here that JAX's native result agrees with the f64 reference
within the dtype's accumulation error, so the reference is the same op.
Tolerances are the conformance defaults (f16 1e-3, bf16 1e-2, f32 1e-6,
relative and absolute) except: f64 results get 1e-13, since a sum of a few
dozen f64 products in another order moves the last digits; f16/bf16 einsums
of three or more operands get 1e-2/4e-2, since their intermediates are
rounded to the dtype and JAX (opt_einsum) may pair the operands in another
order.

Run from the repository root:  python3 tests/golden/gen_contract.py
"""
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from common import Family, bfloat16, rng, sample  # noqa: E402

fam = Family("contract")


def case(op, ins, outs, id, **params):
    """fam.case with the f64 tolerance of the module docstring."""
    if np.asarray(outs[0]).dtype == np.float64 and "rtol" not in params:
        params.update(rtol=1e-13, atol=1e-13)
    return fam.case(op, ins, outs, id=id, **params)


r = rng(7)

F16, BF16, F32, F64 = np.dtype(np.float16), np.dtype(bfloat16), np.dtype(np.float32), np.dtype(np.float64)
FLOATS = [F16, BF16, F32, F64]
ALL = [np.int8, np.int32, np.int64, np.uint8, np.bool_, np.float16, bfloat16, np.float32,
       np.float64]
# how far JAX's native float result may sit from the f64 reference (sanity check only)
NATIVE_TOL = {F16: 2e-2, BF16: 8e-2, F32: 1e-4, F64: 1e-12}


def is_float(dt):
    return np.dtype(dt) in FLOATS


def reference(fn, xs, out_dtype, pref=None):
    """fn(xs, pref) evaluated as described in the module docstring."""
    out_dtype = np.dtype(out_dtype)
    native = np.asarray(fn(xs, pref))
    assert native.dtype == out_dtype, (native.dtype, out_dtype)
    if not is_float(out_dtype):
        return native
    wide = [np.asarray(x).astype(np.float64) for x in xs]
    ref64 = np.asarray(fn(wide, np.float64 if pref is not None else None), dtype=np.float64)
    ref = ref64.astype(out_dtype)
    finite = np.isfinite(ref64)
    scale = max(1.0, float(np.max(np.abs(ref64[finite]), initial=0)))
    tol = NATIVE_TOL[out_dtype]
    n64 = native.astype(np.float64)
    assert np.array_equal(np.isnan(n64), np.isnan(ref64)), "NaN positions differ"
    np.testing.assert_allclose(n64[finite], ref64[finite], rtol=tol, atol=tol * scale)
    return ref


def vals(shape, dt, lo=-3.0, hi=3.0):
    return sample(shape, dt, r, lo, hi)


# ---- dot_general ----
DOT_CONFIGS = [  # name, lhs shape, rhs shape, lc, rc, lb, rb
    ("mm", (3, 4), (4, 5), [1], [0], [], []),
    ("mm_abt", (3, 4), (5, 4), [1], [1], [], []),
    ("mm_atb", (4, 3), (4, 5), [0], [0], [], []),
    ("batched", (2, 3, 4), (2, 4, 5), [2], [1], [0], [0]),
    ("batch_inner", (3, 2, 4), (4, 5, 2), [2], [0], [1], [2]),
    ("two_batch", (2, 3, 4, 5), (3, 2, 5, 6), [3], [2], [0, 1], [1, 0]),
    ("multi_contract", (2, 3, 4), (3, 4, 5), [1, 2], [0, 1], [], []),
    ("multi_contract_perm", (2, 3, 4), (4, 3), [2, 1], [0, 1], [], []),
    ("outer", (3,), (4,), [], [], [], []),
    ("outer_2d", (2, 3), (4,), [], [], [], []),
    ("scalars", (), (), [], [], [], []),
    ("vec_dot", (5,), (5,), [0], [0], [], []),
    ("scalar_vec", (), (3,), [], [], [], []),
    ("empty_m", (0, 4), (4, 3), [1], [0], [], []),
    ("empty_k", (3, 0), (0, 2), [1], [0], [], []),
    ("empty_batch", (0, 2, 3), (0, 3, 2), [2], [1], [0], [0]),
    ("size1", (1, 4), (4, 1), [1], [0], [], []),
]

for name, ls, rs, lc, rc, lb, rb in DOT_CONFIGS:
    dts = ALL if name in ("mm", "batched", "multi_contract", "outer", "empty_k") else [np.float32, np.int32, bfloat16]
    for dt in dts:
        a, b = vals(ls, dt), vals(rs, dt)

        def fn(xs, pref, lc=lc, rc=rc, lb=lb, rb=rb):
            return lax.dot_general(xs[0], xs[1], ((lc, rc), (lb, rb)), preferred_element_type=pref)

        want = reference(fn, [a, b], a.dtype)
        case("dot_general", [a, b], [want], id=f"dot_{name}_{np.dtype(dt).name}",
                 lc=lc, rc=rc, lb=lb, rb=rb)

# negative axes (a jx extension: they count from the end)
a, b = vals((2, 3, 4), np.float32), vals((2, 4, 5), np.float32)
case("dot_general", [a, b],
         [reference(lambda xs, p: lax.dot_general(xs[0], xs[1], (([2], [1]), ([0], [0]))), [a, b], F32)],
         id="dot_negative_axes", lc=[-1], rc=[-2], lb=[-3], rb=[0])

# integer wrap-around at every width
for dt, lo, hi in [(np.int8, -128, 127), (np.uint8, 0, 255), (np.int32, -2**30, 2**30),
                   (np.int64, -2**62, 2**62)]:
    a = r.integers(lo, hi, (3, 6), endpoint=True).astype(dt)
    b = r.integers(lo, hi, (6, 2), endpoint=True).astype(dt)
    want = lax.dot_general(a, b, (([1], [0]), ([], [])))
    case("dot_general", [a, b], [want], id=f"dot_wrap_{np.dtype(dt).name}",
             lc=[1], rc=[0], lb=[], rb=[])

# NaN and inf: 0 * inf and inf - inf give NaN, as XLA
a = np.array([[1, np.inf, 2], [0, 1, np.nan], [1, 2, 3]], np.float32)
b = np.array([[0, 1], [1, 0], [2, -np.inf]], np.float32)
case("dot_general", [a, b],
         [reference(lambda xs, p: lax.dot_general(xs[0], xs[1], (([1], [0]), ([], []))), [a, b], F32)],
         id="dot_nan_inf_f32", lc=[1], rc=[0], lb=[], rb=[])

# larger f32/f64 matmuls (the blocked kernel's tails: 13 rows, 21 columns)
for dt in [np.float32, np.float64, bfloat16, np.float16]:
    a, b = vals((13, 17), dt), vals((17, 21), dt)
    case("dot_general", [a, b],
             [reference(lambda xs, p: lax.dot_general(xs[0], xs[1], (([1], [0]), ([], []))), [a, b], dt)],
             id=f"dot_mm_13x17x21_{np.dtype(dt).name}", lc=[1], rc=[0], lb=[], rb=[])

# preferred_element_type


def narrow_pref(dt, pt):
    """Whether grad mode cannot check a case: it widens float operands to f64, but
    a preferred type narrower than f64 keeps the output (and the cotangent input of
    the VJP checked at second order) narrow, so finite differences through it are
    only that type's precision while check_grads's tolerance follows the f64
    results. tests/unit/test_contract_ad.c checks these gradients against JAX."""
    return is_float(dt) and np.dtype(pt) in (F16, BF16, F32)


PREFS = [(bfloat16, np.float32), (np.float16, np.float32), (np.int8, np.int32), (np.uint8, np.uint32),
         (np.int32, np.int64), (np.bool_, np.int32), (np.bool_, np.float32), (np.int8, np.float32),
         (np.float32, np.float64), (bfloat16, bfloat16)]
for dt, pt in PREFS:
    for name, ls, rs, lc, rc, lb, rb in [DOT_CONFIGS[0], DOT_CONFIGS[3]]:
        if np.dtype(dt).kind in "iu":  # overflow the narrow type on purpose
            info = np.iinfo(dt)
            a = r.integers(max(info.min, -120), min(info.max, 120), ls, endpoint=True).astype(dt)
            b = r.integers(max(info.min, -120), min(info.max, 120), rs, endpoint=True).astype(dt)
        else:
            a, b = vals(ls, dt), vals(rs, dt)

        def fn(xs, pref, lc=lc, rc=rc, lb=lb, rb=rb):
            return lax.dot_general(xs[0], xs[1], ((lc, rc), (lb, rb)), preferred_element_type=pref)

        want = reference(fn, [a, b], pt, pref=pt)
        nograd = {"nograd": 1} if narrow_pref(dt, pt) else {}
        case("dot_general", [a, b], [want],
                 id=f"dot_pref_{name}_{np.dtype(dt).name}_{np.dtype(pt).name}",
                 lc=lc, rc=rc, lb=lb, rb=rb, pref=np.dtype(pt), **nograd)

# ---- matmul (NumPy rules, JAX promotion) ----
MATMULS = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
           ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 5)),
           ((4,), (2, 4, 5)), ((2, 3, 4), (4,)), ((2, 3, 0), (0, 5)), ((0, 3, 4), (4, 2)),
           ((2, 2, 3), (1, 3, 2))]
for ls, rs in MATMULS:
    for dt in [np.float32, np.int32]:
        a, b = vals(ls, dt), vals(rs, dt)
        want = reference(lambda xs, p: jnp.matmul(xs[0], xs[1]), [a, b], dt)
        case("matmul", [a, b], [want],
                 id=f"matmul_{'x'.join(map(str, ls))}_{'x'.join(map(str, rs))}_{np.dtype(dt).name}")
for da, db in [(np.int32, np.float32), (np.bool_, np.bool_), (bfloat16, np.float32),
               (np.int8, np.uint8), (bfloat16, bfloat16), (np.float16, np.float16),
               (np.int8, np.int8), (np.float64, np.float32)]:
    a, b = vals((2, 3, 4), da), vals((4, 3), db)
    out = jnp.matmul(a, b).dtype
    want = reference(lambda xs, p: jnp.matmul(xs[0], xs[1]), [a, b], out)
    case("matmul", [a, b], [want], id=f"matmul_mixed_{np.dtype(da).name}_{np.dtype(db).name}")

# ---- einsum ----
EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ijk->", [(2, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ij,j->i", [(3, 4), (4,)]),
    ("iii->i", [(3, 3, 3)]),
    ("iij->j", [(3, 3, 4)]),
    ("iji->j", [(3, 4, 3)]),
    ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]),
    ("bA,Ab", [(2, 3), (3, 2)]),
    ("ab,cd->abcd", [(2, 3), (2, 2)]),
    ("...i,...i->...", [(2, 3, 4), (3, 4)]),
    ("i...->...", [(3, 2, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("...", [(2, 3)]),
    ("...ij", [(2, 3, 4)]),
    ("...,...", [(2, 3), (3,)]),
    (",->", [(), ()]),
    ("i,->i", [(3,), ()]),
    ("ij,jk->ik", [(2, 1), (3, 4)]),  # size-1 label broadcasts (opt_einsum)
    ("ij,kj->ikj", [(2, 3), (4, 3)]),
    ("abc,cba->b", [(2, 3, 4), (4, 3, 2)]),
    ("ij,jk,kl,lm->mi", [(2, 3), (3, 2), (2, 4), (4, 2)]),
    ("i,i,i->i", [(4,), (4,), (4,)]),
    ("ij,jk->ik", [(0, 3), (3, 4)]),
    ("ij,jk->", [(2, 0), (0, 4)]),
    ("i...j,j...->i...", [(2, 3, 4), (4, 3)]),
]
for k, (spec, shapes) in enumerate(EINSUMS):
    for dt in [np.float32]:
        xs = [vals(s, dt) for s in shapes]
        want = reference(lambda xs, p, spec=spec: jnp.einsum(spec, *xs), xs, dt)
        case("einsum", xs, [want], id=f"einsum_{k}_{np.dtype(dt).name}", spec=spec)
for spec, shapes in [EINSUMS[0], EINSUMS[2], EINSUMS[7], EINSUMS[10], EINSUMS[12], EINSUMS[19]]:
    for dt in [np.int8, np.int64, np.uint8, np.bool_, bfloat16, np.float16, np.float64]:
        xs = [vals(s, dt) for s in shapes]
        want = reference(lambda xs, p, spec=spec: jnp.einsum(spec, *xs), xs, dt)
        tol = {F16: 1e-2, BF16: 4e-2}.get(np.dtype(dt)) if len(xs) > 2 else None
        case("einsum", xs, [want], id=f"einsum_{spec.replace(',', '_').replace('->', '_to_')}"
             f"_{np.dtype(dt).name}", spec=spec, **({"rtol": tol, "atol": tol} if tol else {}))
# mixed dtypes promote like jnp
for da, db in [(np.int8, np.float32), (bfloat16, np.float16), (np.int32, np.uint8)]:
    xs = [vals((3, 4), da), vals((4, 2), db)]
    out = jnp.einsum("ij,jk->ik", *xs).dtype
    want = reference(lambda xs, p: jnp.einsum("ij,jk->ik", *xs), xs, out)
    case("einsum", xs, [want], id=f"einsum_mixed_{np.dtype(da).name}_{np.dtype(db).name}",
             spec="ij,jk->ik")

# ---- convolutions ----


def conv_case(name, x, w, strides, pads, layout, lhs_dil=None, rhs_dil=None, groups=1,
              batch_groups=1, pref=None, tol=None):
    """A conv case; uses the public op unless the primitive's extras are needed."""
    dn = lax.conv_dimension_numbers(x.shape, w.shape, tuple(layout.split(",")))
    nsp = x.ndim - 2

    def fn(xs, p):
        return lax.conv_general_dilated(
            xs[0], xs[1], strides or (1,) * nsp, pads or [(0, 0)] * nsp, lhs_dilation=lhs_dil,
            rhs_dilation=rhs_dil, dimension_numbers=dn, feature_group_count=groups,
            batch_group_count=batch_groups, preferred_element_type=p)

    out_dt = np.dtype(pref) if pref is not None else x.dtype
    want = reference(fn, [x, w], out_dt, pref=pref)
    lo = [p[0] for p in pads] if pads else []
    hi = [p[1] for p in pads] if pads else []
    extra = {"rtol": tol, "atol": tol} if tol else {}
    if batch_groups > 1 or pref is not None:
        case("conv_prim", [x, w], [want], id=name, strides=list(strides or []), pad_lo=lo,
                 pad_hi=hi, lhs_dil=list(lhs_dil or []), rhs_dil=list(rhs_dil or []),
                 lhs_spec=list(dn.lhs_spec), rhs_spec=list(dn.rhs_spec),
                 out_spec=list(dn.out_spec), groups=groups, batch_groups=batch_groups,
                 **({"pref": out_dt} if pref is not None else {}),
                 **({"nograd": 1} if pref is not None and narrow_pref(x.dtype, pref) else {}),
                 **extra)
    elif lhs_dil or rhs_dil or groups > 1:
        case("conv_general_dilated", [x, w], [want], id=name, strides=list(strides or []),
                 pad_lo=lo, pad_hi=hi, lhs_dil=list(lhs_dil or []), rhs_dil=list(rhs_dil or []),
                 layout=layout, groups=groups, **extra)
    else:
        case("conv", [x, w], [want], id=name, strides=list(strides or []), pad_lo=lo,
                 pad_hi=hi, layout=layout, **extra)


for dt in [np.float16, bfloat16, np.float32, np.float64, np.int32, np.int8]:
    n = np.dtype(dt).name
    # 1-D, NWC
    conv_case(f"conv1d_nwc_{n}", vals((2, 9, 3), dt), vals((3, 3, 4), dt), None, None,
              "NWC,WIO,NWC")
    # 2-D NHWC/HWIO with strides and padding
    conv_case(f"conv2d_nhwc_{n}", vals((2, 6, 7, 3), dt), vals((3, 3, 3, 4), dt), (2, 1),
              [(1, 1), (0, 2)], "NHWC,HWIO,NHWC")
    # 2-D NCHW/OIHW
    conv_case(f"conv2d_nchw_{n}", vals((2, 3, 6, 5), dt), vals((4, 3, 2, 3), dt), (1, 2),
              [(2, 0), (1, 1)], "NCHW,OIHW,NCHW")
for dt in [np.float32, np.float64, bfloat16]:
    n = np.dtype(dt).name
    # 3-D
    conv_case(f"conv3d_ncdhw_{n}", vals((1, 2, 4, 5, 4), dt), vals((3, 2, 2, 3, 2), dt),
              (1, 2, 1), [(0, 1), (1, 0), (1, 1)], "NCDHW,OIDHW,NCDHW")
    conv_case(f"conv3d_ndhwc_{n}", vals((2, 4, 3, 5, 2), dt), vals((2, 2, 3, 2, 3), dt),
              (2, 1, 2), [(1, 1), (0, 0), (2, 1)], "NDHWC,DHWIO,NDHWC")
    # negative padding crops
    conv_case(f"conv2d_negpad_{n}", vals((1, 7, 6, 2), dt), vals((2, 2, 2, 3), dt), (1, 1),
              [(-1, 0), (1, -2)], "NHWC,HWIO,NHWC")
    # lhs and rhs dilation
    conv_case(f"conv2d_dil_{n}", vals((2, 5, 4, 2), dt), vals((3, 2, 2, 3), dt), (1, 2),
              [(1, 2), (0, 1)], "NHWC,HWIO,NHWC", lhs_dil=(2, 1), rhs_dil=(1, 2))
    conv_case(f"conv1d_lhsdil_stride_{n}", vals((1, 2, 6), dt), vals((3, 2, 3), dt), (3,),
              [(2, 2)], "NCW,OIW,NCW", lhs_dil=(3,))
    # feature groups: depthwise (G = C) and G = 2
    conv_case(f"conv2d_depthwise_{n}", vals((2, 5, 5, 4), dt), vals((3, 3, 1, 8), dt), (1, 1),
              [(1, 1), (1, 1)], "NHWC,HWIO,NHWC", groups=4)
    conv_case(f"conv2d_groups2_{n}", vals((1, 4, 5, 5), dt), vals((6, 2, 2, 2), dt), (1, 1),
              [(0, 0), (0, 0)], "NCHW,OIHW,NCHW", groups=2)
    # batch groups (the primitive; the public op has no batch_group_count)
    conv_case(f"conv2d_batchgroups_{n}", vals((4, 2, 4, 3), dt), vals((6, 2, 2, 2), dt),
              (1, 1), [(0, 0), (1, 0)], "NCHW,OIHW,NCHW", batch_groups=2)
# mixed layouts and spatial letters matched by letter (strides follow the kernel's order)
conv_case("conv2d_mixed_layout", vals((2, 3, 6, 5), np.float32), vals((4, 3, 2, 3), np.float32),
          (1, 2), [(0, 1), (1, 0)], "NCHW,OIHW,NHWC")
conv_case("conv2d_letters", vals((2, 5, 6, 3), np.float32), vals((2, 3, 3, 4), np.float32),
          (2, 1), [(1, 0), (0, 1)], "NWHC,HWIO,NCWH")
conv_case("conv2d_kernel_first", vals((2, 6, 5, 3), np.float32), vals((4, 2, 3, 3), np.float32),
          (1, 1), [(0, 0), (0, 0)], "NHWC,OHWI,NHWC")
# empty results: a window larger than the input, an empty batch
conv_case("conv2d_window_too_big", vals((1, 2, 2, 1), np.float32), vals((3, 3, 1, 2), np.float32),
          (1, 1), [(0, 0), (0, 0)], "NHWC,HWIO,NHWC")
conv_case("conv2d_empty_batch", vals((0, 4, 4, 2), np.float32), vals((2, 2, 2, 3), np.float32),
          (1, 1), [(0, 0), (0, 0)], "NHWC,HWIO,NHWC")
conv_case("conv2d_1x1", vals((2, 3, 3, 5), np.float32), vals((1, 1, 5, 2), np.float32),
          None, None, "NHWC,HWIO,NHWC")
# bool conv (or of ands) and integer wrap
conv_case("conv1d_bool", vals((2, 6, 2), np.bool_), vals((3, 2, 2), np.bool_), None, None,
          "NWC,WIO,NWC")
a8 = r.integers(-128, 127, (1, 8, 4), endpoint=True).astype(np.int8)
w8 = r.integers(-128, 127, (3, 4, 2), endpoint=True).astype(np.int8)
conv_case("conv1d_wrap_int8", a8, w8, None, None, "NWC,WIO,NWC")
# preferred element type through the primitive
conv_case("conv2d_pref_bf16_f32", vals((1, 5, 5, 2), bfloat16), vals((3, 3, 2, 2), bfloat16),
          (1, 1), [(1, 1), (1, 1)], "NHWC,HWIO,NHWC", pref=np.float32)
conv_case("conv2d_pref_i8_i32", a8[:, :, :2].reshape(1, 4, 4, 1).repeat(2, axis=3),
          r.integers(-128, 127, (2, 2, 2, 3), endpoint=True).astype(np.int8), (1, 1),
          [(0, 0), (0, 0)], "NHWC,HWIO,NHWC", pref=np.int32)

fam.write()
