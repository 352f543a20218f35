#!/usr/bin/env python3
"""jx's all-reduce over processes that met at a coordinator (on one host: in
shared memory; Gloo between hosts) against the same on the MPI plugin
(bench_dist_allreduce: a mesh axis of one device per process, f32 sum), in
alternating rounds so that both see the same machine; and the time a job of
8, 16, 32 local processes takes to join at a coordinator.

    python3 bench/dist_allreduce.py [--build build] [--rounds 3] [--procs 2,4] [--join 8,16,32]
                                    [--bind] [--copy] [--a2a]

--bind pins process p of either engine to CPU p mod the CPU count (taskset), as
mpirun binds its processes by default: on a machine busy with other work, two
unbound processes that hand each other work often share one CPU, and then
every hand-off waits for the other to be scheduled.

--copy adds a third contender to each round: the coordinator's job with
JX_SHM_SINGLE_COPY=0 (large buffers copied through the shared memory segment
instead of read from the peers' processes), for its own ratio to MPI.

--a2a measures all-to-all instead (each process sends the size, a P-th of it
to each process).

Prints, per process count and size, the median time of each engine (over
the rounds' medians) and the median and range of the per-round ratio
MPI time / coordinator time (>= 1: as fast); then the join times.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse(out):
    times = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0].isdigit():
            times[int(f[0])] = float(f[1])
        if len(f) == 3 and f[0] == "join":
            times["join"] = float(f[2])
    return times


def pinned(cmd, p, bind):
    return ["taskset", "-c", str(p % os.cpu_count())] + cmd if bind else cmd


def run_gloo(build, np, args, bind, timeout=900, single_copy=None):
    env = dict(os.environ, JX_NUM_CPU_DEVICES="1", JX_NUM_PROCESSES=str(np),
               JX_COORDINATOR_ADDRESS=f"127.0.0.1:{free_port()}",
               JX_GLOO_PLUGIN=os.path.join(build, "libjx_gloo.so"))
    if single_copy is not None:
        env["JX_SHM_SINGLE_COPY"] = single_copy
    exe = os.path.join(build, "bench", "bench_dist_allreduce")
    procs = [subprocess.Popen(pinned([exe] + args, p, bind), env=dict(env, JX_PROCESS_ID=str(p)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in range(np)]
    outs = [p.communicate(timeout=timeout) for p in procs]
    if any(p.returncode for p in procs):
        sys.exit("gloo run failed:\n" + "\n".join(o[1] for o in outs))
    return parse(outs[0][0])


def run_mpi(build, np, args, bind, timeout=900):
    env = dict(os.environ, JX_NUM_CPU_DEVICES="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
               JX_MPI_PLUGIN=os.path.join(build, "libjx_mpi.so"))
    exe = os.path.join(build, "bench", "bench_dist_allreduce")
    cmd = [exe] + args
    if bind:  # each rank pins itself by its local rank (mpirun cannot bind more ranks than cores)
        cmd = ["sh", "-c", f'exec taskset -c $((OMPI_COMM_WORLD_LOCAL_RANK % {os.cpu_count()})) "$@"',
               "sh"] + cmd
    r = subprocess.run(["mpirun", "-np", str(np), "--oversubscribe", "--bind-to", "none"] + cmd,
                       env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        sys.exit("mpi run failed:\n" + r.stderr)
    return parse(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--procs", default="2,4")
    ap.add_argument("--join", default="8,16,32")
    ap.add_argument("--min-bytes", default="1024")
    ap.add_argument("--bind", action="store_true")
    ap.add_argument("--max-bytes", default=str(64 << 20))
    ap.add_argument("--copy", action="store_true")
    ap.add_argument("--a2a", action="store_true")
    a = ap.parse_args()
    sizes = (["a2a"] if a.a2a else []) + [a.min_bytes, a.max_bytes]
    engines = [run_gloo, run_mpi]
    if a.copy:
        engines.append(lambda *args: run_gloo(*args, single_copy="0"))
    for np in [int(x) for x in a.procs.split(",") if x]:
        rounds = []
        for r in range(a.rounds):  # rotate which engine goes first
            order = [(r + i) % len(engines) for i in range(len(engines))]
            got = {e: engines[e](a.build, np, sizes, a.bind) for e in order}
            rounds.append([got[e] for e in range(len(engines))])
        what = "all-to-all" if a.a2a else "f32 sum"
        print(f"{np} processes{', bound' if a.bind else ''}, {what}, {a.rounds} rounds: medians "
              f"in us; ratio = MPI / coordinator{'; copy: JX_SHM_SINGLE_COPY=0' if a.copy else ''}")
        print(f"{'bytes':>10} {'coord us':>10} {'MPI us':>10} {'ratio':>6} {'range':>12}" +
              (f" {'copy us':>10} {'ratio':>6} {'range':>12}" if a.copy else ""))
        for size in sorted(rounds[0][0]):
            m = [x[1][size] for x in rounds]
            line = f"{size:>10}"
            for e in [0] + ([2] if a.copy else []):
                g = [x[e][size] for x in rounds]
                ratio = [mi / gi for gi, mi in zip(g, m)]
                line += f" {statistics.median(g):>10.1f}"
                if e == 0:
                    line += f" {statistics.median(m):>10.1f}"
                line += f" {statistics.median(ratio):>6.2f} {min(ratio):>5.2f}-{max(ratio):<5.2f}"
            print(line)
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        sys.stdout.flush()
    for np in [int(x) for x in a.join.split(",") if x]:
        t = [run_gloo(a.build, np, ["join"], False)["join"] for _ in range(a.rounds)]
        print(f"join of {np} local processes at a coordinator: median {statistics.median(t):.3f} s "
              f"(range {min(t):.3f}-{max(t):.3f}, {a.rounds} runs)")


if __name__ == "__main__":
    main()
