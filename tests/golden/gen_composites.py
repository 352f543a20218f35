"""Golden cases for composite functions under JAX's transformations: an MLP's
softmax cross-entropy loss (value_and_grad), layer norm (jvp and vjp), causal
multi-head attention (grad), a scan-based RNN (grad), per-example gradients
(vmap of grad), a Hessian, and a checkpointed MLP. The C adapters in
tests/conformance/ops_composites.c build the same functions with jx.

Run from the repository root: python3 tests/golden/gen_composites.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Family, rng  # noqa: E402

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

fam = Family("composites")
# f64 results go through different summation orders than XLA's: 1e-12, not 1e-15
F64 = {"rtol": 1e-12, "atol": 1e-12}
r = rng(7)


def normal(*shape, dtype=np.float64, scale=1.0):
    return (r.standard_normal(shape) * scale).astype(dtype)


# ---- MLP: loss = mean softmax cross-entropy of tanh MLP ----
def mlp_loss(w1, b1, w2, b2, x, y):
    h = jnp.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits, axis=1), axis=1))


for dt, tol in ((np.float64, F64), (np.float32, {"rtol": 2e-5, "atol": 2e-6})):
    args = [normal(4, 8, dtype=dt, scale=0.5), normal(8, dtype=dt, scale=0.1),
            normal(8, 3, dtype=dt, scale=0.5), normal(3, dtype=dt, scale=0.1), normal(5, 4, dtype=dt),
            np.eye(3, dtype=dt)[r.integers(0, 3, 5)]]
    v, g = jax.value_and_grad(mlp_loss, argnums=(0, 1, 2, 3))(*args)
    fam.case("mlp_value_and_grad", args, [v, *g], id=f"mlp_{np.dtype(dt).name}", **tol)
    ck = jax.grad(jax.checkpoint(mlp_loss), argnums=(0, 1, 2, 3))(*args)
    fam.case("mlp_checkpoint_grad", args, list(ck), id=f"mlp_ckpt_{np.dtype(dt).name}", **tol)


# ---- layer norm: jvp and vjp ----
def layer_norm(x, gamma, beta):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5) * gamma + beta


x, g, b = normal(4, 6), normal(6), normal(6)
tx, tg, tb = normal(4, 6), normal(6), normal(6)
y, ty = jax.jvp(layer_norm, (x, g, b), (tx, tg, tb))
fam.case("layer_norm_jvp", [x, g, b, tx, tg, tb], [y, ty], id="layer_norm_jvp", **F64)
ct = normal(4, 6)
_, vjp = jax.vjp(layer_norm, x, g, b)
fam.case("layer_norm_vjp", [x, g, b, ct], list(vjp(ct)), id="layer_norm_vjp", **F64)


# ---- causal multi-head self-attention ----
def attention(x, wq, wk, wv, wo, heads=2):
    t, d = x.shape
    hd = d // heads
    q = (x @ wq).reshape(t, heads, hd).transpose(1, 0, 2)
    k = (x @ wk).reshape(t, heads, hd).transpose(1, 0, 2)
    v = (x @ wv).reshape(t, heads, hd).transpose(1, 0, 2)
    s = jnp.einsum("hqd,hkd->hqk", q, k) / jnp.sqrt(hd)
    mask = jnp.tril(jnp.ones((t, t), dtype=bool))
    s = jnp.where(mask, s, -1e9)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("hqk,hkd->hqd", p, v).transpose(1, 0, 2).reshape(t, d)
    return o @ wo


def attention_loss(x, wq, wk, wv, wo, ct):
    return jnp.sum(attention(x, wq, wk, wv, wo) * ct)


args = [normal(5, 8), normal(8, 8, scale=0.3), normal(8, 8, scale=0.3), normal(8, 8, scale=0.3),
        normal(8, 8, scale=0.3), normal(5, 8)]
out = attention(*args[:5])
grads = jax.grad(attention_loss, argnums=(0, 1, 2, 3, 4))(*args)
fam.case("attention_grad", args, [out, *grads], id="attention", **F64)


# ---- a scan-based RNN ----
def rnn_loss(wh, wx, b, h0, xs):
    def step(h, x):
        h = jnp.tanh(h @ wh + x @ wx + b)
        return h, jnp.sum(h * h)
    h, ys = jax.lax.scan(step, h0, xs)
    return jnp.sum(h) + jnp.sum(ys)


args = [normal(4, 4, scale=0.4), normal(3, 4, scale=0.4), normal(4, scale=0.1), normal(2, 4),
        normal(6, 2, 3)]
v, g = jax.value_and_grad(rnn_loss, argnums=(0, 1, 2, 3, 4))(*args)
fam.case("rnn_value_and_grad", args, [v, *g], id="rnn", **F64)


# ---- per-example gradients ----
def example_loss(w, x, y):
    return (jnp.tanh(x @ w) - y) ** 2


w, xs, ys = normal(3), normal(7, 3), normal(7)
pe = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(w, xs, ys)
fam.case("per_example_grads", [w, xs, ys], [pe], id="per_example", **F64)


# ---- a Hessian ----
def energy(x):
    return jnp.sum(jnp.tanh(x) ** 2 * x) + jnp.prod(x[:2])


x = normal(4)
fam.case("hessian", [x], [jax.hessian(energy)(x)], id="hessian", **F64)

fam.write()
