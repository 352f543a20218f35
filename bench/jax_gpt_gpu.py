#!/usr/bin/env python3
"""bench_cuda_gpt's train step in JAX + Optax on the GPU: the same GPT
(src/nn/gpt.c: pre-LN blocks, separate q/k/v/o projections with biases,
causal softmax attention, GELU (tanh) MLP of ratio 4, final LN, head tied to
the token embedding; weights normal 0.02, residual projections 0.02 /
sqrt(2 L)), GPT-2 124M-shaped by default (12 layers, d 768, 12 heads,
context 1024, vocabulary 50257, batch 8), bf16 compute with f32 master
weights (layer-norm statistics, the softmax and the cross-entropy in f32, as
jx's layers), optax.adamw (lr 3e-4, b1 0.9, b2 0.95, eps 1e-8, weight decay
0.1), jax.jit with the parameters and optimizer state donated, the same
batch every step.

FLOPs per step: 6 N BT + 12 L d T BT (bench_cuda_gpt.c says why); MFU against
--peak-tflops (989: an H200's dense bf16 rate). Prints one JSON line as
bench_cuda_gpt does, with "impl":"jax". Without jax, or without a GPU
backend, it prints {"bench":"cuda_gpt_step","impl":"jax","skipped":...} and
exits 0; --allow-cpu runs on the CPU (with --tiny, to check this script).

    python3 bench/jax_gpt_gpu.py [--tiny] [--layers N] ... [--steps N] [--warmup N]
"""
import argparse
import json
import math
import statistics
import sys
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="2 layers, d 64, 4 heads, context 32, "
                    "byte vocabulary, batch 4, 5 steps (bench_cuda_gpt --tiny)")
    for name in ("layers", "d", "heads", "ctx", "vocab", "batch", "steps", "warmup"):
        ap.add_argument("--" + name, type=int)
    ap.add_argument("--f32", action="store_true", help="compute in f32 instead of bf16")
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="stop timing once this much time has passed (0: never)")
    ap.add_argument("--allow-cpu", action="store_true", help="run on the CPU when there is no GPU")
    a = ap.parse_args()
    cfg = dict(layers=12, d=768, heads=12, ctx=1024, vocab=50257, batch=8, steps=10, warmup=1)
    if a.tiny:
        cfg.update(layers=2, d=64, heads=4, ctx=32, vocab=256, batch=4, steps=5)
    for k in cfg:
        if getattr(a, k) is not None:
            cfg[k] = getattr(a, k)
    return a, cfg


def skip(why):
    print(json.dumps({"bench": "cuda_gpt_step", "impl": "jax", "skipped": why}))
    sys.exit(0)


