"""Runs the jx benchmarks and the same workloads in NumPy (and JAX eager for
dispatch and matmul, when installed) in one go, and prints a table of medians
and ratios. bench_matmul also times cblas_sgemm called directly in the same
process; that appears as the "openblas" column. The MLP and GPT train steps
also run in PyTorch (eager, and torch.compile unless --no-torch-compile), on
as many threads as jx uses (JX_NUM_THREADS, else every CPU).

    python3 bench/compare.py [--build build] [--runs 7] [--only bench_mlp,bench_reduce]
    python3 bench/compare.py --workload gpt     # only the GPT step: jx, JAX, PyTorch
    python3 bench/compare.py --workload gpt --sizes small,ref,large [--rounds 5]
                        # GPT steps of three sizes in alternating jx / PyTorch eager /
                        # jax.jit rounds: medians and ranges of the ratios
    python3 bench/compare.py --workload scan     # likewise: bench_scan and jax.lax.scan
    python3 bench/compare.py --workload dispatch # likewise: bench_dispatch and JAX
    python3 bench/compare.py --workload cold [--layers 2,4,16] [--rounds 3]
                        # the GPT step's first call, empty kernel cache, vs jax.jit
    python3 bench/compare.py --workload linalg   # bench_linalg, jax.jit and NumPy, alternating
    python3 bench/compare.py --workload fft      # bench_fft, jax.jit and NumPy, alternating
    python3 bench/compare.py --workload mlp     # only the MLP step: jx, JAX, PyTorch
    python3 bench/compare.py --workload generate [--models ref --batches 1]
                                                # KV-cache decoding: jx, JAX, PyTorch

Python requirements: bench/requirements.txt.

Each jx program (build/bench/bench_*) prints JSON lines
{"bench": ..., "impl": "jx", "median_ns": ..., "runs": ...}; the peers here are
timed the same way (median over runs, one warm-up). A missing peer is reported
as such, never silently skipped. Ratio = jx median / peer median (lower is better
for jx).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(fn, runs, inner=1):
    fn()  # warm-up
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        ts.append((time.perf_counter_ns() - t0) / inner)
    return statistics.median(ts)


MATMUL_SIZES = (256, 512, 1024)


def run_jx(build, runs, only=None):
    """{impl: {bench: median_ns}} from the jx programs (impl "jx", or "sgemm"
    for the direct OpenBLAS calls of bench_matmul)."""
    out = {}
    for prog in ("bench_dispatch", "bench_elementwise", "bench_reduce", "bench_matmul",
                 "bench_fusion", "bench_mlp"):
        if only and prog not in only:
            continue
        path = os.path.join(build, "bench", prog)
        if not os.path.exists(path):
            print(f"note: {path} is missing (build the project first)", file=sys.stderr)
            continue
        r = subprocess.run([path, str(runs)], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"note: {prog} failed: {r.stderr.strip()}", file=sys.stderr)
            continue
        for line in r.stdout.splitlines():
            d = json.loads(line)
            out.setdefault(d["impl"], {})[d["bench"]] = d["median_ns"]
            if d["impl"] == "triad":  # a bandwidth reference, not a peer of its own
                out.setdefault("_notes", {})["triad"] = (
                    f"triad on every core: {d['gb_per_s']} GB/s; fused chain: see gb_per_s")
            if "openblas_core" in d:
                out.setdefault("_notes", {})["openblas"] = (
                    f"OpenBLAS kernel {d['openblas_core']}, {d['openblas_threads']} threads")
    return out


def run_numpy(runs):
    import numpy as np
    r = np.random.default_rng(0)
    a8, b8 = np.arange(8, dtype=np.float32), np.arange(8, dtype=np.float32)[::-1].copy()
    x = r.uniform(-4, 4, 16 * 1024 * 1024).astype(np.float32)
    y = r.uniform(-4, 4, 16 * 1024 * 1024).astype(np.float32)
    m = r.uniform(-1, 1, (4096, 4096)).astype(np.float32)
    out = {
        "dispatch_add_f32x8": timed(lambda: np.add(a8, b8), runs, inner=20000),
        "add_f32_16M": timed(lambda: np.add(x, y), runs),
        "exp_f32_16M": timed(lambda: np.exp(x), runs),
        "sum_lastaxis_f32_4096x4096": timed(lambda: m.sum(axis=-1), runs),
    }
    for n in MATMUL_SIZES:
        a = r.uniform(-1, 1, (n, n)).astype(np.float32)
        b = r.uniform(-1, 1, (n, n)).astype(np.float32)
        out[f"matmul_f32_{n}"] = timed(lambda: np.matmul(a, b), runs)
    w = r.uniform(0, 0.6, 16 * 1024 * 1024).astype(np.float32)
    out["fused_chain_f32_16M"] = timed(lambda: chain(np, x, w), runs)
    out["fused_chain_f32_16M_eager"] = out["fused_chain_f32_16M"]
    return out


def chain(xp, x, w):
    """bench_fusion's six ops: max(tanh(x * w + 0.5) - sqrt(|x|), w)."""
    return xp.maximum(xp.tanh(x * w + 0.5) - xp.sqrt(xp.abs(x)), w)


def mlp_step_jax():
    """bench_mlp's step: value_and_grad of an MLP 784-512-512-10 loss and AdamW."""
    import functools

    import jax
    import jax.numpy as jnp
    import numpy as np

    def loss(p, x, y):
        h = jax.nn.relu(x @ p[0] + p[1])
        h = jax.nn.relu(h @ p[2] + p[3])
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(h @ p[4] + p[5], axis=1), axis=1))

    # donated and fed back, as a training loop runs it (and as bench_mlp does)
    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def step(p, m, v, x, y, t):
        val, g = jax.value_and_grad(loss)(p, x, y)
        c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        m = [0.9 * a + 0.1 * b for a, b in zip(m, g)]
        v = [0.999 * a + 0.001 * b * b for a, b in zip(v, g)]
        p = [a - 1e-3 * ((b / c1) / (jnp.sqrt(c / c2) + 1e-8) + 1e-4 * a)
             for a, b, c in zip(p, m, v)]
        return val, p, m, v

    r = np.random.default_rng(0)
    shapes = [(784, 512), (512,), (512, 512), (512,), (512, 10), (10,)]
    state = [[jnp.asarray(r.standard_normal(s).astype(np.float32) * 0.05) for s in shapes],
             [jnp.zeros(s, jnp.float32) for s in shapes], [jnp.zeros(s, jnp.float32) for s in shapes]]
    x = jnp.asarray(r.standard_normal((256, 784)).astype(np.float32))
    y = jax.nn.one_hot(r.integers(0, 10, 256), 10)

    def run():
        loss, *state[:] = step(*state, x, y, 1.0)
        jax.block_until_ready(loss)

    t0 = time.perf_counter_ns()
    run()
    first = time.perf_counter_ns() - t0
    return run, first


