"""Shared writer for golden files.

Each generator script (gen_<family>.py) makes one directory
tests/golden/data/<family>/ holding cases.txt and the .npy inputs and expected
outputs of every case (see tests/conformance/conformance.h for the format).
Expected values come from JAX or NumPy: JAX's 64-bit mode where a case holds
a 64-bit dtype, JAX's default mode where a case's dtypes depend on the mode
(jax_mode_for); the C suite never needs Python.

Run from the repository root:  python3 tests/golden/gen_<family>.py
"""
import contextlib
import os
import shutil

import numpy as np

try:
    import ml_dtypes
    bfloat16 = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover
    bfloat16 = None

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

JX_NAMES = {
    np.dtype(np.bool_): "bool", np.dtype(np.int8): "i8", np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16", np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64",
    np.dtype(np.float16): "f16", np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
}
if bfloat16 is not None:
    JX_NAMES[np.dtype(bfloat16)] = "bf16"
BY_NAME = {v: k for k, v in JX_NAMES.items()}


def jx_name(dtype):
    """The jx name of a NumPy dtype ('f32', 'bf16', ...)."""
    return JX_NAMES[np.dtype(dtype)]


def fmt(v):
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(fmt(x) for x in v) + "]"
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return jx_name(v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


class Family:
    """Collects cases for one directory; write() replaces the directory."""

    def __init__(self, name):
        self.name = name
        self.dir = os.path.join(ROOT, name)
        self.cases = []
        self.ids = set()

    def case(self, op, inputs, outputs, id=None, **params):
        """Adds a case. inputs/outputs: lists of arrays (NumPy or JAX)."""
        base = id or f"{op}_{len(self.cases)}"
        cid, k = base, 1
        while cid in self.ids:
            cid, k = f"{base}_{k}", k + 1
        self.ids.add(cid)
        ins = [np.asarray(x) for x in inputs]
        outs = [np.asarray(x) for x in outputs]
        kv = " ".join(f"{k}={fmt(v)}" for k, v in params.items())
        self.cases.append((cid, op, kv, ins, outs))
        return cid

    def write(self):
        if os.path.isdir(self.dir):
            shutil.rmtree(self.dir)
        os.makedirs(self.dir)
        with open(os.path.join(self.dir, "cases.txt"), "w") as f:
            f.write(f"# written by tests/golden/gen_{self.name}.py; do not edit\n")
            for cid, op, kv, ins, outs in self.cases:
                f.write(f"{cid} {op} {kv}".rstrip() + "\n")
                for i, x in enumerate(ins):
                    np.save(os.path.join(self.dir, f"{cid}.in{i}.npy"), x)
                for i, x in enumerate(outs):
                    np.save(os.path.join(self.dir, f"{cid}.out{i}.npy"), x)
        print(f"{self.name}: {len(self.cases)} cases -> {self.dir}")


@contextlib.contextmanager
def jax_mode_for(*dtypes):
    """Runs the block in the JAX mode whose results jx's default mode gives for
    operands of these dtypes (jx names or NumPy dtypes): JAX's default mode
    (jax_enable_x64=False) unless one of them is explicitly 64-bit, which only
    x64 JAX can hold."""
    import jax
    wide = any(np.dtype(BY_NAME[d] if isinstance(d, str) else d).itemsize == 8
               for d in dtypes)
    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", wide)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", was)


def rng(seed=0):
    return np.random.default_rng(seed)


def sample(shape, dtype, r, lo=-3.0, hi=3.0):
    """Random values of a jx dtype name or NumPy dtype, in [lo, hi) for floats."""
    dt = BY_NAME[dtype] if isinstance(dtype, str) else np.dtype(dtype)
    if dt == np.bool_:
        return r.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return r.integers(max(info.min, -100), min(info.max, 100), size=shape,
                          endpoint=True).astype(dt)
    return r.uniform(lo, hi, size=shape).astype(dt)


def write_modes(out, run, label):
    """Replaces the directory `out` with what run(mode) writes there for JAX's
    default mode ("x32") and x64 mode ("x64"), and says how many files."""
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for mode in ("x32", "x64"):
        run(mode)
    print(f"{label}: {len(os.listdir(out))} files -> {out}")
