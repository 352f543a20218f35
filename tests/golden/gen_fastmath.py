"""f32 tanh as jax.jit computes it on the CPU, for tests/unit/test_fastmath.c,
which asserts that jx's tanh (eager and jitted) gives these bits exactly:
XLA's rational form, which fastmath.h's jx_tanhf evaluates in the same order
with the same fused multiply-adds.

Inputs: the special values, the thresholds (0.0004, the clamp at
7.99881172), every exponent's patterns and dense samples over [-10, 10].
Files: data/fastmath/tanh.in.npy and tanh.out.npy (f32).

Run from the repository root: python3 tests/golden/gen_fastmath.py
"""
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np

assert not jax.config.jax_enable_x64, "the goldens are JAX's default (32-bit) mode"

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "fastmath")

rng = np.random.default_rng(27)
special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38,
                    0.0004, np.nextafter(np.float32(0.0004), np.float32(0)),
                    7.99881172180175781, 8.0, 9.0, 20.0, 1.0, -1.0, 0.5, 0.625],
                   np.float32)
patterns = rng.integers(0, 1 << 32, size=4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
dense = rng.uniform(-10, 10, size=8192).astype(np.float32)
near_zero = (rng.uniform(-1, 1, size=2048) * 10.0 ** rng.uniform(-6, 0, size=2048)).astype(np.float32)
x = np.concatenate([special, -special, patterns, dense, near_zero]).astype(np.float32)
y = np.asarray(jax.jit(jnp.tanh)(x))

shutil.rmtree(DIR, ignore_errors=True)
os.makedirs(DIR)
np.save(os.path.join(DIR, "tanh.in.npy"), x)
np.save(os.path.join(DIR, "tanh.out.npy"), y)
print(f"{DIR}: {x.size} values, jax {jax.__version__}")
