"""Golden values for mixed precision (bf16 compute, f32 master weights and
optimizer state), checked by tests/unit/test_mixed_precision.c.

The model and its inputs are tests/golden/gen_gpt.py's tiny GPT (2 layers,
d_model 32, 4 heads, context 16, byte vocabulary): the weights p_<name>.npy
and tokens.npy of tests/golden/data/gpt/ (run gen_gpt.py first). The recipe
is jmp's / Flax's dtype=bf16, param_dtype=f32:

  params stay f32; inside the loss they are cast with .astype(bfloat16);
  activations and matmuls are bf16; layer-norm statistics and the attention
  softmax run in f32 (gen_nn.norm / gen_nn.attention); the bf16 logits are
  cast to f32 for the cross-entropy and its mean; the gradient comes back
  through the casts as f32 and optax.adamw updates the f32 parameters with
  its f32 moments. No loss scaling: bf16 has f32's exponent range.

XLA may keep fused bf16 elementwise chains in f32 between ops
(--xla_allow_excess_precision); it is switched off here so that every bf16
op rounds its result, as jx does.

Writes tests/golden/data/mixed_precision/:
  loss.npy             f32 scalar, the bf16-compute loss at p_,
  g_<name>.npy         f32, its gradient for every parameter,
  adamw_loss.npy       f32[5], the loss before each of 5 steps of
                       optax.adamw(1e-2, 0.9, 0.999, 1e-8, 0.01) from p_,
  adamw_<name>.npy     a few parameters after the 5 steps,
  f32_adamw_loss.npy   the same 5 steps computed in f32 (for reference).
No cases.txt: the conformance runner skips this directory.

Run from the repository root:  python3 tests/golden/gen_mixed_precision.py
"""
import os
import shutil

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_allow_excess_precision=false").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from common import ROOT  # noqa: E402
from gen_gpt import forward, param_list  # noqa: E402
from gen_nn import xent  # noqa: E402

GPT = os.path.join(ROOT, "gpt")
OUT = os.path.join(ROOT, "mixed_precision")
STEPS = 5
KEPT = ("wte", "blocks.0.attn.wq", "blocks.1.mlp.fc.w", "blocks.1.mlp.proj.b", "ln_f.scale")


def loss_bf16(p, tokens, targets):
    pc = jax.tree.map(lambda a: a.astype(jnp.bfloat16), p)
    logits = forward(pc, tokens)
    return jnp.mean(xent(logits.astype(jnp.float32), targets, 0.0))


def loss_f32(p, tokens, targets):
    return jnp.mean(xent(forward(p, tokens), targets, 0.0))


def trajectory(loss, p, x, y):
    opt = optax.adamw(1e-2, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01)
    state = opt.init(p)
    step = jax.jit(jax.value_and_grad(loss))
    losses = []
    for _ in range(STEPS):
        l, g = step(p, x, y)
        losses.append(l)
        upd, state = opt.update(g, state, p)
        p = optax.apply_updates(p, upd)
    for leaf in jax.tree.leaves((p, state)):
        assert leaf.dtype in (jnp.float32, jnp.int32), leaf.dtype  # master copies stay f32
    return np.asarray(losses, np.float32), p


def save(name, a):
    np.save(os.path.join(OUT, name + ".npy"), np.asarray(a))


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    names = [n for n, _, _ in param_list()]
    p = {n: jnp.asarray(np.load(os.path.join(GPT, f"p_{n}.npy"))) for n in names}
    tokens = np.load(os.path.join(GPT, "tokens.npy"))
    x, y = jnp.asarray(tokens[:, :-1]), jnp.asarray(tokens[:, 1:])
    loss, g = jax.jit(jax.value_and_grad(loss_bf16))(p, x, y)
    assert loss.dtype == jnp.float32
    save("loss", np.float32(loss))
    for n in names:
        assert g[n].dtype == jnp.float32
        save("g_" + n, g[n])
    losses, p5 = trajectory(loss_bf16, p, x, y)
    save("adamw_loss", losses)
    for n in KEPT:
        save("adamw_" + n, p5[n])
    save("f32_adamw_loss", trajectory(loss_f32, p, x, y)[0])


if __name__ == "__main__":
    main()