def main():
    a, cfg = parse()
    t_start = time.perf_counter()
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
        import optax
    except Exception as e:  # missing, or a broken install (a CUDA plugin that fails to load)
        skip(f"jax/optax cannot be imported ({type(e).__name__}: {e})")
    try:
        gpus = [d for d in jax.devices() if d.platform in ("gpu", "cuda", "rocm")]
    except Exception as e:  # a backend asked for (JAX_PLATFORMS) that cannot start
        skip(f"jax has no usable backend ({e})")
    if not gpus and not a.allow_cpu:
        skip(f"jax {jax.__version__} has no GPU backend (devices: {jax.devices()})")
    dev = gpus[0] if gpus else jax.devices()[0]
    V, L, D, H, T, B = (cfg[k] for k in ("vocab", "layers", "d", "heads", "ctx", "batch"))
    cdt = jnp.float32 if a.f32 else jnp.bfloat16
    print(f"jax_gpt_gpu: jax {jax.__version__} on {dev.device_kind}, {L} layers, d {D}, {H} heads, "
          f"context {T}, vocab {V}, batch {B}, {'f32' if a.f32 else 'bf16'} compute",
          file=sys.stderr, flush=True)

    def ln(x, s, b):  # statistics in f32, result in the compute dtype
        x32 = x.astype(jnp.float32)
        m = x32.mean(-1, keepdims=True)
        v = ((x32 - m) ** 2).mean(-1, keepdims=True)
        return ((x32 - m) / jnp.sqrt(v + 1e-5) * s.astype(jnp.float32)
                + b.astype(jnp.float32)).astype(x.dtype)

    def init(key):
        ks = iter(jax.random.split(key, 4 + 6 * L))
        n = lambda shape, sd=0.02: sd * jax.random.normal(next(ks), shape, jnp.float32)
        z, o = (lambda k: jnp.zeros(k, jnp.float32)), (lambda k: jnp.ones(k, jnp.float32))
        r = 0.02 / math.sqrt(2 * L)
        p = {"wte": n((V, D)), "wpe": n((T, D)), "lnf": (o(D), z(D)), "blocks": []}
        for _ in range(L):
            p["blocks"].append({
                "ln1": (o(D), z(D)), "ln2": (o(D), z(D)), "wq": n((D, D)), "wk": n((D, D)),
                "wv": n((D, D)), "wo": n((D, D), r), "bq": z(D), "bk": z(D), "bv": z(D),
                "bo": z(D), "fc": n((D, 4 * D)), "fcb": z(4 * D), "proj": n((4 * D, D), r),
                "projb": z(D)})
        return p

    mask = np.tril(np.ones((T, T), bool))

    def block(b, h):
        x = ln(h, *b["ln1"])
        q, k, v = (x @ b["w" + c] + b["b" + c] for c in "qkv")
        sh = lambda t: t.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)
        q, k, v = sh(q), sh(k), sh(v)
        s = (q @ k.transpose(0, 1, 3, 2)).astype(jnp.float32) / math.sqrt(D // H)
        s = jnp.where(mask, s, -jnp.inf)
        o = (jax.nn.softmax(s, -1).astype(cdt) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
        h = h + o @ b["wo"] + b["bo"]
        x = ln(h, *b["ln2"])
        return h + jax.nn.gelu(x @ b["fc"] + b["fcb"], approximate=True) @ b["proj"] + b["projb"]

    def loss(p32, x, y):
        p = jax.tree_util.tree_map(lambda w: w.astype(cdt), p32)  # f32 masters -> compute dtype
        h = p["wte"][x] + p["wpe"][:T]
        for b in p["blocks"]:
            h = block(b, h)
        logits = (ln(h, *p["lnf"]) @ p["wte"].T).astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    # keywords: adamw's fifth positional parameter is eps_root, not weight_decay
    opt = optax.adamw(3e-4, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1)

    def step(p, s, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        u, s = opt.update(g, s, p)
        return l, optax.apply_updates(p, u), s

    step = jax.jit(step, donate_argnums=(0, 1))  # bench_cuda_gpt donates them too
    with jax.default_device(dev):
        p = init(jax.random.PRNGKey(0))
        s = opt.init(p)
        tok = jax.random.randint(jax.random.PRNGKey(1), (B, T + 1), 0, V)
    x, y = tok[:, :T], tok[:, 1:]
    nparams = sum(int(np.prod(w.shape)) for w in jax.tree_util.tree_leaves(p))
    print(f"jax_gpt_gpu: {nparams} parameters; first call (trace, compile, run)...",
          file=sys.stderr, flush=True)

    losses, times = [], []
    calls = 1 + cfg["warmup"] + cfg["steps"]
    for k in range(calls):
        t0 = time.perf_counter()
        l, p, s = step(p, s, x, y)
        jax.block_until_ready((l, p, s))  # jx's call returns with everything done
        dt = time.perf_counter() - t0
        losses.append(float(l))
        if k > cfg["warmup"]:
            times.append(dt)
        kind = "first call" if k == 0 else "warmup" if k <= cfg["warmup"] else "step"
        print(f"jax_gpt_gpu: {kind} {k}: loss {losses[-1]:.4f}, {dt * 1e3:.1f} ms",
              file=sys.stderr, flush=True)
        if k == 0:
            first = dt
        if not math.isfinite(losses[-1]):
            print(f"jax_gpt_gpu: the loss is not finite at call {k}", file=sys.stderr)
            sys.exit(1)
        if times and a.max_seconds > 0 and time.perf_counter() - t_start > a.max_seconds:
            print(f"jax_gpt_gpu: --max-seconds {a.max_seconds:.0f} reached after {len(times)} "
                  "timed steps", file=sys.stderr)
            break
    loss_ok = abs(losses[0] - math.log(V)) < 0.5 and (len(losses) < 2 or losses[-1] < losses[0])
    if not loss_ok:
        print(f"jax_gpt_gpu: wrong loss: first {losses[0]:.4f} (expected about ln({V}) = "
              f"{math.log(V):.4f}), last {losses[-1]:.4f} (expected lower)", file=sys.stderr)
    med = statistics.median(times) if times else first
    tokens = B * T
    flops = 6.0 * nparams * tokens + 12.0 * L * D * T * tokens
    print(json.dumps({
        "bench": "cuda_gpt_step", "impl": "jax", "platform": dev.platform,
        "device": dev.device_kind, "jax": jax.__version__, "median_ms": round(med * 1e3, 3),
        "runs": len(times), "tokens_per_s": round(tokens / med),
        "tflop_per_s": round(flops / med / 1e12, 2),
        "mfu": round(flops / med / (a.peak_tflops * 1e12), 4), "peak_tflops": a.peak_tflops,
        "first_call_s": round(first, 2), "params": nparams, "flop_per_step": flops,
        "layers": L, "d": D, "heads": H, "ctx": T, "vocab": V, "batch": B,
        "compute": "f32" if a.f32 else "bf16", "loss_first": round(losses[0], 4),
        "loss_last": round(losses[-1], 4), "loss_ok": loss_ok}), flush=True)
    sys.exit(0 if loss_ok else 1)


if __name__ == "__main__":
    main()