# The PyTorch twins of bench_mlp and bench_gpt, run as a subprocess:
#   python3 -c TORCH_PEER <mlp|gpt> <runs> <threads> <1: also torch.compile> [gpt size L,D,T,B]
TORCH_PEER = r"""
import json, math, statistics, sys, time
import torch
import torch.nn.functional as F

which, runs, threads, compile_too = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
gpt_size = tuple(int(v) for v in sys.argv[5].split(",")) if len(sys.argv) > 5 else (4, 256, 128, 16)
torch.set_num_threads(threads)
torch.manual_seed(0)


def report(bench, impl, step, runs):
    t0 = time.perf_counter_ns(); step(); first = time.perf_counter_ns() - t0
    step()  # one more warm-up: torch.compile may recompile once after the first call
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter_ns(); step(); ts.append(time.perf_counter_ns() - t0)
    print(json.dumps({"bench": bench, "impl": impl, "median_ns": statistics.median(ts), "runs": runs}))
    print(json.dumps({"bench": bench + "_first_call", "impl": impl, "median_ns": first, "runs": 1}))
    sys.stdout.flush()


def leaf(t):
    return t.detach().requires_grad_()


# bench_mlp's step: MLP 784-512-512-10 (ReLU), softmax cross-entropy against
# one-hot targets, batch 256, AdamW (1e-3, 0.9, 0.999, 1e-8, 1e-4).
def mlp():
    dims = (784, 512, 512, 10)
    p = []
    for i in range(3):
        p += [leaf(torch.randn(dims[i + 1], dims[i]) * 0.05), leaf(torch.zeros(dims[i + 1]))]
    x = torch.randn(256, 784)
    y = F.one_hot(torch.randint(0, 10, (256,)), 10).float()

    def loss(x, y):
        h = F.relu(F.linear(x, p[0], p[1]))
        h = F.relu(F.linear(h, p[2], p[3]))
        return -(y * F.log_softmax(F.linear(h, p[4], p[5]), 1)).sum(1).mean()
    return p, loss, (x, y)


# bench_gpt's step: src/nn/gpt.c's GPT (pre-LN blocks, separate q/k/v/o
# projections with biases, causal softmax attention (PyTorch's fused
# scaled_dot_product_attention), GELU (tanh) MLP of ratio 4, final LN, head
# tied to the token embedding), 4 layers, d 256, 8 heads, context 128, batch
# 16 (or gpt_size, heads of width 32), byte vocabulary; AdamW (3e-4, 0.9, 0.95, 1e-8, 0.1) on every parameter,
# as optax.adamw's default mask.
def gpt():
    (L, D, T, B), V = gpt_size, 256
    H = D // 32
    r = 0.02 / math.sqrt(2 * L)
    n = lambda *s, sd=0.02: leaf(torch.randn(*s) * sd)
    z = lambda *s: leaf(torch.zeros(*s))
    o = lambda *s: leaf(torch.ones(*s))
    wte, wpe, lnf = n(V, D), n(T, D), (o(D), z(D))
    blocks = [dict(ln1=(o(D), z(D)), ln2=(o(D), z(D)), wq=n(D, D), wk=n(D, D), wv=n(D, D),
                   wo=n(D, D, sd=r), bq=z(D), bk=z(D), bv=z(D), bo=z(D), fc=n(4 * D, D),
                   fcb=z(4 * D), proj=n(D, 4 * D, sd=r), projb=z(D)) for _ in range(L)]
    p = [wte, wpe, *lnf]
    for b in blocks:
        for v in b.values():
            p += list(v) if isinstance(v, tuple) else [v]

    def loss(x, y):
        h = wte[x] + wpe[:T]
        for b in blocks:
            a = F.layer_norm(h, (D,), *b["ln1"], 1e-5)
            sh = lambda t: t.view(B, T, H, D // H).transpose(1, 2)
            q, k, v = (sh(F.linear(a, b["w" + c], b["b" + c])) for c in "qkv")
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + F.linear(a.transpose(1, 2).reshape(B, T, D), b["wo"], b["bo"])
            a = F.layer_norm(h, (D,), *b["ln2"], 1e-5)
            h = h + F.linear(F.gelu(F.linear(a, b["fc"], b["fcb"]), approximate="tanh"),
                             b["proj"], b["projb"])
        logits = F.linear(F.layer_norm(h, (D,), *lnf, 1e-5), wte)
        return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    tok = torch.randint(0, V, (B, T + 1))
    return p, loss, (tok[:, :T], tok[:, 1:])


def make_step(p, loss, data, hyper, compiled):
    opt = torch.optim.AdamW(p, **hyper)
    f = torch.compile(loss) if compiled else loss

    def step():
        opt.zero_grad(set_to_none=True)
        l = f(*data)
        l.backward()
        opt.step()
        return l.item()
    return step


model, hyper = {"mlp": (mlp, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4)),
                "gpt": (gpt, dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1))}[which]
report(which + "_step", "torch", make_step(*model(), hyper, False), runs)
if compile_too:
    try:
        report(which + "_step", "torch_compile", make_step(*model(), hyper, True), runs)
    except Exception as e:  # a missing compiler: reported by compare.py as n/a
        print(f"torch.compile failed: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
"""


def jx_threads():
    """The thread count jx's pool uses (src/base/threadpool.c), for the peers."""
    return int(os.environ.get("JX_NUM_THREADS") or os.cpu_count() or 1)


