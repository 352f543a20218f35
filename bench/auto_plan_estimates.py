#!/usr/bin/env python3
"""The automatic sharding plan's estimate against the measured step, on the
issue's runs: the GPT's AdamW training step (4 layers, d 256, context 128,
batch 16) on 8 CPU devices, meshes data=8, data=4,model=2 and
data=2,model=4, each planned under 100, 50 and 30 % of data parallel's
measured peak. Each configuration is one run of bench_auto_plan (the plan
trains for ROUNDS timed steps after two warm ones, as a user's loop runs:
the parameters and optimizer state donated, each step's outputs the next
step's inputs as they come, in the layouts the plan takes them in; data
parallel runs two steps for its peak in the first run of each mesh, whose
figure the others reuse). Given several bench binaries (say, two builds of
jx), each configuration runs with each in turn, so that they alternate
under the same load. Prints a markdown table: the estimate (compute +
communication + the cores' idle time); its busy part (compute +
communication) against the step's CPU time (every thread) over the cores
the devices share (median and range of the rounds: the cores' busy time,
the figure the busy part is of); the same over the slowdown other jobs then
gave the cores (bench_auto_plan's: the compute figures measured again
before and after the steps against those the estimate used); the step's
wall time (median and range); the share of the machine's cores the
process had during the steps (bench_auto_plan's: the cores it ran on and
those left idle; the rest ran other jobs); the estimate at that share (the
estimate over the share) and its error against the wall time; each step
against the estimate at its own share (median error and range: a step's
time paired with the share it had); the estimated and measured peak per
device and the load average (1 minute) before the run.

  bench/auto_plan_estimates.py [--rounds N] [--recalibrate] BENCH_BINARY...

--recalibrate removes the mesh figures jx keeps in its cache directory
(machine_model_*) before each run, so that every run measures them afresh,
under the load it then runs at: on a machine shared with other jobs, the
figures of an earlier hour describe another machine.
"""
import glob
import os
import re
import subprocess
import sys

MESHES = ["data=8", "data=4,model=2", "data=2,model=4"]
LIMITS = [100, 50, 30]
LINE = re.compile(
    r"auto\s+measured\s+([\d.]+) ms \(([\d.]+)-([\d.]+)\)\s+estimated\s+([\d.]+) ms "
    r"\(compute ([\d.]+), comm ([\d.]+), idle ([\d.]+), (\d+) collectives\)"
    r".*peak est (\d+) measured (\d+)"
    r"(?:.*CPU per core ([\d.]+) ms \(([\d.]+)-([\d.]+)\)\s+at the cores' speed ([\d.]+) ms "
    r"\(slowdown ([\d.]+)\))?(?:.*share of the cores ([\d.]+) \(([\d.]+)-([\d.]+)\), "
    r"idle ([\d.]+))?(?:.*each step at its share ([-+][\d.]+) % \(([-+][\d.]+) to ([-+][\d.]+)\))?")


DP_PEAK = re.compile(r"data parallel's measured peak (\d+) bytes")


def cache_dir():
    if os.environ.get("JX_CACHE_DIR"):
        return os.environ["JX_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jx")


def run(bench, mesh, limit, rounds, dp_peak, recalibrate=False):
    """One configuration's row, and data parallel's peak (given or measured)."""
    if recalibrate:
        for path in glob.glob(os.path.join(cache_dir(), "machine_model_*")):
            os.remove(path)
    load = os.getloadavg()[0]
    cmd = ["nice", bench, "gpt", "8", mesh, str(rounds), "--gpt", "4,256,128,16", "--limit",
           str(limit), "--auto-only"] + (["--dp-peak", str(dp_peak)] if dp_peak else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = LINE.search(out.stdout)
    peak = DP_PEAK.search(out.stdout)
    dp_peak = dp_peak or (int(peak.group(1)) if peak else 0)
    if not m:
        return f"| {mesh} | {limit} % | failed: {(out.stderr or out.stdout).strip()[-200:]} |", dp_peak
    (med, lo, hi, est, comp, comm, idle_est, ncoll, pest, pmeas, cpu, clo, chi, speed, slow, share,
     slo, shi, idle, pe, plo, phi) = m.groups()
    paired = f"{float(pe):+.1f} % ({float(plo):+.0f} to {float(phi):+.0f})" if pe else "-"
    med, lo, hi, est, comp, comm, idle_est = map(float, (med, lo, hi, est, comp, comm, idle_est))
    busy = comp + comm  # the cores' busy time, the figure the CPU time measures
    cpu_text = "- | - | - | -"
    if cpu:
        cpu, clo, chi, speed, slow = map(float, (cpu, clo, chi, speed, slow))
        cpu_text = (f"{cpu:.0f} ({clo:.0f}-{chi:.0f}) | {100 * (busy / cpu - 1):+.0f} % "
                    f"| {speed:.0f} ({slow:.2f}) | {100 * (busy / speed - 1):+.0f} %")
    share_text = "- | - | - | -"
    if share:
        at = est / float(share)
        share_text = (f"{float(share):.2f} ({float(slo):.2f}-{float(shi):.2f}) "
                      f"| {at:.0f} | {100 * (at / med - 1):+.0f} % | {paired}")
    pest, pmeas = float(pest), float(pmeas)
    return (f"| {mesh} | {limit} % | {est:.0f} ({comp:.0f} + {comm:.0f} + {idle_est:.0f}) "
            f"| {cpu_text} "
            f"| {med:.0f} ({lo:.0f}-{hi:.0f}) | {share_text} | {pest / 1e6:.1f} "
            f"| {pmeas / 1e6:.1f} | {100 * (pest / pmeas - 1):+.1f} % | {load:.1f} |"), dp_peak

def main():
    args = sys.argv[1:]
    rounds = 5
    recalibrate = "--recalibrate" in args
    if recalibrate:
        args.remove("--recalibrate")
    if "--rounds" in args:
        k = args.index("--rounds")
        rounds = int(args[k + 1])
        del args[k:k + 2]
    many = len(args) > 1
    print(("| build " if many else "") +
          "| mesh | limit | estimated ms (compute + comm + idle) | CPU per core ms, median (range) "
          "| its error (busy: compute + comm) "
          "| at the figures' speed, ms (slowdown) | its error "
          "| wall ms, median (range) | share of the cores (range) | estimate at the share, ms "
          "| its error | each step at its share: error (range) "
          "| estimated peak MB | measured peak MB | peak error | load |")
    print("| --- " * (16 if many else 15) + "|")
    for mesh in MESHES:
        dp_peak = {}
        for limit in LIMITS:
            for b, bench in enumerate(args):
                row, dp_peak[b] = run(bench, mesh, limit, rounds, dp_peak.get(b, 0), recalibrate)
                print((f"| {b} " if many else "") + row, flush=True)


if __name__ == "__main__":
    main()
