"""Golden gradients of a Megatron-style MLP taken inside jax.shard_map
(tests/unit/test_shard_map_grad.c).

On a (data=2, model=2) mesh of 4 CPU devices, with JAX's default
check_vma=True, the body computes

  h = tanh(x @ w1)                 x: [B, D] split over data, w1: [D, H] over model
  y = psum(h @ w2, 'model')        w2: [H, D] split over model
  loss = psum(sum(y * y * c), 'data')   c: [D] replicated

and takes jax.grad(loss) with respect to (x, w1, w2, c) inside the body; the
gradients leave the shard_map laid out as their inputs. JAX's answer is the
gradient of the global loss (no overcount through psum).

Writes tests/golden/data/shard_map_grad/ (float64): x, w1, w2, c and the
gradients dx, dw1, dw2, dc, plus the same loss's gradients with
check_vma=False (dw1_unchecked, ...), which JAX scales by the psums' sizes.
Run from the repository root:  python3 tests/golden/gen_shard_map_grad.py
"""
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

jax.config.update("jax_enable_x64", True)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "shard_map_grad")
B, D, H = 4, 3, 6


def body(x, w1, w2, c):
    def loss(x, w1, w2, c):
        h = jnp.tanh(x @ w1)
        y = jax.lax.psum(h @ w2, "model")
        return jax.lax.psum(jnp.sum(y * y * c), "data")

    return jax.grad(loss, argnums=(0, 1, 2, 3))(x, w1, w2, c)


def grads(check_vma):
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))
    specs = (P("data"), P(None, "model"), P("model"), P())
    f = jax.shard_map(body, mesh=mesh, in_specs=specs, out_specs=specs, check_vma=check_vma)
    return [np.asarray(g) for g in jax.jit(f)(*INPUTS)]


rng = np.random.default_rng(18)
INPUTS = [rng.uniform(-1, 1, s) for s in ((B, D), (D, H), (H, D), (D,))]

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, a in zip(("x", "w1", "w2", "c"), INPUTS):
        np.save(os.path.join(OUT, name + ".npy"), a)
    for name, g in zip(("dx", "dw1", "dw2", "dc"), grads(True)):
        np.save(os.path.join(OUT, name + ".npy"), g)
    for name, g in zip(("dx", "dw1", "dw2", "dc"), grads(False)):
        np.save(os.path.join(OUT, name + "_unchecked.npy"), g)