def run_torch(which, runs, compile_too, gpt_size=None):
    """{impl: {bench: median_ns}} of the PyTorch twin of bench_<which> (impl
    "torch" for eager, "torch_compile"); {} with a note when PyTorch is missing
    or fails. gpt_size: (layers, d, context, batch) of the GPT, else bench_gpt's."""
    size = [",".join(map(str, gpt_size))] if gpt_size else []
    r = subprocess.run(PREFIX + [sys.executable, "-c", TORCH_PEER, which, str(runs),
                                 str(jx_threads()), "1" if compile_too else "0"] + size,
                       capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        d = json.loads(line)
        out.setdefault(d["impl"], {})[d["bench"]] = d["median_ns"]
    if r.returncode != 0 or (compile_too and "torch_compile" not in out):
        err = r.stderr.strip().splitlines()
        print(f"note: the PyTorch peer of bench_{which}: {err[-1] if err else 'failed'}"
              + ("" if out else " (pip install -r bench/requirements.txt)"), file=sys.stderr)
    return out


def print_peer_table(title, rows, names, peers):
    """A markdown table of jx's and each peer's median time (ms) and jx/peer;
    rows: {bench: {impl: median_ns}}, peers: [(impl, column title)]."""
    print(f"\n| {title} | jx | " + " | ".join(t for _, t in peers) + " | "
          + " | ".join(f"jx/{t}" for _, t in peers) + " |")
    print("|---" * (2 + 2 * len(peers)) + "|")
    for name in names:
        r = rows.get(name, {})
        a = r.get("jx")
        cells = [f"{v / 1e6:.1f} ms" if v else "n/a" for v in [a] + [r.get(i) for i, _ in peers]]
        ratios = [f"{a / r[i]:.2f}" if a and r.get(i) else "n/a" for i, _ in peers]
        print(f"| {name} | " + " | ".join(cells + ratios) + " |")


TORCH_COLUMNS = [("jax", "jax.jit"), ("torch", "torch eager"), ("torch_compile", "torch.compile")]


def run_mlp(build, runs, compile_too, jstep=None):
    """The MLP step of bench_mlp in jx, JAX (jstep, or made here) and PyTorch eager,
    alternately (3 rounds, median of each): on a shared machine the load drifts
    between runs, and the ratio of measurements taken seconds apart is the one to
    trust. torch.compile runs in the first round only. {bench: {impl: median_ns}}."""
    rows = {"mlp_step": {}, "mlp_step_first_call": {}}
    if jstep is None:
        try:
            jstep, rows["mlp_step_first_call"]["jax"] = mlp_step_jax()
        except ImportError:
            print("note: jax is not installed; no jax column", file=sys.stderr)
    path = os.path.join(build, "bench", "bench_mlp")
    if not os.path.exists(path):
        print(f"note: {path} is missing (build the project first)", file=sys.stderr)
    n, got = max(runs, 15), {"jx": [], "jax": [], "torch": []}
    use_torch = True
    for rnd in range(3):
        if os.path.exists(path):
            r = subprocess.run([path, str(n)], capture_output=True, text=True)
            for line in r.stdout.splitlines():
                d = json.loads(line)
                if d["bench"] == "mlp_step":
                    got["jx"].append(d["median_ns"])
                elif rnd == 0:
                    rows["mlp_step_first_call"]["jx"] = d["median_ns"]
        if jstep:
            got["jax"].append(timed(jstep, n))
        t = run_torch("mlp", n, compile_too and rnd == 0) if use_torch else {}
        use_torch = bool(t)  # missing: noted once
        if "torch" in t:
            got["torch"].append(t["torch"]["mlp_step"])
        for impl in ("torch", "torch_compile") if rnd == 0 else ():
            if impl in t:
                rows["mlp_step_first_call"][impl] = t[impl]["mlp_step_first_call"]
        if "torch_compile" in t:
            rows["mlp_step"]["torch_compile"] = t["torch_compile"]["mlp_step"]
    for impl, v in got.items():
        if v:
            rows["mlp_step"][impl] = statistics.median(v)
    return rows


def print_mlp(rows):
    print_peer_table("MLP 784-512-512-10 step, batch 256, AdamW", rows,
                     ("mlp_step", "mlp_step_first_call"), TORCH_COLUMNS)
    print(f"mlp_step: medians of 3 alternating rounds of jx, jax.jit and torch eager "
          f"(torch.compile: first round); PyTorch on {jx_threads()} threads")


def run_jax(runs):
    import jax
    import jax.numpy as jnp
    a8 = jnp.arange(8, dtype=jnp.float32)
    b8 = a8[::-1]
    jnp.add(a8, b8).block_until_ready()
    out = {"dispatch_add_f32x8": timed(lambda: jnp.add(a8, b8).block_until_ready(), runs,
                                       inner=2000)}
    cpu = jax.devices("cpu")[0]
    for n in MATMUL_SIZES:
        k1, k2 = jax.random.split(jax.random.PRNGKey(n))
        a = jax.device_put(jax.random.uniform(k1, (n, n), jnp.float32, -1, 1), cpu)
        b = jax.device_put(jax.random.uniform(k2, (n, n), jnp.float32, -1, 1), cpu)
        out[f"matmul_f32_{n}"] = timed(lambda: jnp.dot(a, b).block_until_ready(), runs)
    x = jax.device_put(jax.random.uniform(jax.random.PRNGKey(1), (16 * 1024 * 1024,), jnp.float32, -4, 4), cpu)
    w = jax.device_put(jax.random.uniform(jax.random.PRNGKey(2), (16 * 1024 * 1024,), jnp.float32, 0, 0.6), cpu)
    jchain = jax.jit(lambda x, w: chain(jnp, x, w))
    out["fused_chain_f32_16M"] = timed(lambda: jchain(x, w).block_until_ready(), runs)
    step, first = mlp_step_jax()
    out["mlp_step"] = timed(step, runs)
    out["mlp_step_first_call"] = first
    out["_mlp_step_fn"] = step
    return out


ALLREDUCE_SIZES = (("1KiB", 1 << 10), ("16KiB", 16 << 10), ("256KiB", 256 << 10),
                   ("4MiB", 4 << 20), ("64MiB", 64 << 20))
ALLREDUCE_JAX = r"""
import json, statistics, sys, time
import jax, jax.numpy as jnp, numpy as np
runs = int(sys.argv[1])
f = jax.pmap(lambda x: jax.lax.psum(x, 'i'), axis_name='i')
for name, nbytes in %s:
    x = jax.pmap(lambda v: v)(np.ones((8, nbytes // 4), np.float32))  # already on the 8 devices
    f(x).block_until_ready()
    reps = 200 if nbytes <= 256 << 10 else 3 * runs
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        f(x).block_until_ready()
        ts.append(time.perf_counter_ns() - t0)
    print(json.dumps({"bench": f"allreduce_f32_8x_{name}", "impl": "jax",
                      "median_ns": statistics.median(ts)}))
"""


def run_allreduce(build, runs):
    """bench_allreduce (jx, 8 rank threads) next to jax.pmap(psum) on 8 host devices
    (side_by_side). Prints its own
    table: algorithm bandwidth = bytes per rank / time, and memcpy's from the same run."""
    rows = side_by_side(build, "bench_allreduce", ALLREDUCE_JAX % (ALLREDUCE_SIZES,), runs,
                        host_devices=8)
    print("\n| all_reduce f32, 8 ranks | jx | jx GB/s | jax psum | jax GB/s | memcpy GB/s |")
    print("|---|---|---|---|---|---|")
    for name, nbytes in ALLREDUCE_SIZES:
        d = rows.get(f"allreduce_f32_8x_{name}", {})
        cells = []
        for impl in ("jx", "jax"):
            v = d.get(impl, {}).get("median_ns")
            cells += [f"{v / 1e3:.1f} us" if v else "n/a", f"{nbytes / v:.2f}" if v else "n/a"]
        mc = d.get("jx", {}).get("memcpy_gb_per_s")
        print(f"| {name} | " + " | ".join(cells) + f" | {mc if mc else 'n/a'} |")
    return rows

SHARDED_JAX = r"""
import json, statistics, sys, time
import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
runs = int(sys.argv[1])

def timed(f, *a):
    jax.block_until_ready(f(*a)); jax.block_until_ready(f(*a))
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter_ns(); jax.block_until_ready(f(*a)); ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts)

def loss(p, x, y):
    h = jax.nn.relu(x @ p[0] + p[1]); h = jax.nn.relu(h @ p[2] + p[3])
    logits = h @ p[4] + p[5]
    return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits, 1), 1))

def step(p, x, y):
    l, g = jax.value_and_grad(loss)(p, x, y)
    return l, [pi - 0.01 * gi for pi, gi in zip(p, g)]

key = jax.random.key(0)
dims = (784, 512, 512, 10)
for k in (1, 2, 4, 8):
    mesh = Mesh(np.array(jax.devices()[:k]), ("data",))
    rows, allr = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    p = []
    for l in range(3):
        p += [jax.device_put(0.05 * jax.random.normal(jax.random.fold_in(key, l), dims[l:l + 2]), allr),
              jax.device_put(jnp.zeros(dims[l + 1]), allr)]
    x = jax.device_put(jax.random.normal(key, (256, 784)), rows)
    y = jax.device_put(jnp.full((256, 10), 0.1), rows)
    f = jax.jit(step, in_shardings=([allr] * 6, rows, rows), out_shardings=(allr, [allr] * 6))
    print(json.dumps({"bench": f"dp_mlp_step_{k}dev", "impl": "jax", "median_ns": timed(f, p, x, y)}))
mesh = Mesh(np.array(jax.devices()), ("x",))
for name, sa, sb in (("rows", P("x", None), P()), ("contract", P(None, "x"), P("x", None))):
    a = jax.device_put(jax.random.normal(key, (1024, 1024)), NamedSharding(mesh, sa))
    b = jax.device_put(jnp.ones((1024, 1024)), NamedSharding(mesh, sb))
    f = jax.jit(jnp.matmul)
    print(json.dumps({"bench": f"matmul_1024_{name}_8dev", "impl": "jax", "median_ns": timed(f, a, b)}))
"""


# --realtime: every timed process runs under SCHED_FIFO (chrt -f, root only), so
# that the other processes of a shared machine take none of its cores (they
# keep a 5 % share, the kernel's realtime throttling); memory bandwidth and
# caches stay shared.
PREFIX = []


def side_by_side(build, prog, jax_script, runs, host_devices=0, args=()):
    """Runs bench/<prog> and jax_script (a subprocess, so XLA_FLAGS applies before jax
    starts; host_devices > 0 forces that many CPU devices) with `runs` and then
    args; returns {bench: {"jx": record, "jax": record}} from their JSON lines,
    either side left out when jax_script or prog is None. A missing or failing
    side is reported, never silently skipped."""
    rows = {}
    args = [str(a) for a in args]
    if prog is not None:
        path = os.path.join(build, "bench", prog)
        r = (subprocess.run(PREFIX + [path, str(runs)] + args, capture_output=True, text=True)
             if os.path.exists(path) else None)
        if r is None or r.returncode != 0:
            print(f"note: {prog} missing or failed: {r.stderr.strip() if r else path}",
                  file=sys.stderr)
        else:
            for line in r.stdout.splitlines():
                d = json.loads(line)
                rows.setdefault(d["bench"], {})["jx"] = d
    if jax_script is None:
        return rows
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if host_devices:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={host_devices}"
    j = subprocess.run(PREFIX + [sys.executable, "-c", jax_script, str(runs)] + args,
                       capture_output=True, text=True, env=env)
    if j.returncode != 0:
        print(f"note: the jax peer of {prog} failed: {j.stderr.strip()[-300:]}", file=sys.stderr)
    else:
        for line in j.stdout.splitlines():
            d = json.loads(line)
            rows.setdefault(d["bench"], {})["jax"] = d
    return rows


def print_ratio_table(title, peer, rows, names, digits=2):
    """A markdown table of jx and the peer's median times (ms) and their ratio."""
    print(f"\n| {title} | jx | {peer} | jx/jax |")
    print("|---|---|---|---|")
    for name in names:
        a = rows.get(name, {}).get("jx", {}).get("median_ns")
        b = rows.get(name, {}).get("jax", {}).get("median_ns")
        print(f"| {name} | {a / 1e6:.{digits}f} ms |" if a else f"| {name} | n/a |",
              f"{b / 1e6:.{digits}f} ms |" if b else "n/a |", f"{a / b:.2f} |" if a and b else "n/a |")


def run_sharded(build, runs):
    """bench_sharded (jx on 8 CPU devices) next to the same sharded work in JAX with
    8 forced host devices; prints its own table."""
    rows = side_by_side(build, "bench_sharded", SHARDED_JAX, runs, host_devices=8)
    print_ratio_table("sharded, 8 CPU devices", "jax.jit (8 host devices)", rows, list(rows))
    return rows


GPT_JAX = r"""
import functools, json, statistics, sys, time
import jax, jax.numpy as jnp, numpy as np, optax
runs = int(sys.argv[1])
# bench_gpt's size, or the one given as argv[2:6] (layers d context batch), heads of width 32
L, D, T, B = (int(v) for v in sys.argv[2:6]) if len(sys.argv) > 2 else (4, 256, 128, 16)
V, H = 256, D // 32

def ln(x, s, b):
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * s + b

def init(key):
    ks = iter(jax.random.split(key, 4 + 6 * L))
    n = lambda shape, sd=0.02: sd * jax.random.normal(next(ks), shape, jnp.float32)
    p = {"wte": n((V, D)), "wpe": n((T, D)), "lnf": (jnp.ones(D), jnp.zeros(D)), "blocks": []}
    r = 0.02 / np.sqrt(2 * L)
    for _ in range(L):
        p["blocks"].append({"ln1": (jnp.ones(D), jnp.zeros(D)), "ln2": (jnp.ones(D), jnp.zeros(D)),
            "wq": n((D, D)), "wk": n((D, D)), "wv": n((D, D)), "wo": n((D, D), r),
            "bq": jnp.zeros(D), "bk": jnp.zeros(D), "bv": jnp.zeros(D), "bo": jnp.zeros(D),
            "fc": n((D, 4 * D)), "fcb": jnp.zeros(4 * D), "proj": n((4 * D, D), r), "projb": jnp.zeros(D)})
    return p

def block(b, h):
    x = ln(h, *b["ln1"])
    q, k, v = (x @ b["w" + c] + b["b" + c] for c in "qkv")
    sh = lambda t: t.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)
    q, k, v = sh(q), sh(k), sh(v)
    a = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // H)
    a = jnp.where(jnp.tril(jnp.ones((T, T), bool)), a, -jnp.inf)
    o = (jax.nn.softmax(a, -1) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    h = h + o @ b["wo"] + b["bo"]
    x = ln(h, *b["ln2"])
    return h + jax.nn.gelu(x @ b["fc"] + b["fcb"]) @ b["proj"] + b["projb"]

def loss(p, x, y):
    h = p["wte"][x] + p["wpe"][:T]
    for b in p["blocks"]:
        h = block(b, h)
    logits = ln(h, *p["lnf"]) @ p["wte"].T
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

opt = optax.adamw(3e-4, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1)
@functools.partial(jax.jit, donate_argnums=(0, 1))  # jx's bench donates them too
def step(p, s, x, y):
    l, g = jax.value_and_grad(loss)(p, x, y)
    u, s = opt.update(g, s, p)
    return l, optax.apply_updates(p, u), s

p = init(jax.random.key(0)); s = opt.init(p)
tok = jax.random.randint(jax.random.key(1), (B, T + 1), 0, 256)
x, y = tok[:, :T], tok[:, 1:]
t0 = time.perf_counter_ns(); l, p, s = step(p, s, x, y); jax.block_until_ready(l)
first = time.perf_counter_ns() - t0
ts = []
for _ in range(runs):
    t0 = time.perf_counter_ns(); l, p, s = step(p, s, x, y); jax.block_until_ready(l)
    ts.append(time.perf_counter_ns() - t0)
print(json.dumps({"bench": "gpt_step", "impl": "jax", "median_ns": statistics.median(ts)}))
print(json.dumps({"bench": "gpt_step_first_call", "impl": "jax", "median_ns": first}))
# XLA's own account of the step's memory: arguments + outputs + temporaries,
# less the outputs that alias (donated) arguments
ma = step.lower(p, s, x, y).compile().memory_analysis()
peak = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes - ma.alias_size_in_bytes
print(json.dumps({"bench": "gpt_step_peak_bytes", "impl": "jax", "estimated": peak}))
"""


def run_gpt(build, runs, compile_too=True):
    """bench_gpt (jx) next to the same GPT step in JAX + Optax (jax.jit, CPU) and
    PyTorch (eager and torch.compile, torch.optim.AdamW)."""
    rows = side_by_side(build, "bench_gpt", GPT_JAX, runs)
    flat = {b: {i: d["median_ns"] for i, d in r.items() if "median_ns" in d} for b, r in rows.items()}
    for impl, benches in run_torch("gpt", runs, compile_too).items():
        for b, v in benches.items():
            flat.setdefault(b, {})[impl] = v
    print_peer_table("GPT 4x256, context 128, batch 16, AdamW", flat,
                     ("gpt_step", "gpt_step_first_call"), TORCH_COLUMNS)
    tokens = 16 * 128
    print("tokens/s: " + ", ".join(
        f"{t} {tokens / flat['gpt_step'][i] * 1e9:.0f}" for i, t in [("jx", "jx")] + TORCH_COLUMNS
        if flat.get("gpt_step", {}).get(i)) + f"; PyTorch on {jx_threads()} threads")
    g = rows.get("gpt_step", {}).get("jx")
    if g:
        print(f"jx: {g['tokens_per_s']} tokens/s, MFU {100 * g['mfu']:.1f} % of peak "
              f"({g['peak_flops'] / 1e9:.0f} GFLOP/s), {100 * g['mfu_vs_gemm']:.1f} % of measured GEMM "
              f"throughput, {g['params']} parameters")
    pk = rows.get("gpt_step_peak_bytes", {}).get("jx")
    if pk:
        print(f"jx peak memory: {pk['measured'] / 2**20:.1f} MiB measured, "
              f"{pk['estimated'] / 2**20:.1f} MiB estimated by jx_fn_cost before running")
    pj = rows.get("gpt_step_peak_bytes", {}).get("jax")
    if pj:
        print(f"JAX peak memory: {pj['estimated'] / 2**20:.1f} MiB (XLA's memory analysis: "
              f"arguments + outputs + temporaries)")
    return rows


SCAN_JAX = r"""
import json, statistics, sys, time
import jax, jax.numpy as jnp
runs = int(sys.argv[1])
def body(c, x):
    c = c * 0.99 + jnp.sin(x) * 0.01
    return c, jnp.tanh(c)
f = jax.jit(lambda c, xs: jax.lax.scan(body, c, xs))
c = jax.random.uniform(jax.random.PRNGKey(0), (256,), jnp.float32, -1, 1)
xs = jax.random.uniform(jax.random.PRNGKey(1), (1000, 256), jnp.float32, -3, 3)
t0 = time.perf_counter_ns(); jax.block_until_ready(f(c, xs)); first = time.perf_counter_ns() - t0
ts = []
for _ in range(runs):
    t0 = time.perf_counter_ns(); jax.block_until_ready(f(c, xs)); ts.append(time.perf_counter_ns() - t0)
print(json.dumps({"bench": "scan_1000_jit", "impl": "jax", "median_ns": statistics.median(ts)}))
print(json.dumps({"bench": "scan_1000_first_call", "impl": "jax", "median_ns": first}))
k = jax.random.split(jax.random.PRNGKey(2), 3)
W = jax.random.normal(k[0], (32, 64), jnp.float32)
U = jax.random.normal(k[1], (64, 64), jnp.float32) * 0.125
b = jnp.zeros((64,), jnp.float32)
def cell(h, x):
    h = jnp.tanh(x @ W + h @ U + b)
    return h, h
g = jax.jit(lambda h, xs: jax.lax.scan(cell, h, xs))
h0 = jnp.zeros((8, 64), jnp.float32)
xs = jax.random.normal(k[2], (1000, 8, 32), jnp.float32)
jax.block_until_ready(g(h0, xs))
ts = []
for _ in range(runs):
    t0 = time.perf_counter_ns(); jax.block_until_ready(g(h0, xs)); ts.append(time.perf_counter_ns() - t0)
print(json.dumps({"bench": "rnn_scan_1000_jit", "impl": "jax", "median_ns": statistics.median(ts)}))
"""


def run_scan(build, runs):
    """bench_scan (jitted 1000-step scans of a small elementwise body and of an
    RNN cell, batch 8, input 32, hidden 64) next to jax.lax.scan under jax.jit
    on the same bodies and shapes."""
    rows = side_by_side(build, "bench_scan", SCAN_JAX, runs)
    print_ratio_table("scan, 1000 steps", "jax.jit(lax.scan)", rows,
                      ("scan_1000_jit", "rnn_scan_1000_jit", "scan_1000_first_call",
                       "scan_1000_eager"))
    return rows


DISPATCH_JAX = r"""
import json, statistics, sys, time
import jax, jax.numpy as jnp
runs = int(sys.argv[1])
a = jnp.arange(8, dtype=jnp.float32); b = a[::-1]
f = jax.jit(lambda x: x * 2 + 1)  # bench_dispatch's tiny jitted function
def per_call(fn, inner=2000):
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        ts.append((time.perf_counter_ns() - t0) / inner)
    return statistics.median(ts)
print(json.dumps({"bench": "dispatch_add_f32x8", "impl": "jax",
                  "median_ns": per_call(lambda: jnp.add(a, b).block_until_ready())}))
print(json.dumps({"bench": "jit_call_blocked_f32x8", "impl": "jax",
                  "median_ns": per_call(lambda: f(a).block_until_ready())}))
"""

# bench_linalg's workloads (its header says what each is) on the same shapes.
# Args: runs, peer ("jax" or "numpy"), OpenBLAS threads ("default" or a count,
# set before NumPy and JAX load it).
LINALG_PEER = r"""
import json, os, statistics, sys, time
runs, peer, blas = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if blas != "default":
    os.environ["OPENBLAS_NUM_THREADS"] = blas
import numpy as np
r = np.random.default_rng(0)
def spd(m):
    n = m.shape[-1]
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n, dtype=np.float32)
a = spd(r.standard_normal((64, 256, 256), np.float32))
b = r.standard_normal((64, 256, 1), np.float32)
sym = spd(r.standard_normal((512, 512), np.float32))
g = r.standard_normal((512, 512), np.float32)
if peer == "jax":
    import jax, jax.numpy as jnp
    a, b, sym, g = map(jnp.asarray, (a, b, sym, g))
    lib, ready = jnp.linalg, jax.block_until_ready
    wrap = jax.jit
else:
    lib, ready, wrap = np.linalg, lambda x: x, lambda f: f
cases = [("cholesky_64x256_f32", wrap(lib.cholesky), (a,)),
         ("solve_64x256_f32", wrap(lib.solve), (a, b)),
         ("eigh_512_f32", wrap(lib.eigh), (sym,)),
         ("svd_512_f32", wrap(lambda x: lib.svd(x, full_matrices=False)), (g,))]
ts = {n: [] for n, _, _ in cases}
for n, f, args in cases:
    ready(f(*args))
for _ in range(runs):
    for n, f, args in cases:
        t0 = time.perf_counter_ns(); ready(f(*args)); ts[n].append(time.perf_counter_ns() - t0)
for n, _, _ in cases:
    print(json.dumps({"bench": n, "impl": peer, "median_ns": statistics.median(ts[n])}))
"""

LINALG_BENCHES = ("cholesky_64x256_f32", "solve_64x256_f32", "eigh_512_f32", "svd_512_f32")


def run_linalg(build, rounds, runs):
    """bench_linalg, jax.jit of the same jnp.linalg calls and NumPy in alternating
    rounds; the peers as they come (OpenBLAS on every core) and with one OpenBLAS
    thread, as jx runs LAPACK (its pool splits the stack instead)."""
    per_round = alternate(rounds, [
        ("jx", jx_side(build, "bench_linalg", runs)),
        ("jax", jax_side(LINALG_PEER, runs, ("jax", "default"))),
        ("jax1", jax_side(LINALG_PEER, runs, ("jax", 1))),
        ("numpy", jax_side(LINALG_PEER, runs, ("numpy", "default"))),
        ("numpy1", jax_side(LINALG_PEER, runs, ("numpy", 1)))])
    print_rounds(f"bench_linalg, {rounds} alternating rounds", per_round, LINALG_BENCHES,
                 [("jax", "jax.jit"), ("jax1", "jax.jit, 1 BLAS thread"), ("numpy", "numpy"),
                  ("numpy1", "numpy, 1 BLAS thread")])
    print(f"\nmedians of {runs} calls a round; jx on {jx_threads()} threads")


# bench_fft's workloads (its header says what each is) on the same shapes.
# Args: runs, peer ("jax" or "numpy").
FFT_PEER = r"""
import json, statistics, sys, time
runs, peer = int(sys.argv[1]), sys.argv[2]
import numpy as np
r = np.random.default_rng(0)
z = (r.standard_normal(1 << 20, np.float32) + 1j * r.standard_normal(1 << 20, np.float32)).astype(np.complex64)
img = r.standard_normal((1024, 1024), np.float32)
if peer == "jax":
    import jax, jax.numpy as jnp
    z, img = jnp.asarray(z), jnp.asarray(img)
    lib, ready, wrap = jnp.fft, jax.block_until_ready, jax.jit
else:  # NumPy's pocketfft keeps complex64 in single precision (NumPy 2)
    lib, ready, wrap = np.fft, lambda x: x, lambda f: f
spectrum = lib.rfft2(img)  # c64 [1024, 513]
cases = [("fft_2p20_c64", wrap(lib.fft), z), ("rfft2_1024_f32", wrap(lib.rfft2), img),
         ("irfft2_1024_f32", wrap(lambda x: lib.irfft2(x, s=(1024, 1024))), spectrum)]
ts = {n: [] for n, _, _ in cases}
for n, f, x in cases:
    ready(f(x))
for _ in range(runs):
    for n, f, x in cases:
        t0 = time.perf_counter_ns(); ready(f(x)); ts[n].append(time.perf_counter_ns() - t0)
for n, _, _ in cases:
    print(json.dumps({"bench": n, "impl": peer, "median_ns": statistics.median(ts[n])}))
"""

FFT_BENCHES = ("fft_2p20_c64", "rfft2_1024_f32", "irfft2_1024_f32")


def run_fft(build, rounds, runs):
    """bench_fft, jax.jit of the same jnp.fft calls and NumPy in alternating rounds."""
    per_round = alternate(rounds, [
        ("jx", jx_side(build, "bench_fft", runs)),
        ("jax", jax_side(FFT_PEER, runs, ("jax",))),
        ("numpy", jax_side(FFT_PEER, runs, ("numpy",)))])
    print_rounds(f"bench_fft, {rounds} alternating rounds", per_round, FFT_BENCHES,
                 [("jax", "jax.jit"), ("numpy", "numpy")])
    print(f"\nmedians of {runs} calls a round; jx on {jx_threads()} threads")


# The GPT sizes of --sizes: (layers, d_model, context, batch); heads of width 32.
GPT_SIZES = {"small": (2, 128, 64, 32), "ref": (4, 256, 128, 16), "large": (8, 512, 256, 8)}


def alternate(rounds, sides):
    """Runs each of sides, [(impl, fn() -> {bench: median_ns})], in turn, `rounds`
    times over: on a shared machine the load drifts, and only measurements taken
    seconds apart compare. {bench: {impl: {round: median_ns}}}."""
    out = {}
    for r in range(rounds):
        for impl, fn in sides:
            for b, v in fn().items():
                out.setdefault(b, {}).setdefault(impl, {})[r] = v
    return out


def print_rounds(title, per_round, names, peers):
    """A markdown table: jx's and each peer's median over rounds, and per peer the
    median and range (min-max) of jx/peer taken within each round."""
    print(f"\n| {title} | jx | " + " | ".join(t for _, t in peers) + " | "
          + " | ".join(f"jx/{t} median (range)" for _, t in peers) + " |")
    print("|---" * (2 + 2 * len(peers)) + "|")
    for name in names:
        r = per_round.get(name, {})
        jx = r.get("jx", {})
        meds = [statistics.median(v.values()) if v else None
                for v in [jx] + [r.get(i, {}) for i, _ in peers]]
        cells = ["n/a" if m is None else f"{m / 1e3:.2f} us" if m < 1e6 else f"{m / 1e6:.1f} ms"
                 for m in meds]
        for i, _ in peers:
            q = [jx[k] / r[i][k] for k in jx if k in r.get(i, {})]
            cells.append(f"{statistics.median(q):.2f} ({min(q):.2f}-{max(q):.2f}, {len(q)} rounds)"
                         if q else "n/a")
        print(f"| {name} | " + " | ".join(cells) + " |")


def jx_side(build, prog, runs, args=()):
    """fn() -> {bench: median_ns} running bench/<prog> once."""
    return lambda: {b: d["jx"]["median_ns"] for b, d in
                    side_by_side(build, prog, None, runs, args=args).items() if "median_ns" in d["jx"]}


def jax_side(script, runs, args=()):
    """fn() -> {bench: median_ns} running the JAX peer script once."""
    return lambda: {b: d["jax"]["median_ns"] for b, d in
                    side_by_side("", None, script, runs, args=args).items() if "median_ns" in d["jax"]}


def run_gpt_sizes(build, sizes, rounds, runs):
    """The GPT step at each of sizes (GPT_SIZES' names) in jx (bench_gpt), PyTorch
    eager and jax.jit + Optax, in alternating rounds of `runs` steps each."""
    for name in sizes:
        L, D, T, B = GPT_SIZES[name]
        per_round = alternate(rounds, [
            ("jx", jx_side(build, "bench_gpt", runs, (L, D, T, B))),
            ("torch", lambda: run_torch("gpt", runs, False, (L, D, T, B)).get("torch", {})),
            ("jax", jax_side(GPT_JAX, runs, (L, D, T, B)))])
        print_rounds(f"GPT {name}: {L} layers, d {D}, context {T}, batch {B}", per_round,
                     ("gpt_step",), [("torch", "torch eager"), ("jax", "jax.jit")])
    print(f"\nmedians of {runs} steps a round; PyTorch on {jx_threads()} threads")


# The cold first call: the ref GPT's width, context and batch at several depths,
# jx with an empty kernel cache (a fresh JX_CACHE_DIR) against jax.jit in a
# fresh process (its persistent compilation cache is off by default).
COLD_SIZE = (256, 128, 16)  # d, context, batch


def cold_jx(build, layers):
    """fn() -> {bench: median_ns}: bench_gpt's first call (trace + compile + run)
    with an empty kernel cache, and the CPU seconds of its trace and compile
    (the compiler's counted) as gpt_step_compile_cpu, in ns like the rest."""
    def fn():
        with tempfile.TemporaryDirectory() as cache:
            r = subprocess.run([os.path.join(build, "bench", "bench_gpt"), "1", str(layers)] +
                               [str(v) for v in COLD_SIZE], capture_output=True, text=True,
                               env=dict(os.environ, JX_CACHE_DIR=cache))
        if r.returncode != 0:
            print(f"note: bench_gpt failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
            return {}
        for line in r.stdout.splitlines():
            d = json.loads(line)
            if d["bench"] == "gpt_step_first_call":
                return {"gpt_step_first_call": d["median_ns"],
                        "gpt_step_compile_cpu": d["compile_cpu_s"] * 1e9}
        return {}
    return fn


def run_cold(build, depths, rounds):
    """The cold first call of the GPT step at each depth, jx and jax.jit in
    alternating rounds: medians and ranges of jx/JAX, and how jx's CPU seconds
    to trace and compile the step (the compiler runs counted) grow per added
    layer."""
    cpu = {}
    for L in depths:
        per_round = alternate(rounds, [
            ("jx", cold_jx(build, L)),
            ("jax", jax_side(GPT_JAX, 1, (L,) + COLD_SIZE))])
        print_rounds(f"cold first call, GPT {L} layers, d {COLD_SIZE[0]}, context {COLD_SIZE[1]}, "
                     f"batch {COLD_SIZE[2]}", per_round, ("gpt_step_first_call",), [("jax", "jax.jit")])
        c = per_round.get("gpt_step_compile_cpu", {}).get("jx", {})
        if c:
            cpu[L] = statistics.median(c.values()) / 1e9
            print(f"jx's CPU to trace and compile: {cpu[L]:.2f} s (median of {len(c)} rounds)")
    ds = sorted(cpu)
    for a, b in zip(ds, ds[1:]):
        print(f"jx's trace + compile CPU from {a} to {b} layers: "
              f"{100 * (cpu[b] / cpu[a] - 1) / (b - a):+.1f} % per added layer")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


def run_rounds(build, prog, script, names, rounds, runs):
    """bench/<prog> and its JAX peer script in alternating rounds."""
    per_round = alternate(rounds, [("jx", jx_side(build, prog, runs)),
                                   ("jax", jax_side(script, runs))])
    print_rounds(f"{prog}, {rounds} alternating rounds", per_round, names, [("jax", "jax")])


# Decoding with a KV cache (bench_generate): the same GPT (pre-norm blocks,
# tied head, gelu tanh, layer norms eps 1e-5), a 128-token prompt, 256 new
# tokens, greedy, each new token read on the host as it is made (as jx
# streams it). Args: runs, models (ref|gpt2s|all), batches (1|16|all),
# threads. Prints {"bench": "generate_<model>_b<batch>", "impl": ...,
# "median_ns": decode time per step}.
GEN_COMMON = r"""
import json, statistics, sys, time
runs, which, batches, threads = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
MODELS = {"ref": (4, 256, 8), "gpt2s": (12, 768, 12)}
P, NEW, V, CTX = 128, 256, 256, 384
CASES = [(m, b) for m in ("ref", "gpt2s") for b in (1, 16)
         if which in ("all", m) and batches in ("all", str(b))]
def report(impl, m, b, per_step):
    print(json.dumps({"bench": f"generate_{m}_b{b}", "impl": impl,
                      "median_ns": statistics.median(per_step),
                      "decode_tokens_per_s": b * 1e9 / statistics.median(per_step)}), flush=True)
"""

GEN_JAX = GEN_COMMON + r"""
import numpy as np
import jax, jax.numpy as jnp
def init(L, d, key):
    ks = iter(jax.random.split(key, 2 + 6 * L))
    n = lambda s: 0.02 * jax.random.normal(next(ks), s, jnp.float32)
    z, o = (lambda k: jnp.zeros(k, jnp.float32)), (lambda k: jnp.ones(k, jnp.float32))
    blocks = [dict(ln1s=o(d), ln1b=z(d), wq=n((d, d)), wk=n((d, d)), wv=n((d, d)), wo=n((d, d)),
                   bq=z(d), bk=z(d), bv=z(d), bo=z(d), ln2s=o(d), ln2b=z(d), fc=n((d, 4 * d)),
                   fcb=z(4 * d), proj=n((4 * d, d)), projb=z(d)) for _ in range(L)]
    return dict(wte=n((V, d)), wpe=n((CTX, d)), blocks=blocks, lnfs=o(d), lnfb=z(d))
def ln(x, s, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * s + b
def forward(p, tok, caches, pos, H):
    B, T = tok.shape
    d = p["wte"].shape[1]
    dh = d // H
    h = p["wte"][tok] + jax.lax.dynamic_slice_in_dim(p["wpe"], pos, T)[None]
    new = []
    for b, (kc, vc) in zip(p["blocks"], caches):
        x = ln(h, b["ln1s"], b["ln1b"])
        q = (x @ b["wq"] + b["bq"]).reshape(B, T, H, dh)
        kc = jax.lax.dynamic_update_slice(kc, (x @ b["wk"] + b["bk"]).reshape(B, T, H, dh), (0, pos, 0, 0))
        vc = jax.lax.dynamic_update_slice(vc, (x @ b["wv"] + b["bv"]).reshape(B, T, H, dh), (0, pos, 0, 0))
        s = jnp.einsum("bqhd,bkhd->bhqk", q, kc) / jnp.sqrt(float(dh))
        mask = jnp.arange(kc.shape[1])[None, :] <= (pos + jnp.arange(T))[:, None]
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(jnp.where(mask, s, -1e30), -1), vc)
        h = h + o.reshape(B, T, d) @ b["wo"] + b["bo"]
        x = ln(h, b["ln2s"], b["ln2b"])
        h = h + jax.nn.gelu(x @ b["fc"] + b["fcb"]) @ b["proj"] + b["projb"]
        new.append((kc, vc))
    h = ln(h[:, -1], p["lnfs"], p["lnfb"])
    return jnp.argmax(h @ p["wte"].T, -1).astype(jnp.int32), new
prefill = jax.jit(forward, static_argnames="H")
step = jax.jit(lambda p, tok, caches, pos, H: forward(p, tok[:, None], caches, pos, H),
               static_argnames="H", donate_argnums=(2,))
for m, B in CASES:
    L, d, H = MODELS[m]
    p = init(L, d, jax.random.PRNGKey(0))
    prompt = jnp.asarray([[(i * 37 + 11) % 256 for i in range(P)]] * B, jnp.int32)
    per_step = []
    for r in range(runs + 1):  # run 0 compiles
        caches = [(jnp.zeros((B, CTX, H, d // H)), jnp.zeros((B, CTX, H, d // H))) for _ in range(L)]
        tok, caches = prefill(p, prompt, caches, 0, H)
        np.asarray(tok)
        t0 = time.perf_counter_ns()
        for i in range(NEW - 1):
            tok, caches = step(p, tok, caches, P + i, H)
            np.asarray(tok)  # read as it is made
        if r:
            per_step.append((time.perf_counter_ns() - t0) / (NEW - 1))
    report("jax", m, B, per_step)
"""

GEN_TORCH = GEN_COMMON + r"""
import torch
torch.set_num_threads(threads)
F = torch.nn.functional
def init(L, d):
    g = torch.Generator().manual_seed(0)
    n = lambda *s: 0.02 * torch.randn(*s, generator=g)
    blocks = [dict(ln1s=torch.ones(d), ln1b=torch.zeros(d), wq=n(d, d), wk=n(d, d), wv=n(d, d),
                   wo=n(d, d), bq=torch.zeros(d), bk=torch.zeros(d), bv=torch.zeros(d),
                   bo=torch.zeros(d), ln2s=torch.ones(d), ln2b=torch.zeros(d), fc=n(d, 4 * d),
                   fcb=torch.zeros(4 * d), proj=n(4 * d, d), projb=torch.zeros(d)) for _ in range(L)]
    return dict(wte=n(V, d), wpe=n(CTX, d), blocks=blocks, lnfs=torch.ones(d), lnfb=torch.zeros(d))
def forward(p, tok, caches, pos, H):
    B, T = tok.shape
    d = p["wte"].shape[1]
    dh = d // H
    h = p["wte"][tok] + p["wpe"][pos:pos + T]
    for b, (kc, vc) in zip(p["blocks"], caches):
        x = F.layer_norm(h, (d,), b["ln1s"], b["ln1b"], 1e-5)
        q = torch.addmm(b["bq"], x.reshape(-1, d), b["wq"]).view(B, T, H, dh).transpose(1, 2)
        kc[:, :, pos:pos + T] = torch.addmm(b["bk"], x.reshape(-1, d), b["wk"]).view(B, T, H, dh).transpose(1, 2)
        vc[:, :, pos:pos + T] = torch.addmm(b["bv"], x.reshape(-1, d), b["wv"]).view(B, T, H, dh).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, kc[:, :, :pos + T], vc[:, :, :pos + T], is_causal=T > 1)
        h = h + torch.addmm(b["bo"], o.transpose(1, 2).reshape(-1, d), b["wo"]).view(B, T, d)
        x = F.layer_norm(h, (d,), b["ln2s"], b["ln2b"], 1e-5)
        u = F.gelu(torch.addmm(b["fcb"], x.reshape(-1, d), b["fc"]), approximate="tanh")
        h = h + torch.addmm(b["projb"], u, b["proj"]).view(B, T, d)
    h = F.layer_norm(h[:, -1], (d,), p["lnfs"], p["lnfb"], 1e-5)
    return (h @ p["wte"].T).argmax(-1)
with torch.no_grad():
    for m, B in CASES:
        L, d, H = MODELS[m]
        p = init(L, d)
        prompt = torch.tensor([[(i * 37 + 11) % 256 for i in range(P)]] * B)
        per_step = []
        for r in range(runs + 1):  # run 0 warms up
            caches = [(torch.zeros(B, H, CTX, d // H), torch.zeros(B, H, CTX, d // H)) for _ in range(L)]
            tok = forward(p, prompt, caches, 0, H)
            tok.tolist()
            t0 = time.perf_counter_ns()
            for i in range(NEW - 1):
                tok = forward(p, tok[:, None], caches, P + i, H)
                tok.tolist()  # read as it is made
            if r:
                per_step.append((time.perf_counter_ns() - t0) / (NEW - 1))
        report("torch", m, B, per_step)
"""


def run_generate(build, runs, rounds, which="all", batches="all"):
    """bench_generate (jx) next to the same KV-cache decoding in JAX (jax.jit
    decode step, cache donated) and PyTorch (eager, torch.no_grad, cache
    written in place), on jx's thread count, in alternating rounds: per case
    each side's median tokens/s over the rounds, and the median and range of
    jx / the faster peer taken within each round."""
    path = os.path.join(build, "bench", "bench_generate")
    cmds = [("jx", [path, str(runs), which, batches], {}),
            ("jax", [sys.executable, "-c", GEN_JAX, str(runs), which, batches, str(jx_threads())],
             {"JAX_PLATFORMS": "cpu"}),
            ("torch", [sys.executable, "-c", GEN_TORCH, str(runs), which, batches,
                       str(jx_threads())], {})]
    tps = {}  # bench -> impl -> [tokens/s per round]
    for r in range(rounds):
        for impl, cmd, env in cmds:
            p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **env))
            for line in p.stdout.splitlines():
                d = json.loads(line)
                tps.setdefault(d["bench"], {}).setdefault(d["impl"], {})[r] = \
                    d["decode_tokens_per_s"]
            if p.returncode != 0:
                err = p.stderr.strip().splitlines()
                print(f"note: the {impl} side of generate failed: {err[-1] if err else '?'}",
                      file=sys.stderr)
    print(f"\n| decode, 128-token prompt, 256 new tokens ({jx_threads()} threads, {rounds} "
          "rounds) | jx tokens/s | JAX tokens/s | PyTorch tokens/s | jx / faster peer median "
          "(range) |")
    print("|---|---|---|---|---|")
    for m, title in (("ref", "GPT 4x256"), ("gpt2s", "GPT-2 small shape 12x768")):
        for b in (1, 16):
            t = tps.get(f"generate_{m}_b{b}")
            if not t:
                continue
            med = {i: statistics.median(t[i].values()) for i in ("jx", "jax", "torch") if i in t}
            cells = [f"{med[i]:.0f}" if i in med else "n/a" for i in ("jx", "jax", "torch")]
            ratios = [t["jx"][r] / max(t[i][r] for i in ("jax", "torch") if i in t and r in t[i])
                      for r in t.get("jx", {})
                      if any(i in t and r in t[i] for i in ("jax", "torch"))]
            ratio = (f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
                     if ratios else "n/a")
            print(f"| {title}, batch {b} | " + " | ".join(cells) + f" | {ratio} |", flush=True)
    return tps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", default="",
                    help="comma-separated jx programs to run (e.g. bench_mlp,bench_reduce); "
                         "the peers still run everything")
    ap.add_argument("--workload",
                    choices=("all", "gpt", "mlp", "generate", "scan", "dispatch", "linalg",
                             "fft", "cold"),
                    default="all",
                    help="gpt / mlp: only that train step, in jx, JAX and PyTorch; generate: "
                         "KV-cache decoding in jx, JAX and PyTorch; scan / dispatch: "
                         "bench_scan / bench_dispatch and JAX in alternating rounds; linalg / fft: "
                         "bench_linalg / bench_fft, JAX and NumPy in alternating rounds; cold: "
                         "the GPT step's first call with an empty kernel cache against jax.jit's "
                         "at --layers depths, in alternating rounds")
    ap.add_argument("--sizes", default="",
                    help="gpt: comma-separated sizes of " + ", ".join(
                        f"{k} {v}" for k, v in GPT_SIZES.items()) + " (layers, d, context, batch) "
                    "run in alternating rounds with PyTorch eager and jax.jit")
    ap.add_argument("--rounds", type=int, default=5,
                    help="alternating rounds of --sizes, scan, dispatch, linalg and fft (at least 5) and of "
                         "generate (each round one decoding per side)")
    ap.add_argument("--layers", default="2,4,16", help="cold: comma-separated GPT depths")
    ap.add_argument("--models", default="all", help="generate: ref, gpt2s or all")
    ap.add_argument("--batches", default="all", help="generate: 1, 16 or all")
    ap.add_argument("--no-torch-compile", action="store_true",
                    help="PyTorch eager only (torch.compile's first call takes a while)")
    ap.add_argument("--realtime", action="store_true",
                    help="run every timed process under SCHED_FIFO (chrt -f 50; root): on a "
                         "shared machine the other processes then take none of the cores")
    args = ap.parse_args()
    if args.realtime:
        if not shutil.which("chrt") or os.geteuid() != 0:
            ap.error("--realtime: needs chrt (util-linux) and root, to run under SCHED_FIFO")
        PREFIX[:] = ["chrt", "-f", "50"]
    if args.only == "bench_scan":  # the scan comparison alone
        run_scan(args.build, args.runs)
        return
    if args.workload in ("scan", "dispatch", "linalg", "fft") or args.sizes:
        if args.rounds < 5:
            ap.error("--rounds: at least 5 (a median and range of fewer says little)")
    if args.workload == "gpt" and args.sizes:
        sizes = [z for z in args.sizes.split(",") if z]
        bad = [z for z in sizes if z not in GPT_SIZES]
        if bad:
            ap.error(f"--sizes: unknown {', '.join(bad)} (known: {', '.join(GPT_SIZES)})")
        run_gpt_sizes(args.build, sizes, args.rounds, min(args.runs, 5))
        return
    if args.workload == "scan":
        run_rounds(args.build, "bench_scan", SCAN_JAX, ("scan_1000_jit", "rnn_scan_1000_jit"),
                   args.rounds, args.runs)
        return
    if args.workload == "cold":
        run_cold(args.build, [int(v) for v in args.layers.split(",") if v], args.rounds)
        return
    if args.workload == "linalg":
        run_linalg(args.build, args.rounds, args.runs)
        return
    if args.workload == "fft":
        run_fft(args.build, args.rounds, args.runs)
        return
    if args.workload == "dispatch":
        run_rounds(args.build, "bench_dispatch", DISPATCH_JAX,
                   ("dispatch_add_f32x8", "jit_call_blocked_f32x8"), args.rounds, args.runs)
        return
    if args.workload == "gpt":
        run_gpt(args.build, min(args.runs, 5), not args.no_torch_compile)
        return
    if args.workload == "generate":
        run_generate(args.build, 1, args.rounds, args.models, args.batches)
        return
    if args.workload == "mlp":
        print_mlp(run_mlp(args.build, args.runs, not args.no_torch_compile))
        return
    jx = run_jx(args.build, args.runs, [p for p in args.only.split(",") if p])
    notes = jx.pop("_notes", {})
    results = {"jx": jx.pop("jx", {})}
    peers = []
    if "sgemm" in jx:
        results["openblas"] = jx["sgemm"]
        peers.append("openblas")
    for name, fn in (("numpy", run_numpy), ("jax", run_jax)):
        try:
            results[name] = fn(args.runs)
            peers.append(name)
        except ImportError:
            print(f"note: {name} is not installed; no {name} column", file=sys.stderr)
    jstep = results.get("jax", {}).pop("_mlp_step_fn", None)
    mlp_rows = run_mlp(args.build, args.runs, not args.no_torch_compile, jstep)
    if jstep and "jx" in mlp_rows["mlp_step"] and "mlp_step" in results["jx"]:
        results["jx"]["mlp_step"] = mlp_rows["mlp_step"]["jx"]
        results["jax"]["mlp_step"] = mlp_rows["mlp_step"]["jax"]
    benches = ["dispatch_add_f32x8", "add_f32_16M", "exp_f32_16M", "sum_lastaxis_f32_4096x4096"]
    benches += [f"matmul_f32_{n}" for n in MATMUL_SIZES]
    benches += ["fused_chain_f32_16M_eager", "fused_chain_f32_16M", "mlp_step", "mlp_step_first_call"]
    head = f"| {'bench':28} | {'jx':>12} |" + "".join(
        f" {p:>12} | {'jx/' + p:>9} |" for p in peers)
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")

    def cell(v):
        if v is None:
            return "n/a"
        return f"{v / 1e3:.2f} us" if v < 1e6 else f"{v / 1e6:.2f} ms"

    for b in benches:
        jxv = results["jx"].get(b)
        row = f"| {b:28} | {cell(jxv):>12} |"
        for p in peers:
            pv = results[p].get(b)
            ratio = f"{jxv / pv:.2f}" if jxv and pv else "n/a"
            row += f" {cell(pv):>12} | {ratio:>9} |"
        print(row)
    print("\nmedians over", args.runs, "runs; n/a: the peer does not run that workload here")
    if "triad" in notes:
        print(notes["triad"])
    print("fused_chain_f32_16M_eager: jx without jit (six passes) against NumPy (also six passes);")
    print("fused_chain_f32_16M and mlp_step: jx_jit against jax.jit; mlp_step_first_call: trace + compile")
    print("mlp_step: medians of 3 alternating rounds of bench_mlp and the jax.jit step")
    if "openblas" in peers:
        print("openblas: cblas_sgemm called directly by bench_matmul;",
              notes.get("openblas", "kernel unknown"))
    print_mlp(mlp_rows)
    run_allreduce(args.build, args.runs)
    run_sharded(args.build, args.runs)
    run_gpt(args.build, min(args.runs, 5), not args.no_torch_compile)
    run_scan(args.build, args.runs)


if __name__ == "__main__":
    main()
