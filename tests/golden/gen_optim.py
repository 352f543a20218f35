"""Golden trajectories of the optimizers (jx/optim.h) from Optax.

Each optimizer runs STEPS updates on two parameters (w: f32[3,4], b: f32[4])
with fixed gradients; the files hold the start, the gradients and the
parameters after every step. Run from the repository root:
    python3 tests/golden/gen_optim.py
"""
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import optax

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "optim")
STEPS = 8

def schedule():
    return optax.warmup_cosine_decay_schedule(0.0, 0.05, 3, STEPS, 0.005)

OPTIMIZERS = {
    "sgd": lambda: optax.sgd(0.1),
    "sgd_momentum": lambda: optax.sgd(0.1, momentum=0.9),
    "sgd_nesterov": lambda: optax.sgd(0.1, momentum=0.9, nesterov=True),
    "adam": lambda: optax.adam(0.01, b1=0.9, b2=0.999, eps=1e-8),
    "adamw": lambda: optax.adamw(0.01, b1=0.9, b2=0.99, eps=1e-6, weight_decay=0.1),
    "adamw_clip_cosine": lambda: optax.chain(
        optax.clip_by_global_norm(0.5),
        optax.adamw(schedule(), b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01)),
    "multisteps_momentum": lambda: optax.MultiSteps(optax.sgd(0.1, momentum=0.9), every_k_schedule=3),
}


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    rng = np.random.default_rng(7)
    w0 = rng.normal(size=(3, 4)).astype(np.float32)
    b0 = rng.normal(size=(4,)).astype(np.float32)
    gw = rng.normal(size=(STEPS, 3, 4)).astype(np.float32)
    gb = (3 * rng.normal(size=(STEPS, 4))).astype(np.float32)
    for name, arr in [("w0", w0), ("b0", b0), ("gw", gw), ("gb", gb)]:
        np.save(os.path.join(OUT, name + ".npy"), arr)
    for name, make in OPTIMIZERS.items():
        opt = make()
        params = {"w": jnp.asarray(w0), "b": jnp.asarray(b0)}
        state = opt.init(params)
        ws, bs = [], []
        for t in range(STEPS):
            grads = {"w": jnp.asarray(gw[t]), "b": jnp.asarray(gb[t])}
            updates, state = opt.update(grads, state, params)
            params = optax.apply_updates(params, updates)
            ws.append(np.asarray(params["w"]))
            bs.append(np.asarray(params["b"]))
        np.save(os.path.join(OUT, name + "_w.npy"), np.stack(ws))
        np.save(os.path.join(OUT, name + "_b.npy"), np.stack(bs))
    sched = schedule()
    lin = optax.linear_schedule(0.1, 0.01, 5)
    counts = jnp.arange(12, dtype=jnp.int32)
    np.save(os.path.join(OUT, "warmup_cosine.npy"), np.asarray(jax.vmap(sched)(counts), np.float32))
    np.save(os.path.join(OUT, "linear.npy"), np.asarray(jax.vmap(lin)(counts), np.float32))


if __name__ == "__main__":
    main()
