"""Runs the jx benchmarks and the same workloads in NumPy (and JAX eager for
dispatch and matmul, when installed) in one go, and prints a table of medians
and ratios. bench_matmul also times cblas_sgemm called directly in the same
process; that appears as the "openblas" column.

    python3 bench/compare.py [--build build] [--runs 7]

Each jx program (build/bench/bench_*) prints JSON lines
{"bench": ..., "impl": "jx", "median_ns": ..., "runs": ...}; the peers here are
timed the same way (median over runs, one warm-up). A missing peer is reported
as such, never silently skipped. Ratio = jx median / peer median (lower is better
for jx).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
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


def run_jx(build, runs):
    """{impl: {bench: median_ns}} from the jx programs (impl "jx", or "sgemm"
    for the direct OpenBLAS calls of bench_matmul)."""
    out = {}
    for prog in ("bench_dispatch", "bench_elementwise", "bench_reduce", "bench_matmul"):
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
    return out


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
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    jx = run_jx(args.build, args.runs)
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
    benches = ["dispatch_add_f32x8", "add_f32_16M", "exp_f32_16M", "sum_lastaxis_f32_4096x4096"]
    benches += [f"matmul_f32_{n}" for n in MATMUL_SIZES]
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
    if "openblas" in peers:
        print("openblas: cblas_sgemm called directly by bench_matmul;",
              notes.get("openblas", "kernel unknown"))


if __name__ == "__main__":
    main()
