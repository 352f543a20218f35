"""Values and gradients at kinks and special points, from JAX in its default
(32-bit) mode: where a function is not differentiable JAX still defines a
derivative (maximum splits a tie 0.5/0.5, relu gives 0 at 0, softplus is
logaddexp(x, 0) with derivative sigmoid, ...), and jx must give the same.

Each case <name> is a function of float32 inputs; the files are
<name>.in<i>.npy (inputs), <name>.out<k>.npy (outputs) and <name>.grad<i>.npy
(the gradient of the sum of output 0 with respect to input i). Functions that
permute (sort, top_k, cumulative max) weight their output by arange first, so
that the gradient says where each value came from. tests/unit/test_kinks.c
builds the same functions with jx and compares. No cases.txt: these are not
conformance cases (numerical derivatives disagree with both at a kink).

Run from the repository root: python3 tests/golden/gen_kinks.py
"""
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np

assert not jax.config.jax_enable_x64, "the kink goldens are JAX's default (32-bit) mode"

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "kinks")
INF, NAN = np.inf, np.nan
cases = []


def f32(*v):
    return np.array(v, np.float32)


def case(name, fn, *inputs, grad=True):
    """fn: inputs -> an array or a tuple of arrays; the gradient is of sum(out[0])."""
    inputs = [np.asarray(x) for x in inputs]
    outs = fn(*inputs)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    grads = []
    if grad:
        def loss(*a):
            o = fn(*a)
            return jnp.sum(o[0] if isinstance(o, tuple) else o)
        grads = list(jax.grad(loss, argnums=tuple(range(len(inputs))))(*inputs))
    cases.append((name, inputs, outs, grads))


EDGES = f32(-INF, -100, -1, -0.0, 0, 1, 100, INF, NAN)
case("softplus", jax.nn.softplus, EDGES)
case("log_sigmoid", jax.nn.log_sigmoid, EDGES)
case("relu", jax.nn.relu, EDGES)
case("relu6", jax.nn.relu6, f32(-1, 0, 3, 6, 7, NAN))
case("abs", jnp.abs, EDGES)
case("sign", jnp.sign, EDGES)
case("sigmoid", jax.nn.sigmoid, EDGES)


def derivative(f):
    """x -> f'(x) elementwise: its gradient is the second derivative."""
    return jax.grad(lambda v: jnp.sum(f(v)))


# second order: a custom derivative's own derivative (softplus'' = sigmoid')
SMOOTH = f32(-INF, -1, 0, 1, INF)
case("softplus_d1", derivative(jax.nn.softplus), SMOOTH)
case("log_sigmoid_d1", derivative(jax.nn.log_sigmoid), SMOOTH)
case("relu_d1", derivative(jax.nn.relu), f32(-1, 0, 1))
case("relu6_d1", derivative(jax.nn.relu6), f32(-1, 0, 3, 6, 7))
case("abs_d1", derivative(jnp.abs), f32(-1, 0, 1))
case("silu", jax.nn.silu, f32(-1, 0, 1))
case("gelu", jax.nn.gelu, f32(-1, 0, 1))

# ties split their derivative in half; a NaN wins and takes it all
TIE_A, TIE_B = f32(-1, 0, 1, 2, NAN, 3), f32(0, 0, 0, 2, 1, NAN)
case("maximum", jnp.maximum, TIE_A, TIE_B)
case("minimum", jnp.minimum, TIE_A, TIE_B)
case("max_reduce", lambda x: jnp.max(x, axis=1), np.array([[1, 3, 3, 2], [5, 5, 5, 5]], np.float32))
case("min_reduce", lambda x: jnp.min(x, axis=1), np.array([[2, 1, 1, 3], [-1, 0, -1, 0]], np.float32))
case("clip", lambda x: jnp.clip(x, -1.0, 1.0), f32(-2, -1, 0, 1, 2))
case("clamp", jax.lax.clamp, f32(-1, -1, -1, -1, -1), f32(-2, -1, 0, 1, 2), f32(1, 1, 1, 1, 1))
case("cummax", lambda x: jax.lax.cummax(x) * jnp.arange(4.0), f32(1, 3, 3, 2))
case("cummin", lambda x: jax.lax.cummin(x) * jnp.arange(4.0), f32(3, 1, 1, 2))
# a window's ties: the first maximum takes the whole derivative
case("max_pool", lambda x: jax.lax.reduce_window(x, -np.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                                   "VALID"),
     np.array([[1, 3, 3, 2], [5, 5, 5, 5]], np.float32).reshape(1, 2, 4, 1))

# products through zeros: no division by the zero
case("prod", lambda x: jnp.prod(x, axis=1), np.array([[2, 0, 3], [2, 0, 0], [2, 4, 3]], np.float32))
case("cumprod", lambda x: jnp.cumprod(x) * jnp.arange(3.0), f32(2, 0, 3))
# the spread of a constant: var's derivative is 0, std's is 0 * inf
case("var", jnp.var, f32(2, 2, 2))
case("std", jnp.std, f32(2, 2, 2))

# -inf entries: logsumexp of a row that is all -inf is -inf with NaN gradients
LSE_IN = np.array([[-INF, 0, 1], [-INF, -INF, -INF], [2, 2, 2]], np.float32)
case("logsumexp", lambda x: jax.nn.logsumexp(x, axis=1), LSE_IN)
case("softmax", lambda x: jax.nn.softmax(x, axis=1) * jnp.arange(3.0), LSE_IN[[0, 2]])
case("log_softmax", lambda x: jax.nn.log_softmax(x, axis=1) * jnp.arange(3.0), LSE_IN[[0, 2]])

# at 0: infinite derivatives, 0 ** 0, and 0 * inf in the unselected branch
case("sqrt", jnp.sqrt, f32(0, 1, 4))
case("rsqrt", jax.lax.rsqrt, f32(0, 1, 4))
case("pow", jnp.power, f32(0, 0, 0, 0.0, 2, -2, 2), f32(0, 1, 2, 0.5, 0, 2, -1))
case("where_sqrt", lambda x: jnp.where(x > 0, jnp.sqrt(x), 0.0), f32(-1, 0, 4))
case("where_log", lambda x: jnp.where(x > 0, jnp.log(x), 0.0), f32(-1, 0, 4))
case("norm", jnp.linalg.norm, f32(0, 0, 0))
case("norm_nonzero", jnp.linalg.norm, f32(3, 0, 4))

# ties: stable order, the lower index first
case("sort", lambda x: jnp.sort(x) * jnp.arange(5.0), f32(2, 1, 2, 1, 2))
case("top_k", lambda x: (jax.lax.top_k(x, 3)[0] * jnp.arange(3.0), jax.lax.top_k(x, 3)[1]),
     f32(2, 1, 2, 1, 2))
case("argmax", lambda x: jnp.argmax(x, axis=1).astype(jnp.int32),
     np.array([[1, 3, 3], [1, NAN, 3], [NAN, NAN, 0]], np.float32), grad=False)
case("argmin", lambda x: jnp.argmin(x, axis=1).astype(jnp.int32),
     np.array([[3, 1, 1], [1, NAN, 0], [2, 2, 2]], np.float32), grad=False)

if os.path.isdir(DIR):
    shutil.rmtree(DIR)
os.makedirs(DIR)
for name, ins, outs, grads in cases:
    for kind, arrays in (("in", ins), ("out", outs), ("grad", grads)):
        for i, a in enumerate(arrays):
            np.save(os.path.join(DIR, f"{name}.{kind}{i}.npy"), np.asarray(a))
print(f"kinks: {len(cases)} cases -> {DIR}")
