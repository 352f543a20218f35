"""Golden values for jx's GPT (src/nn/gpt.c), checked by tests/unit/test_gpt.c.

A tiny byte-level GPT (2 layers, d_model 32, 4 heads, context 16, vocab 256,
MLP ratio 4, tied head), written below in plain JAX with the math of
src/nn, gives:
  init_<name>.npy   jx_gpt_init's parameters for key 0 (bit for bit),
  p_<name>.npy      fixed weights (the init, with biases and norms moved off
                    their 0/1 starts so that they matter),
  tokens.npy        i32 [4, 17]: inputs are [:, :16], targets [:, 1:],
  logits.npy, loss.npy, g_<name>.npy   forward, mean next-token cross-entropy
                    and its gradient for every parameter at p_,
  adamw_loss.npy    10 steps of optax.adamw(1e-2, 0.9, 0.999, 1e-8, 0.01) from
                    p_ on the same batch: the loss before each step,
  adamw_<name>.npy  a few parameters after the 10 steps.
Parameter names are listed in params.txt (tree order). No cases.txt: the
conformance runner skips this directory.

Run from the repository root:  python3 tests/golden/gen_gpt.py
"""
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import optax

from common import ROOT
from gen_nn import block, norm, xent

jax.config.update("jax_enable_x64", True)

OUT = os.path.join(ROOT, "gpt")
V, L, D, H, CTX, R = 256, 2, 32, 4, 16, 4
EPS = 1e-5
STEPS = 10


def param_list():
    """(name, shape, stddev; 0 zeros, -1 ones) in jx_gpt_init's order."""
    resid = 0.02 / np.sqrt(2.0 * L)
    ps = [("wte", (V, D), 0.02), ("wpe", (CTX, D), 0.02)]
    for i in range(L):
        b = f"blocks.{i}."
        ps += [(b + "ln1.scale", (D,), -1), (b + "ln1.bias", (D,), 0)]
        ps += [(b + "attn." + w, (D, D), resid if w == "wo" else 0.02)
               for w in ("wq", "wk", "wv", "wo")]
        ps += [(b + "attn." + w, (D,), 0) for w in ("bq", "bk", "bv", "bo")]
        ps += [(b + "ln2.scale", (D,), -1), (b + "ln2.bias", (D,), 0)]
        ps += [(b + "mlp.fc.w", (D, R * D), 0.02), (b + "mlp.fc.b", (R * D,), 0),
               (b + "mlp.proj.w", (R * D, D), resid), (b + "mlp.proj.b", (D,), 0)]
    ps += [("ln_f.scale", (D,), -1), ("ln_f.bias", (D,), 0)]
    return ps


def init(key):
    ps = param_list()
    keys = jax.random.split(key, len(ps))
    out = {}
    for (name, shape, sd), k in zip(ps, keys):
        if sd > 0:
            out[name] = jax.nn.initializers.normal(sd)(k, shape, jnp.float32)
        else:
            out[name] = jnp.full(shape, 1.0 if sd < 0 else 0.0, jnp.float32)
    return out


def forward(p, tokens):
    T = tokens.shape[1]
    h = jnp.take(p["wte"], tokens, axis=0) + p["wpe"][:T]
    for i in range(L):
        pre = f"blocks.{i}."
        h = block(p, h, H, EPS, pre)
    h = norm(p, h, EPS, False, "ln_f.")
    return jax.lax.dot_general(h, p["wte"], (((2,), (1,)), ((), ())))


def loss_fn(p, tokens, targets):
    return jnp.mean(xent(forward(p, tokens), targets, 0.0))


def save(name, a):
    np.save(os.path.join(OUT, name + ".npy"), np.asarray(a))


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    p0 = init(jax.random.key(0))
    rng = np.random.default_rng(11)
    p = {}
    for name, a in p0.items():
        a = np.asarray(a)
        if name.endswith((".scale",)):
            a = a + rng.standard_normal(a.shape).astype(np.float32) * 0.1
        elif a.ndim == 1:
            a = a + rng.standard_normal(a.shape).astype(np.float32) * 0.02
        p[name] = jnp.asarray(a, jnp.float32)
    tokens = rng.integers(0, V, (4, CTX + 1)).astype(np.int32)
    x, y = jnp.asarray(tokens[:, :-1]), jnp.asarray(tokens[:, 1:])
    with open(os.path.join(OUT, "params.txt"), "w") as f:
        for name, _, _ in param_list():
            f.write(name + "\n")
            save("init_" + name, p0[name])
            save("p_" + name, p[name])
    save("tokens", tokens)
    save("logits", forward(p, x))
    loss, g = jax.value_and_grad(loss_fn)(p, x, y)
    save("loss", np.float32(loss))
    for name in p:
        save("g_" + name, g[name])
    opt = optax.adamw(1e-2, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01)
    state = opt.init(p)
    losses = []
    step = jax.jit(jax.value_and_grad(loss_fn))
    for _ in range(STEPS):
        l, gr = step(p, x, y)
        losses.append(l)
        upd, state = opt.update(gr, state, p)
        p = optax.apply_updates(p, upd)
    save("adamw_loss", np.asarray(losses, np.float32))
    for name in ("wte", "blocks.1.attn.wq", "blocks.1.mlp.proj.b", "ln_f.scale"):
        save("adamw_" + name, p[name])


if __name__ == "__main__":
    main()
